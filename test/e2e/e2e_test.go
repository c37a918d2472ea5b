package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// buildVersion is the release the test binary claims to be.
const buildVersion = "v0.0.0-e2e"

// controllerBin is built once for the package by TestMain, from the
// working tree, so the tests never run a stale binary.
var controllerBin string

func TestMain(m *testing.M) {
	RunWithController(buildVersion, func(bin string) int {
		controllerBin = bin
		return m.Run()
	})
}

func startEnv(t *testing.T, resync time.Duration) *Env {
	t.Helper()
	env, err := Start(context.Background(), Options{Dir: t.TempDir(), Resync: resync, ControllerBin: controllerBin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	return env
}

// startController starts a controller process for the test (see
// startProcess).
func startController(t *testing.T, env *Env) *Controller {
	t.Helper()
	return startProcess(t, "controller", env.StartController)
}

// startProcess starts a process of the controller for the test with start,
// tried again when a port it picked was taken meanwhile by another process
// of the machine (harness.FreePort checks 127.0.0.1, the webhook server
// listens on every address). Its logs are printed when the test fails.
func startProcess(t *testing.T, name string, start func(context.Context) (*Controller, error)) *Controller {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := start(context.Background())
		if err != nil && attempt < 3 && strings.Contains(err.Error(), "address already in use") {
			t.Logf("starting the %s again: %v", name, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if !c.Exited() {
				c.Stop()
			}
			if t.Failed() {
				t.Logf("%s logs:\n%s", name, c.Logs())
			}
		})
		return c
	}
}

// readPath returns a path's flat data and KV version, read with the root
// token.
func readPath(t *testing.T, env *Env, path string) (map[string]any, int) {
	t.Helper()
	mount, rest, _ := strings.Cut(path, "/")
	s, err := env.Vault.Client.KVv2(mount).Get(context.Background(), rest)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return s.Data, s.VersionMetadata.Version
}

func nested(data map[string]any, dotted string) any {
	var v any = data
	for _, k := range strings.Split(dotted, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// TestDemoFlow drives the demo's flow through the built binaries: the
// process logs in with Kubernetes auth, both objects go Ready, the webhook
// refuses a dotted key, a hand edit is reverted on a reference and kept on
// a generated key, and a restart writes no new KV version.
func TestDemoFlow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env := startEnv(t, 2*time.Second)
	c := startController(t, env)

	for _, s := range []Sample{Keycloak, Grafana} {
		out, err := env.Apply(ctx, s)
		g.Expect(err).NotTo(HaveOccurred(), out)
	}
	for _, s := range []Sample{Keycloak, Grafana} {
		g.Expect(env.WaitReady(ctx, s)).To(Succeed())
	}
	out, err := env.Kubectl(ctx, "get", "vaultseeds", "-A")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`production-core-keycloak\s+ohmlab/platforms/production/core/keycloak\s+True\s+Reconciled`))

	out, err = env.Apply(ctx, Broken)
	g.Expect(err).To(HaveOccurred(), "the webhook must refuse a dotted key")
	g.Expect(out).To(ContainSubstring(BrokenRefusal))

	kc, _ := readPath(t, env, Keycloak.Path)
	gr, grVersion := readPath(t, env, Grafana.Path)
	password := nested(kc, "admin.password")
	g.Expect(nested(gr, "admin.password")).To(Equal(password))

	// A hand edit of a reference is put back at the next resync.
	gr["admin"].(map[string]any)["password"] = "edited-by-hand"
	_, err = env.Vault.Client.KVv2("ohmlab").Put(ctx, strings.TrimPrefix(Grafana.Path, "ohmlab/"), gr)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() any { d, _ := readPath(t, env, Grafana.Path); return nested(d, "admin.password") }).
		WithTimeout(20 * time.Second).Should(Equal(password))

	// A hand edit of a generated key is kept, and its copies follow it.
	kc["clients"].(map[string]any)["grafana-core"].(map[string]any)["clientSecret"] = "rotated-by-hand-0123456789"
	_, err = env.Vault.Client.KVv2("ohmlab").Put(ctx, strings.TrimPrefix(Keycloak.Path, "ohmlab/"), kc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() any { d, _ := readPath(t, env, Grafana.Path); return nested(d, "oauth.clientSecret") }).
		WithTimeout(20 * time.Second).Should(Equal("rotated-by-hand-0123456789"))
	g.Consistently(func() any {
		d, _ := readPath(t, env, Keycloak.Path)
		return nested(d, "clients.grafana-core.clientSecret")
	}).
		WithTimeout(5 * time.Second).Should(Equal("rotated-by-hand-0123456789"))

	// A restart writes nothing: same KV versions after several resyncs.
	_, kcVersion := readPath(t, env, Keycloak.Path)
	_, grVersion = readPath(t, env, Grafana.Path)
	c.Stop()
	c = startController(t, env)
	time.Sleep(3 * 2 * time.Second)
	_, v := readPath(t, env, Keycloak.Path)
	g.Expect(v).To(Equal(kcVersion))
	_, v = readPath(t, env, Grafana.Path)
	g.Expect(v).To(Equal(grVersion))
	g.Expect(c.Logs()).NotTo(ContainSubstring("wrote the path"))
	g.Expect(c.Logs()).NotTo(ContainSubstring(password.(string)), "no value in the logs")
}

