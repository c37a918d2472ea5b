package templating_test

import (
	"testing"

	"github.com/ohmlab/ohmlab-controller/internal/validate/validatetest"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// TestParsePeriod: the grammar of rotate.every takes whole days or hours
// from 1h and refuses every other spelling with PeriodMessage.
func TestParsePeriod(t *testing.T) {
	for _, tc := range append(validatetest.PeriodCases, validatetest.PeriodCase{Name: "six digits", Every: "123456h"}) {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := templating.ParsePeriod(tc.Every)
			switch {
			case tc.Period == 0 && (err == nil || err.Error() != templating.PeriodMessage):
				t.Errorf("ParsePeriod(%q) = %v, %v; want the refusal %q", tc.Every, got, err, templating.PeriodMessage)
			case tc.Period != 0 && (err != nil || got != tc.Period):
				t.Errorf("ParsePeriod(%q) = %v, %v; want %v", tc.Every, got, err, tc.Period)
			}
		})
	}
}

// TestAnalyseRotationPeriod: a period alone is a rotation (no token
// needed), parsed into RotationPeriod; a bad one is InvalidRotation on
// spec.rotate.every; a rotate block with neither is refused.
func TestAnalyseRotationPeriod(t *testing.T) {
	analyse := func(r *templating.Rotate) templating.Analysis {
		return templating.Analyse(templating.Object{Namespace: "ns", Name: "n", Path: "ohmlab/p", Data: map[string]any{"k": "<random:8>"}, Rotate: r})
	}
	a := analyse(&templating.Rotate{Every: "90d"})
	if len(a.Problems) > 0 || a.RotationPeriod.Hours() != 90*24 || len(a.RotationKeys) != 1 {
		t.Errorf("every 90d: problems %v, period %v, keys %v", a.Problems, a.RotationPeriod, a.RotationKeys)
	}
	a = analyse(&templating.Rotate{Token: "t", Every: "30m"})
	want := []templating.Problem{{Reason: templating.ReasonInvalidRotation, Message: "spec.rotate.every " + templating.PeriodMessage}}
	if len(a.Problems) != 1 || a.Problems[0] != want[0] || a.RotationPeriod != 0 {
		t.Errorf("every 30m: problems %v, period %v; want %v", a.Problems, a.RotationPeriod, want)
	}
	if a = analyse(&templating.Rotate{}); len(a.Problems) != 1 || a.Problems[0].Reason != templating.ReasonInvalidRotation {
		t.Errorf("neither token nor every: problems %v, want one InvalidRotation", a.Problems)
	}
}
