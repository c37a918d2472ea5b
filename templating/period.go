package templating

import (
	"errors"
	"strconv"
	"time"
)

// PeriodMessage is the message of a rotate.every that [ParsePeriod]
// refuses, in the CRD's rule on spec.rotate.every too
// (webhooks.TestPeriodSpellings checks that they agree).
const PeriodMessage = "must be a whole number of days (d) or hours (h) from 1h, at most 5 digits, for example 90d or 36h"

// RotateMessage is the message of a rotate block with neither a token nor
// a period, in the CRD's rule on spec.rotate too.
const RotateMessage = "needs a token, a period (every), or both"

// maxPeriodDigits keeps the longest period (99999 days) within a
// time.Duration and the CRD's rule cheap to bound.
const maxPeriodDigits = 5

// ParsePeriod parses rotate.every: a whole number without leading zero, of
// at most 5 digits, then its unit, d (24 hours) or h (hours). The grammar
// is the CRD's rule, ^[1-9][0-9]{0,4}[dh]$: the shortest period is 1h, so
// that a rotation never outpaces the resync that makes it; minutes and
// mixed units are left out, so that one spelling is read the same by the
// API server's CEL, the webhook and a person.
func ParsePeriod(s string) (time.Duration, error) {
	refused := errors.New(PeriodMessage)
	if len(s) < 2 || len(s) > maxPeriodDigits+1 || s[0] == '0' {
		return 0, refused
	}
	unit := time.Hour
	switch s[len(s)-1] {
	case 'd':
		unit = 24 * time.Hour
	case 'h':
	default:
		return 0, refused
	}
	digits := s[:len(s)-1]
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, refused
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0, refused
	}
	return time.Duration(n) * unit, nil
}
