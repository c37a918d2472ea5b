package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// TestObserveOnlyOutcomeConditions: the conditions and planned changes an
// observe-only reconcile reports for each kind of plan (product document,
// "Conditions"; issue 23, item 5).
func TestObserveOnlyOutcomeConditions(t *testing.T) {
	type cond struct{ Type, Status, Reason, Message string }
	const wait = "waiting for ohmlab/x#k (path missing)"
	const stall = "h: cannot be computed while p is empty; fill it in (vault kv patch ohmlab/a p=...)"
	tests := []struct {
		name    string
		plan    Plan
		want    []cond
		planned map[string]int
	}{
		{
			name: "nothing to do: in sync",
			plan: Plan{CAS: 3},
			want: []cond{
				{"Ready", "True", "Reconciled", "the path holds what is declared (KV version 3)"},
				{"Drifted", "False", "InSync", "a real run would change nothing"},
			},
		},
		{
			name: "changes: drifted",
			plan: Plan{CAS: 3, Actions: []Action{{ActionAdopt, ""}, {ActionCreateField, "b"}}},
			want: []cond{
				{"Ready", "False", "ObserveOnly", "observe-only: a real run would make 1 adopt, 1 create-field (b)"},
				{"Drifted", "True", "ObserveOnly", "1 adopt, 1 create-field (b)"},
			},
			planned: map[string]int{ActionAdopt: 1, ActionCreateField: 1},
		},
		{
			name: "waits and writes nothing: unknown",
			plan: Plan{CAS: 3, Outcome: OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending, Message: Text(wait)},
			want: []cond{
				{"Ready", "False", "RefPending", wait},
				{"Reconciling", "True", "RefPending", wait},
				{"Drifted", "Unknown", "RefPending", wait},
			},
		},
		{
			name: "waits on one key and writes another: drifted, Reconciling as a real run",
			plan: Plan{CAS: 3, Outcome: OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending, Message: Text(wait),
				Actions: []Action{{ActionCreateField, "b"}}},
			want: []cond{
				{"Ready", "False", "RefPending", wait},
				{"Reconciling", "True", "RefPending", wait},
				{"Drifted", "True", "ObserveOnly", "1 create-field (b); the rest waits: RefPending: " + wait},
			},
			planned: map[string]int{ActionCreateField: 1},
		},
		{
			name: "stalls on one key and creates the path: drifted, Stalled as a real run",
			plan: Plan{Outcome: OutcomeStop, Reason: ohmlabv1alpha1.ReasonInvalidSpec, Message: Text(stall),
				Actions: []Action{{ActionCreate, ""}, {ActionCreateField, "p"}}},
			want: []cond{
				{"Ready", "False", "InvalidSpec", stall},
				{"Stalled", "True", "InvalidSpec", stall},
				{"Drifted", "True", "ObserveOnly", "1 create, 1 create-field (p); the rest stalls: InvalidSpec: " + stall},
			},
			planned: map[string]int{ActionCreate: 1, ActionCreateField: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _, shown := tt.plan.ObserveOnlyResult(tt.plan.CAS)
			var st ohmlabv1alpha1.VaultSeedStatus
			res.Apply(&st, 1, true)
			var got []cond
			for _, c := range st.Conditions {
				got = append(got, cond{c.Type, string(c.Status), c.Reason, c.Message})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			var planned map[string]int
			if shown && !tt.plan.Empty() {
				planned = tt.plan.Counts()
			}
			if diff := cmp.Diff(tt.planned, planned); diff != "" {
				t.Errorf("planned changes (-want +got):\n%s", diff)
			}
		})
	}
}
