package vaultseed

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner"
)

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
			status.FailedStatus, map[string]float64{planner.ActionCreate: 1, planner.ActionCreateField: 2}},
		{"waiting", ohmlabv1alpha1.ReasonRefPending, ohmlabv1alpha1.ConditionReconciling,
			"1 create-field (extra); the rest waits: RefPending: waiting for " + nowhere + "#k (path missing)",
			status.InProgressStatus, map[string]float64{planner.ActionCreateField: 1}},
	}
	for _, tt := range tests {
		obj := f.waitReason(tt.name, tt.reason, 20*time.Second)
		g.Expect(condition(obj, tt.holding)).To(HaveField("Status", metav1.ConditionTrue), tt.name)
		g.Eventually(func() *metav1.Condition { return condition(f.get(tt.name), ohmlabv1alpha1.ConditionDrifted) }).
			WithTimeout(20*time.Second).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", ohmlabv1alpha1.ReasonObserveOnly),
			HaveField("Message", tt.drifted)), tt.name)
		g.Expect(f.kstatus(tt.name)).To(Equal(tt.kstatus), tt.name)
		for _, action := range planner.ActionOrder() {
			v, ok := f.gaugeValue("ohmlab_planned_changes", map[string]string{"namespace": f.ns, "name": tt.name, "action": action})
			want, counted := tt.planned[action]
			g.Expect(ok).To(Equal(counted), "%s: ohmlab_planned_changes for %s", tt.name, action)
			g.Expect(v).To(Equal(want), "%s: %s", tt.name, action)
		}
	}
	g.Expect(pathMissing(t, held)).To(BeTrue(), "observe-only writes nothing")
	g.Expect(readPath(t, waiting)).To(Equal(before), "observe-only writes nothing")
}
