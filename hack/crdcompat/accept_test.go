package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAccept(t *testing.T) {
	rule := Change{CRD: "seeds.example.com", Version: "v1alpha1", Path: ".spec.token", Problem: "validation rule added: self.size() <= 8", Tightening: true}
	removed := Change{CRD: "seeds.example.com", Version: "v1alpha1", Path: ".spec.mode", Problem: "removed"}
	entry := func(c Change, why string) Acceptance {
		return Acceptance{CRD: c.CRD, Version: c.Version, Path: c.Path, Change: c.Problem, Why: why}
	}
	const why = "no stored object has a longer token: the controller refused them at every reconcile"
	tests := []struct {
		name         string
		changes      []Change
		accepted     []Acceptance
		wantRefused  []Change
		wantProblems []string
	}{
		{name: "nothing changed, nothing listed"},
		{name: "a tightening not listed", changes: []Change{rule}, wantRefused: []Change{rule}},
		{name: "a tightening listed with a reason", changes: []Change{rule}, accepted: []Acceptance{entry(rule, why)}},
		{
			name:         "a tightening listed without a reason",
			changes:      []Change{rule},
			accepted:     []Acceptance{entry(rule, "  \n")},
			wantProblems: []string{"seeds.example.com v1alpha1: .spec.token: validation rule added: self.size() <= 8: accepted without a reason: say in why: why no stored object breaks it, or why it must"},
		},
		{
			name:         "an entry naming no change: the release shipped it, or the rule changed",
			accepted:     []Acceptance{entry(rule, why)},
			wantProblems: []string{"seeds.example.com v1alpha1: .spec.token: validation rule added: self.size() <= 8: accepted, but not a tightening of the current CRDs against the released ones: remove the entry"},
		},
		{
			name:    "an entry naming another rule",
			changes: []Change{rule},
			accepted: []Acceptance{{CRD: rule.CRD, Version: rule.Version, Path: rule.Path,
				Change: "validation rule added: self.size() <= 16", Why: why}},
			wantRefused:  []Change{rule},
			wantProblems: []string{"seeds.example.com v1alpha1: .spec.token: validation rule added: self.size() <= 16: accepted, but not a tightening of the current CRDs against the released ones: remove the entry"},
		},
		{
			name:         "a break is never accepted",
			changes:      []Change{removed},
			accepted:     []Acceptance{entry(removed, why)},
			wantRefused:  []Change{removed},
			wantProblems: []string{"seeds.example.com v1alpha1: .spec.mode: removed: a break, not a tightening: no list accepts it"},
		},
		{
			name:         "an entry given twice",
			changes:      []Change{rule},
			accepted:     []Acceptance{entry(rule, why), entry(rule, "again")},
			wantProblems: []string{"seeds.example.com v1alpha1: .spec.token: validation rule added: self.size() <= 8: accepted twice"},
		},
		{
			name:         "an entry without a path",
			accepted:     []Acceptance{{CRD: rule.CRD, Version: rule.Version, Change: rule.Problem, Why: why}},
			wantProblems: []string{"entry 1: crd, version, path and change must all be set, as crdcompat reports the change"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused, problems := Accept(tt.changes, tt.accepted)
			if diff := cmp.Diff(tt.wantRefused, refused); diff != "" {
				t.Errorf("refused (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantProblems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAcceptedList runs make verify's check: every change of
// config/crd/bases against config/crd/released is a tightening that
// accepted.yaml lists with a reason, and every entry names one.
func TestAcceptedList(t *testing.T) {
	released, err := load("../../config/crd/released")
	if err != nil {
		t.Fatal(err)
	}
	current, err := load("../../config/crd/bases")
	if err != nil {
		t.Fatal(err)
	}
	accepted, err := loadAccepted("accepted.yaml")
	if err != nil {
		t.Fatal(err)
	}
	refused, problems := Accept(Compare(released, current), accepted)
	for _, c := range refused {
		t.Errorf("not accepted: %s", c)
	}
	for _, p := range problems {
		t.Errorf("accepted.yaml: %s", p)
	}
}
