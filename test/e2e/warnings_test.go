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

// TestKubectlPrintsTheUnrunShardWarning: with the chart's shards [a], an
// object labelled with shard c is admitted, and kubectl prints the
// webhook's warning naming the shards that run; shard a's label gets none
// (issue 23, item 7). Only the process without a shard runs: it serves the
// webhook, from the configuration the chart renders.
func TestKubectlPrintsTheUnrunShardWarning(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, err := Start(ctx, Options{Dir: t.TempDir(), Resync: time.Minute, ControllerBin: controllerBin,
		Values: map[string]any{"targets": map[string]any{"vault": map[string]any{"shards": []any{"a"}}}}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(env.Stop)
	startController(t, env)
	manifest := func(name, shard string) string {
		file := filepath.Join(t.TempDir(), name+".yaml")
		doc := "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata:\n  name: " + name + "\n  namespace: " + SeedNamespace +
			"\n  labels: {ohmlab.fr/shard: " + shard + "}\nspec:\n  path: ohmlab/platforms/production/core/" + name + "\n  data: {k: \"<random:8>\"}\n"
		g.Expect(os.WriteFile(file, []byte(doc), 0o600)).To(Succeed())
		return file
	}

	out, err := env.Kubectl(ctx, "apply", "-f", manifest("unrun", "c"))
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`Warning: metadata.labels[ohmlab.fr/shard]: "c" is not a shard that runs: no process reconciles this object; the shards that run: a;`))
	g.Expect(out).To(ContainSubstring("vaultseed.ohmlab.fr/unrun created"))

	out, err = env.Kubectl(ctx, "apply", "-f", manifest("run", "a"))
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).NotTo(ContainSubstring("Warning"))
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
