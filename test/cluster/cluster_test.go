package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// The samples the test applies with kubectl (config/samples).
const (
	keycloakFile = "production-core-keycloak.yaml"
	keycloakName = "production-core-keycloak"
	keycloakPath = "ohmlab/platforms/production/core/keycloak"
	brokenFile   = "invalid-dotted-key.yaml"
	// brokenRefusal is what the webhook's refusal of brokenFile names.
	brokenRefusal = "smtp.password"
	// brokenKubectl is how kubectl prints that refusal (the API's Invalid
	// status, by its causes); the CRD's schema alone admits a dotted key.
	brokenKubectl = `The VaultSeed "production-core-broken" is invalid: smtp.password: Invalid value: key name "smtp.password" contains a dot`
)

// TestChartOnANode installs the chart with Helm on the node and checks
// the deployed product, step by step (each step needs the ones before).
func TestChartOnANode(t *testing.T) {
	s, err := SettingsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c, err := Connect(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, "a Ready node", time.Second, 3*time.Minute, NodeReady(c)); err != nil {
		t.Fatal(err)
	}
	env := setUp(t, c)

	// Each step needs the ones before: the first failure ends the test.
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"chart installed from its signed OCI artifact", env.chartFromOCI},
		{"pods Running and Ready under restricted Pod Security", env.podsReady},
		{"Go memory limit from the container's", env.memoryLimit},
		{"webhook refuses a bad object through its Service", env.webhookRefuses},
		{"keycloak example Ready", env.keycloakReady},
		{"NetworkPolicy enforced: metrics refused from another namespace, the webhook and probes reached", env.networkPolicyEnforced},
		{"NetworkPolicy egress: Vault and the cluster DNS reached, any other address refused", env.networkPolicyEgress},
		{"projected Vault token at the config's tokenFile", env.vaultToken},
		{"rolling update answers every admission", env.rollingUpdate},
		{"drain evicts one pod at a time and answers every admission", env.drain},
		{"Lease holder deleted: another replica reconciles within the lease duration", env.leaseHandover},
		{"no secret value in pod logs", env.noSecretInLogs},
	} {
		if !t.Run(step.name, step.run) {
			return
		}
	}
}

// env is what setUp installed, shared by the steps.
type env struct {
	c       *Cluster
	vault   *Vault
	helm    *Helm
	values  map[string]any
	dep     *appsv1.Deployment // as rendered
	logs    *LogBook
	objs    []unstructured.Unstructured // the chart's rendered objects
	secrets []Secret                    // values that must never be printed
	// The chart as make chart published it: its version (the VERSION
	// file), its reference by digest (oci://...), the registry and the
	// cosign that signed it.
	version, chartRef string
	registry          *Registry
	cosign            *Cosign
	release           *release.Release // as helm install returned it
}

