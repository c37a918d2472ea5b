package vaultseed

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

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
			plan: Plan{CAS: 3, Outcome: OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending, Message: textMessage(wait)},
			want: []cond{
				{"Ready", "False", "RefPending", wait},
				{"Reconciling", "True", "RefPending", wait},
				{"Drifted", "Unknown", "RefPending", wait},
			},
		},
		{
			name: "waits on one key and writes another: drifted, Reconciling as a real run",
			plan: Plan{CAS: 3, Outcome: OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending, Message: textMessage(wait),
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
			plan: Plan{Outcome: OutcomeStop, Reason: ohmlabv1alpha1.ReasonInvalidSpec, Message: textMessage(stall),
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
			out := observeOnlyOutcome(tt.plan, tt.plan.CAS)
			var st ohmlabv1alpha1.VaultSeedStatus
			out.apply(&st, 1, true)
			var got []cond
			for _, c := range st.Conditions {
				got = append(got, cond{c.Type, string(c.Status), c.Reason, c.Message})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			var planned map[string]int
			if out.plan != nil && !out.plan.Empty() {
				planned = out.plan.Counts()
			}
			if diff := cmp.Diff(tt.planned, planned); diff != "" {
				t.Errorf("planned changes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestObserveOnlyReportsWhatAPartialPlanStillWrites: in observe-only mode an
// object that stalls or waits on one key while a real run writes the others
// is Drifted=True with those writes and why the rest waits, its planned
// changes are counted, and Ready, Stalled and Reconciling (so kstatus and
// Argo CD health) are a real run's (issue 23, item 5).
func TestObserveOnlyReportsWhatAPartialPlanStillWrites(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{observeOnly: true, resync: time.Second})
	held, waiting, nowhere := f.path("held"), f.path("waiting"), f.path("nowhere")
	handWrite(t, waiting, map[string]any{"copy": "typed"})
	handMark(t, waiting, map[string]any{ohmlabv1alpha1.OwnerMetadataKey: f.ns + "/waiting"})
	before := readPath(t, waiting)
	f.create(f.seed("held", held, `{"password": "", "hash": "<bcrypt:password>", "user": "<random:8>"}`))
	f.create(f.seed("waiting", waiting, `{"copy": "<ref:`+nowhere+`#k>", "extra": "<random:6>"}`))

	tests := []struct {
		name, reason, holding, drifted string
		kstatus                        status.Status
		planned                        map[string]float64
	}{
		{"held", ohmlabv1alpha1.ReasonInvalidSpec, ohmlabv1alpha1.ConditionStalled,
			"1 create, 2 create-field (password, user); the rest stalls: InvalidSpec: hash: cannot be computed while password is empty; fill it in (vault kv patch " + held + " password=...)",
			status.FailedStatus, map[string]float64{ActionCreate: 1, ActionCreateField: 2}},
		{"waiting", ohmlabv1alpha1.ReasonRefPending, ohmlabv1alpha1.ConditionReconciling,
			"1 create-field (extra); the rest waits: RefPending: waiting for " + nowhere + "#k (path missing)",
			status.InProgressStatus, map[string]float64{ActionCreateField: 1}},
	}
	for _, tt := range tests {
		obj := f.waitReason(tt.name, tt.reason, 20*time.Second)
		g.Expect(condition(obj, tt.holding)).To(HaveField("Status", metav1.ConditionTrue), tt.name)
		g.Eventually(func() *metav1.Condition { return condition(f.get(tt.name), ohmlabv1alpha1.ConditionDrifted) }).
			WithTimeout(20*time.Second).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", ohmlabv1alpha1.ReasonObserveOnly),
			HaveField("Message", tt.drifted)), tt.name)
		g.Expect(f.kstatus(tt.name)).To(Equal(tt.kstatus), tt.name)
		for _, action := range actionOrder {
			v, ok := f.gaugeValue("ohmlab_planned_changes", map[string]string{"namespace": f.ns, "name": tt.name, "action": action})
			want, counted := tt.planned[action]
			g.Expect(ok).To(Equal(counted), "%s: ohmlab_planned_changes for %s", tt.name, action)
			g.Expect(v).To(Equal(want), "%s: %s", tt.name, action)
		}
	}
	g.Expect(pathMissing(t, held)).To(BeTrue(), "observe-only writes nothing")
	g.Expect(readPath(t, waiting)).To(Equal(before), "observe-only writes nothing")
}
