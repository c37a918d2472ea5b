package vaultseed

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// TestGenerationThatCannotFinishStalls: an object whose bcrypt hashes
// cannot be computed in a reconcile's time, created without the webhook
// (these tests run none), is Stalled with a reason that says so and names
// its count, writes nothing, and is not retried with backoff: each attempt
// would cost the cores as much again, and Vault is not at fault. Over the
// limit of one object, the analysis refuses it before any hash; at the
// limit, on a controller too slow for it (a short timeout and a high
// bcrypt cost stand for a starved process), generation stops at its
// deadline.
func TestGenerationThatCannotFinishStalls(t *testing.T) {
	hashes := func(n int) string {
		data := map[string]any{}
		for i := range n {
			data[fmt.Sprintf("p%03d", i)] = "<random:16>"
			data[fmt.Sprintf("h%03d", i)] = fmt.Sprintf("<bcrypt:p%03d>", i)
		}
		j, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		return string(j)
	}
	tests := []struct {
		name, data, reason, message string
	}{
		{name: "over-limit", data: hashes(101), reason: ohmlabv1alpha1.ReasonInvalidSpec,
			message: "declares 101 bcrypt hashes and key pairs, more than the 100 one object may: bcrypt is slow by design, " +
				"and each reconcile computes or checks every one of them within its time; split the keys over several objects; " +
				"fix the object's spec and apply it (ohmlab validate finds this before merge); until then nothing is written to the path"},
		{name: "at-limit", data: hashes(100), reason: ohmlabv1alpha1.ReasonGenerationTimeout,
			message: "computing the object's values did not finish in the 2.25s a reconcile leaves to it (of its 3s): " +
				"it declares 100 bcrypt hashes and key pairs (at most 100 are admitted), and bcrypt is slow by design; nothing is written to the path. " +
				"Split the keys over several objects, or give the controller more CPU; this is checked again at the next resync"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// At cost 12 one hash takes far longer than a hundredth of the
			// 3 s a reconcile has here, so 100 hashes cannot finish in it on
			// any machine.
			f := startController(t, controllerOptions{timeout: 3 * time.Second, bcryptCost: 12})
			g := NewWithT(t)
			path := f.path(tt.name)
			f.create(f.seed(tt.name, path, tt.data))
			obj := f.waitReason(tt.name, tt.reason, 60*time.Second)

			want := []metav1.Condition{
				{Type: ohmlabv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: tt.reason, Message: tt.message},
				{Type: ohmlabv1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: tt.reason, Message: tt.message},
			}
			for _, w := range want {
				c := apimeta.FindStatusCondition(obj.Status.Conditions, w.Type)
				g.Expect(c).NotTo(BeNil(), w.Type)
				g.Expect([]string{string(c.Status), c.Reason, c.Message}).To(Equal([]string{string(w.Status), w.Reason, w.Message}), w.Type)
			}
			g.Expect(apimeta.FindStatusCondition(obj.Status.Conditions, ohmlabv1alpha1.ConditionReconciling)).To(BeNil(), "not retried: no Reconciling")
			g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
			// A stall is never retried with backoff: the rate limiter was
			// never asked for a delay for the object.
			g.Expect(f.r.backoff.NumRequeues(types.NamespacedName{Namespace: f.ns, Name: tt.name})).To(BeZero(), "retries with backoff")
			g.Eventually(func() []string { return f.events(tt.name) }).Should(ContainElement("Warning " + tt.reason + ": " + tt.message))
			g.Expect(f.kv.Counts()).NotTo(HaveKey("write"), "nothing written")
			g.Expect(f.kv.Counts()).NotTo(HaveKey("mark"), "nothing written")
		})
	}
}