// publishChart runs make chart against an in-process registry with a
// throwaway key and verifies the chart's signature with cosign, as a user
// does before installing it; the install then pulls that digest.
func (e *env) publishChart(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	e.version = strings.TrimSpace(string(raw))
	e.registry = StartRegistry()
	t.Cleanup(e.registry.Stop)
	if e.cosign, err = NewCosign(ctx, e.c.Cosign, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	ref, out, err := MakeChart(ctx, t.TempDir(), e.registry.Host, e.cosign)
	t.Logf("$ make chart REGISTRY=%s INSECURE=1 COSIGN_KEY=...\n%s", e.registry.Host, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cosign.Verify(ctx, e.cosign.PublicKey(), ref); err != nil {
		t.Fatalf("the chart's signature: %v", err)
	}
	t.Logf("cosign verify --key cosign.pub %s: the key's signature", ref)
	e.chartRef = "oci://" + ref
}

// setUp brings up Vault and cert-manager, creates the namespaces (the
// release's under restricted Pod Security), configures Vault for the
// chart's ServiceAccount and runs `helm install`. On failure it dumps
// what the pods, cert-manager and Vault said.
func setUp(t *testing.T, c *Cluster) *env {
	t.Helper()
	ctx := t.Context()
	e := &env{c: c}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: Namespace, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: SeedNamespace}},
	} {
		if err := c.Client.Create(ctx, ns); err != nil {
			t.Fatalf("creating namespace %s: %v", ns.Name, err)
		}
	}

	t.Log("starting vault server -dev on the node's network")
	vault, err := StartVault(ctx, c.NodeExec, c.NodeIP)
	if err != nil {
		t.Fatal(err)
	}
	e.vault = vault
	t.Cleanup(vault.Stop)

	t.Log("starting cert-manager (its controllers and cainjector, in-process) against the node's API server")
	var cmLog harness.LockedBuffer
	cmCtx, stopCM := context.WithCancel(context.Background())
	t.Cleanup(stopCM)
	logger := funcr.New(func(prefix, args string) { fmt.Fprintln(&cmLog, prefix, args) }, funcr.Options{})
	if err := StartCertManager(cmCtx, c, logger); err != nil {
		t.Fatal(err)
	}

	if e.values, err = ChartValues(c.Image, vault.Addr); err != nil {
		t.Fatal(err)
	}
	np, err := NetworkPolicyValues(ctx, c, vault.Addr)
	if err != nil {
		t.Fatal(err)
	}
	e.values = chartutil.CoalesceTables(np, e.values)
	objs, err := charttest.RenderE(e.values, charttest.Options{ReleaseName: ReleaseName, Namespace: Namespace})
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	e.objs = objs
	if e.dep, err = renderedDeployment(objs); err != nil {
		t.Fatal(err)
	}
	sa, audience := e.dep.Spec.Template.Spec.ServiceAccountName, vaultAudience(e.dep)
	t.Logf("configuring Vault: policy %s, Kubernetes auth role %s for %s/%s (audience %q)", VaultPolicy, VaultRole, Namespace, sa, audience)
	if err := vault.ConfigureForChart(ctx, c, Namespace, sa, audience); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(e.dep.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	e.logs = NewLogBook(c, sel)
	t.Cleanup(func() {
		if t.Failed() {
			e.dump(t, cmLog.String())
		}
	})

	e.publishChart(t)
	if e.helm, err = NewHelm(c, e.chartRef, e.version, t.TempDir(), func(format string, args ...any) { t.Logf("helm: "+format, args...) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install %s %s --version %s in %s (image %s, Vault at %s)", ReleaseName, e.chartRef, e.version, Namespace, c.Image, vault.Addr)
	rel, err := e.helm.Install(ctx, e.values)
	if err != nil {
		t.Fatal(err)
	}
	e.release = rel
	t.Logf("release %s revision %d: %s", rel.Name, rel.Version, rel.Info.Status)
	if err := WaitFor(ctx, "cert-manager to issue the webhook's Secret and cainjector to inject its CA", time.Second, 2*time.Minute,
		WebhookCertificateIssued(c, e.objs)); err != nil {
		t.Fatal(err)
	}
	return e
}

// dump logs what a failure needs: the pods, the namespaces' events, the
// controller's logs, cert-manager's and Vault's, every secret value
// masked.
func (e *env) dump(t *testing.T, certManagerLog string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if pods, err := DeploymentPods(ctx, e.c, e.dep); err != nil {
		t.Logf("listing the pods: %v", err)
	} else {
		t.Logf("pods: %s", DescribePods(pods))
	}
	for _, ns := range []string{Namespace, SeedNamespace} {
		var events corev1.EventList
		if err := e.c.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			t.Logf("listing the events in %s: %v", ns, err)
			continue
		}
		var b strings.Builder
		for _, ev := range events.Items {
			fmt.Fprintf(&b, "\n  %s %s %s/%s: %s: %s", ev.LastTimestamp.Format(time.TimeOnly), ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
		t.Logf("events in %s:%s", ns, Redact(b.String(), e.secrets))
	}
	if err := e.logs.Keep(ctx); err != nil {
		t.Logf("reading the pods' logs: %v", err)
	}
	for pod, l := range e.logs.Logs() {
		t.Logf("logs of pod %s:\n%s", pod, Redact(l, e.secrets))
	}
	t.Logf("cert-manager logs (end):\n%s", tail(Redact(certManagerLog, e.secrets), 8000))
	t.Logf("vault logs (end):\n%s", tail(Redact(e.vault.Logs(), e.secrets), 8000))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// deployment reads the live Deployment of the Vault target.
func (e *env) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	dep := &appsv1.Deployment{}
	if err := e.c.Client.Get(t.Context(), client.ObjectKeyFromObject(e.dep), dep); err != nil {
		t.Fatalf("reading Deployment %s/%s: %v", e.dep.Namespace, e.dep.Name, err)
	}
	return dep
}

// selector is the Deployment's pod selector.
func (e *env) selector() labels.Selector {
	sel, _ := metav1.LabelSelectorAsSelector(e.dep.Spec.Selector)
	return sel
}