// TestProcessServesMetricsAndProbes checks the process's endpoints, the CRD
// release check, and that a Vault that does not answer never fails the
// probes.
func TestProcessServesMetricsAndProbes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env := startEnv(t, time.Minute)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(env.CP.Client.Get(ctx, client.ObjectKey{Name: "vaultseeds.ohmlab.fr"}, crd)).To(Succeed())
	crd.Annotations = map[string]string{"ohmlab.fr/revision": "v9.9.9"}
	g.Expect(env.CP.Client.Update(ctx, crd)).To(Succeed())
	c := startController(t, env)
	out, err := env.Apply(ctx, Keycloak)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(env.WaitReady(ctx, Keycloak)).To(Succeed())

	code, body := httpGet(ctx, "http://"+c.MetricsAddr+"/metrics")
	g.Expect(code).To(Equal(200))
	for _, metric := range []string{
		"ohmlab_build_info", "ohmlab_object_ready", "ohmlab_data_writes_total", "ohmlab_backend_requests_total",
		"ohmlab_object_last_reconcile_timestamp_seconds", "ohmlab_crd_revision_mismatch", "controller_runtime_reconcile_total",
	} {
		g.Expect(body).To(ContainSubstring(metric))
	}
	g.Expect(body).To(ContainSubstring(`ohmlab_backend_requests_total{code="ok",operation="login",target="vault"} 1`), "one Kubernetes-auth login")
	g.Expect(body).To(ContainSubstring(`ohmlab_crd_revision_mismatch{crd="vaultseeds.ohmlab.fr"} 1`), "the CRD claims another release")
	g.Expect(body).To(ContainSubstring(`ohmlab_build_info{revision="unknown",version="` + buildVersion + `"} 1`))

	g.Expect(env.Vault.Seal()).To(Succeed())
	defer func() { _ = env.Vault.Unseal() }()
	g.Consistently(func() []int {
		h, _ := httpGet(ctx, "http://"+c.ProbeAddr+"/healthz")
		r, _ := httpGet(ctx, "http://"+c.ProbeAddr+"/readyz")
		return []int{h, r}
	}).WithTimeout(5 * time.Second).Should(Equal([]int{200, 200}))
}

