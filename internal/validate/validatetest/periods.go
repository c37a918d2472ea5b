package validatetest

import "time"

// PeriodCase is one spelling of spec.rotate.every.
type PeriodCase struct {
	Name  string
	Every string
	// Period is templating.ParsePeriod's answer; 0 for a spelling it
	// refuses with templating.PeriodMessage, as the CRD's rule, the
	// webhook and `ohmlab validate` all do.
	Period time.Duration
}

// PeriodCases are periods the grammar takes and spellings it refuses, each
// within the CRD's 6 characters unless said, so that the rule decides.
var PeriodCases = []PeriodCase{
	{Name: "days", Every: "90d", Period: 90 * 24 * time.Hour},
	{Name: "hours", Every: "36h", Period: 36 * time.Hour},
	{Name: "the shortest", Every: "1h", Period: time.Hour},
	{Name: "five digits", Every: "99999d", Period: 99999 * 24 * time.Hour},

	{Name: "zero", Every: "0d"},
	{Name: "a leading zero", Every: "07d"},
	{Name: "minutes", Every: "30m"},
	{Name: "mixed units", Every: "1d12h"},
	{Name: "Go's duration", Every: "1h0m0s"},
	{Name: "an upper-case unit", Every: "90D"},
	{Name: "no unit", Every: "90"},
	{Name: "no number", Every: "d"},
	{Name: "a space", Every: "90 d"},
	{Name: "weeks", Every: "2w"},
	{Name: "a fraction", Every: "1.5d"},
	{Name: "a sign", Every: "+9d"},
}
