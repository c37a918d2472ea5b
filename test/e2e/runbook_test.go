package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// TestRunbookRemovesAFinalizerWithEveryControllerStopped: the product document's runbook gives
// up on a deleted object's path with `kubectl patch vaultseed <name> -p
// '{"metadata":{"finalizers":null}}' --type merge`, and it must work when no controller runs:
// the chart's webhook configuration (failurePolicy Fail) with its Service left without an
// endpoint lets through what the webhook would admit anyway (annotations, the finalizer of an
// object being deleted), and still refuses a change of spec or labels.
func TestRunbookRemovesAFinalizerWithEveryControllerStopped(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, err := Start(ctx, Options{Dir: t.TempDir(), Resync: time.Minute, ControllerBin: controllerBin,
		Values: map[string]any{"targets": map[string]any{"vault": map[string]any{"allowDelete": true}}}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(env.Stop)

	// An object with deletionPolicy Delete, which the controller gives its finalizer.
	c := startController(t, env)
	out, err := env.Kubectl(ctx, "apply", "-f", keycloakWithDeletePolicy(t))
	g.Expect(err).NotTo(HaveOccurred(), out)
	kubectl := func(args ...string) (string, error) {
		return env.Kubectl(ctx, append([]string{"-n", SeedNamespace}, args...)...)
	}
	g.Eventually(func() (string, error) {
		return kubectl("get", "vaultseed", Keycloak.Name, "-o", "jsonpath={.metadata.finalizers}")
	}).WithTimeout(time.Minute).Should(ContainSubstring(ohmlabv1alpha1.Finalizer), "the controller adds its finalizer")

	// Every controller stopped: nothing serves the webhook Service.
	c.Stop()
	refused := []struct{ name, patch string }{
		{name: "a spec change", patch: `{"spec":{"prune":true}}`},
		{name: "a label change", patch: `{"metadata":{"labels":{"ohmlab.fr/shard":"a"}}}`},
	}
	for _, r := range refused {
		out, err := kubectl("patch", "vaultseed", Keycloak.Name, "--type", "merge", "-p", r.patch)
		g.Expect(err).To(HaveOccurred(), "%s is admitted without the webhook: %s", r.name, out)
		g.Expect(out).To(ContainSubstring("failed calling webhook"), r.name)
	}
	// Not fatal: the runbook's command below is what matters most.
	if out, err := kubectl("annotate", "vaultseed", Keycloak.Name, "example.com/note=controller down"); err != nil {
		t.Errorf("an annotation waits for the webhook: %v: %s", err, out)
	}

	out, err = kubectl("delete", "vaultseed", Keycloak.Name, "--wait=false")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectl("get", "vaultseed", Keycloak.Name, "-o", "jsonpath={.metadata.deletionTimestamp}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).NotTo(BeEmpty(), "the deleted object waits for its finalizer")

	// The runbook's command, as the product document writes it.
	out, err = kubectl("patch", "vaultseed", Keycloak.Name, "-p", `{"metadata":{"finalizers":null}}`, "--type", "merge")
	g.Expect(err).NotTo(HaveOccurred(), "the runbook's finalizer patch is refused: %s", out)
	g.Eventually(func() string {
		out, _ := kubectl("get", "vaultseed", Keycloak.Name, "--ignore-not-found", "-o", "name")
		return out
	}).WithTimeout(30*time.Second).Should(BeEmpty(), "the object is gone once its finalizer is")
}