// TestReplicas runs two replicas of the chart's Deployment: only the Lease
// holder writes, every replica answers admissions through the webhook
// Service, and killing either keeps admissions answered while reconciles
// go on (after a hand-over when the holder dies). The API server keeps its
// connection to one replica while it lives, as through kube-proxy.
func TestReplicas(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env := startEnv(t, time.Minute)
	first := startController(t, env)
	g.Eventually(func() error { _, err := env.lease(ctx); return err }).WithTimeout(20 * time.Second).Should(Succeed())
	second := startController(t, env)
	g.Expect(env.Network.Backends(env.WebhookService)).To(ConsistOf(first.WebhookAddr, second.WebhookAddr))

	out, err := env.Apply(ctx, Keycloak)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(env.WaitReady(ctx, Keycloak)).To(Succeed())
	g.Expect(first.Logs()).To(ContainSubstring("wrote the path"))
	g.Expect(second.Logs()).NotTo(ContainSubstring("wrote the path"))
	refused := func() {
		t.Helper()
		out, err := env.Apply(ctx, Broken)
		g.Expect(err).To(HaveOccurred())
		g.Expect(out).To(ContainSubstring(BrokenRefusal), "the webhook answers")
	}
	refused()
	// Killing the replica that does not hold the Lease changes nothing.
	second.Kill()
	refused()
	out, err = env.Apply(ctx, Grafana)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(env.WaitReady(ctx, Grafana)).To(Succeed())

	// Killing the holder: the other replica answers at once, and takes the
	// Lease over once it expires.
	third := startController(t, env)
	before, err := env.lease(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	first.Kill()
	killed := time.Now()
	refused()
	seed := &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: SeedNamespace, Name: "after-hand-over"},
		Spec: ohmlabv1alpha1.VaultSeedSpec{
			Path: "ohmlab/platforms/production/core/after-hand-over",
			Data: &apiextensionsv1.JSON{Raw: []byte(`{"token":"<random:16>"}`)},
		},
	}
	g.Expect(env.CP.Client.Create(ctx, seed)).To(Succeed())
	g.Expect(env.WaitReady(ctx, Sample{Name: seed.Name})).To(Succeed())
	after, err := env.lease(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*after.Spec.HolderIdentity).NotTo(Equal(*before.Spec.HolderIdentity))
	g.Expect(third.Logs()).To(ContainSubstring("wrote the path"))
	// The replica that never held the Lease answered those admissions.
	_, body := httpGet(ctx, "http://"+third.MetricsAddr+"/metrics")
	g.Expect(body).To(MatchRegexp(`controller_runtime_webhook_requests_total\{code="200",webhook="/validate-ohmlab-fr-v1alpha1-vaultseed"\} [1-9]`))
	t.Logf("the Lease changed hands %s after the kill (lease duration %s); the new object was Ready %s after it",
		after.Spec.AcquireTime.Sub(killed).Round(100*time.Millisecond), LeaseDuration, time.Since(killed).Round(100*time.Millisecond))
}

// TestConfigErrorsStopTheProcess checks that a bad configuration exits
// non-zero with a one-line reason.
func TestConfigErrorsStopTheProcess(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{
		{name: "unknown field", config: "targets:\n  vault:\n    namespaces: [a]\n    backend: {address: http://x}\n    colour: blue\n", want: `unknown field "colour"`},
		{name: "reserved target", config: "targets:\n  harbor: {}\n", want: "targets.harbor: reserved, not implemented yet"},
		{name: "grouped with a reserved target", config: "targets:\n  vault:\n    namespaces: [a]\n    backend: {address: http://x}\n  sonarqube: {}\n", want: "targets.sonarqube: reserved, not implemented yet"},
		{name: "missing namespaces", config: "targets:\n  vault:\n    backend: {address: http://x}\n", want: "targets.vault.namespaces: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(file, []byte(tt.config), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(controllerBin, "--config="+file)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil {
				t.Fatal("the process started")
			}
			last := lastLine(stderr.String())
			if !strings.HasPrefix(last, "ohmlab-controller: ") || !strings.Contains(last, tt.want) {
				t.Errorf("last line of stderr = %q, want a one-line reason containing %q", last, tt.want)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
