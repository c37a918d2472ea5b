package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestKubectlPrintsTheDeleteWarning: an object asking for deletionPolicy
// Delete on a target without allowDelete is admitted, and kubectl prints
// the webhook's warning that says it will be Stalled (Forbidden) and why;
// the controller then reports exactly that.
func TestKubectlPrintsTheDeleteWarning(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env := startEnv(t, time.Minute)
	startController(t, env)
	out, err := env.Kubectl(ctx, "apply", "-f", keycloakWithDeletePolicy(t))
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Warning: spec.deletionPolicy: Delete is not allowed by this controller (its chart leaves targets.vault.allowDelete false): the object will be Stalled with reason Forbidden"))
	g.Expect(out).To(ContainSubstring("vaultseed.ohmlab.fr/" + Keycloak.Name + " created"))
	g.Eventually(func() string {
		out, _ := env.Kubectl(ctx, "-n", SeedNamespace, "get", "vaultseed", Keycloak.Name, "-o",
			`jsonpath={.status.conditions[?(@.type=="Stalled")].reason}`)
		return out
	}).WithTimeout(30 * time.Second).Should(Equal("Forbidden"))
}

// keycloakWithDeletePolicy writes the Keycloak sample with deletionPolicy Delete and returns its
// file.
func keycloakWithDeletePolicy(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(Keycloak.Manifest())
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "keycloak-delete.yaml")
	if err := os.WriteFile(manifest, []byte(strings.Replace(string(data), "deletionPolicy: Retain", "deletionPolicy: Delete", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return manifest
}
