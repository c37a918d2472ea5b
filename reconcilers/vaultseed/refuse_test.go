package vaultseed

import (
	"context"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// refuseStatusWrites makes the API server refuse every status write of the
// VaultSeeds of the fixture's namespace, with a ValidatingAdmissionPolicy
// (evaluated inside kube-apiserver), until the test ends or allow is
// called. It returns once the policy refuses the status write of a probe
// object.
func (f *fixture) refuseStatusWrites() (allow func()) {
	f.t.Helper()
	g := NewWithT(f.t)
	ctx := context.Background()
	name := "refuse-status-" + f.ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"ohmlab.fr"}, APIVersions: []string{"*"}, Resources: []string{"vaultseeds/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "status writes are refused by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": f.ns}}},
		},
	}
	g.Expect(cp.Client.Create(ctx, policy)).To(Succeed())
	g.Expect(cp.Client.Create(ctx, binding)).To(Succeed())
	f.t.Cleanup(func() {
		_ = cp.Client.Delete(ctx, binding)
		_ = cp.Client.Delete(ctx, policy)
	})
	// The policy takes effect once the API server has loaded it.
	f.create(f.seed("probe", f.path("probe"), `{"x": "y"}`))
	g.Eventually(func() error {
		p := f.get("probe")
		p.Status.ObservedGeneration = 42
		return cp.Client.Status().Update(ctx, p)
	}).WithTimeout(10 * time.Second).Should(MatchError(ContainSubstring("status writes are refused by the test")))
	return func() { g.Expect(cp.Client.Delete(ctx, binding)).To(Succeed()) }
}
