package vaultseed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// refuseStatusLabel marks the objects whose status writes the API server
// refuses (refuseStatusWrites).
const refuseStatusLabel = "test.ohmlab.fr/refuse-status"

// A reconcile whose status write the API server refuses has not completed:
// ohmlab_object_last_reconcile_timestamp_seconds keeps the time of the
// first attempt, so the object ages into OhmlabReconcileStale (three resync
// periods), although every reconcile wrote Vault (issue 23, item 7).
func TestLastReconcileTimestampIsNotSetByAFailedStatusWrite(t *testing.T) {
	g := NewWithT(t)
	refuseStatusWrites(t)
	const period = time.Second
	f := startController(t, controllerOptions{resync: period})
	var mu sync.Mutex
	var wrote time.Time
	f.kv.setBefore(func(op, _ string) {
		mu.Lock()
		defer mu.Unlock()
		if op == "write" && wrote.IsZero() {
			wrote = time.Now()
		}
	})
	t.Cleanup(func() { f.kv.setBefore(nil) })
	obj := f.seed("app", f.path("app"), `{"x": "<random:8>"}`)
	obj.Labels = map[string]string{refuseStatusLabel: "true"}
	f.create(obj)

	labels := map[string]string{"name": "app"}
	g.Eventually(func() string { return f.logs.String() }).WithTimeout(30*time.Second).
		Should(ContainSubstring("patching status"), "a reconcile reached its status write")
	g.Eventually(func() int { return f.kv.Counts()["read"] }).WithTimeout(30*time.Second).
		Should(BeNumerically(">=", 3), "reconciles after the refused status write")
	first, found := f.gaugeValue("ohmlab_object_last_reconcile_timestamp_seconds", labels)
	g.Expect(found).To(BeTrue(), "the series exists from the first attempt")
	mu.Lock()
	g.Expect(wrote.IsZero()).To(BeFalse(), "the reconcile wrote the path")
	g.Expect(first).To(BeNumerically("<", float64(wrote.UnixNano())/1e9), "not set by a reconcile whose status write failed")
	mu.Unlock()

	g.Eventually(func() float64 {
		return float64(time.Now().UnixNano())/1e9 - f.value("ohmlab_object_last_reconcile_timestamp_seconds", labels)
	}).WithTimeout(30*time.Second).Should(BeNumerically(">", (3*period).Seconds()), "stale: older than three resync periods")
	g.Expect(f.value("ohmlab_object_last_reconcile_timestamp_seconds", labels)).To(Equal(first))
	g.Expect(f.get("app").Status.Conditions).To(BeEmpty(), "no status write got through")
}

// refuseStatusWrites makes the API server refuse every write of the status
// of a VaultSeed labelled refuseStatusLabel, with a ValidatingAdmissionPolicy
// (evaluated inside kube-apiserver), until the test ends. It returns once
// the policy refuses a write of a probe object.
func refuseStatusWrites(t *testing.T) {
	t.Helper()
	startServers(t)
	g := NewWithT(t)
	ctx := context.Background()
	name := uniqueNamespace(t)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{ohmlabv1alpha1.GroupVersion.Group},
						APIVersions: []string{ohmlabv1alpha1.GroupVersion.Version}, Resources: []string{"vaultseeds/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "the test refuses status writes"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{ObjectSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{refuseStatusLabel: "true"}}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		g.Expect(cp.Client.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), o) })
	}
	g.Expect(cp.EnsureNamespace(ctx, name)).To(Succeed())
	probe := &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "probe", Labels: map[string]string{refuseStatusLabel: "true"}},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: "ohmlab/platforms/" + name + "/core/probe"},
	}
	g.Expect(cp.Client.Create(ctx, probe)).To(Succeed())
	g.Eventually(func() error {
		before := probe.DeepCopy()
		probe.Status.ObservedGeneration++
		err := cp.Client.Status().Patch(ctx, probe, client.MergeFrom(before))
		switch {
		case err == nil:
			return errors.New("the policy does not refuse status writes yet")
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
			return nil
		}
		return err
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}
