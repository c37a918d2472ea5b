package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

// chartFromOCI: the release is the chart make chart pushed and signed,
// pulled by digest: the chart's directory file for file, the VERSION
// file's release, and its signature is the key's only (another key's
// public key is refused).
func (e *env) chartFromOCI(t *testing.T) {
	ctx := t.Context()
	if got := e.release.Chart.Metadata; got.Name != ReleaseName || got.Version != e.version {
		t.Errorf("release %s installed chart %s %s, want %s %s", e.release.Name, got.Name, got.Version, ReleaseName, e.version)
	}
	dir, err := charttest.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := SameChart(e.helm.Chart, dir); err != nil {
		t.Errorf("the chart pulled from %s is not charts/ohmlab-controller: %v", e.chartRef, err)
	}
	other, err := NewCosign(ctx, e.c.Cosign, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(e.chartRef, "oci://")
	if err := e.cosign.Verify(ctx, other.PublicKey(), ref); err == nil {
		t.Errorf("cosign verify of %s accepted another key's public key", ref)
	}
}

// podsReady: the Deployment's replicas run the imported image, Running
// and Ready, in a namespace that enforces restricted Pod Security (a pod
// that breaks it is refused there, so the chart's were admitted under it).
func (e *env) podsReady(t *testing.T) {
	ctx := t.Context()
	ns := &corev1.Namespace{}
	if err := e.c.Client.Get(ctx, client.ObjectKey{Name: Namespace}, ns); err != nil {
		t.Fatal(err)
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Fatalf("namespace %s enforces Pod Security %q, want restricted", Namespace, got)
	}
	what := fmt.Sprintf("Deployment %s/%s: %d replicas Running and Ready", e.dep.Namespace, e.dep.Name, *e.dep.Spec.Replicas)
	if err := WaitFor(ctx, what, 2*time.Second, 4*time.Minute, RolledOut(e.c, client.ObjectKeyFromObject(e.dep), nil)); err != nil {
		t.Fatal(err)
	}
	pods, err := DeploymentPods(ctx, e.c, e.deployment(t))
	if err != nil {
		t.Fatal(err)
	}
	imageID, err := ImageID(e.c.ImageLayout)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		cs := p.Status.ContainerStatuses
		if len(cs) != 1 || cs[0].Image != e.c.Image || cs[0].ImageID != imageID {
			t.Errorf("pod %s runs %v, want the one container of image %s, image ID %s (the config of make image's linux image in %s)",
				p.Name, imageOf(cs), e.c.Image, imageID, e.c.ImageLayout)
		}
	}

	// The control: a pod that breaks restricted is refused in the namespace.
	bad := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "privileged-probe"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: e.c.Image, SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		}}},
	}
	err = e.c.Client.Create(ctx, bad, client.DryRunAll)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
		t.Fatalf("a privileged pod in %s: got %v, want a PodSecurity restricted refusal (the namespace does not enforce it)", Namespace, err)
	}
}

func imageOf(cs []corev1.ContainerStatus) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name+": "+c.Image+" ("+c.ImageID+")")
	}
	return out
}

// webhookRefuses: the API server calls the webhook through the chart's
// Service (no URL), with the CA cainjector injected, and `kubectl apply`
// of a bad object gets our webhook's refusal, naming the key.
func (e *env) webhookRefuses(t *testing.T) {
	ctx := t.Context()
	svc := charttest.Filter(e.objs, "Service")
	vwcs := charttest.Filter(e.objs, "ValidatingWebhookConfiguration")
	if len(svc) != 1 || len(vwcs) != 1 {
		t.Fatalf("the chart renders %d Services and %d webhook configurations, want one each", len(svc), len(vwcs))
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := e.c.Client.Get(ctx, client.ObjectKey{Name: vwcs[0].GetName()}, vwc); err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		s := w.ClientConfig.Service
		if w.ClientConfig.URL != nil || s == nil || s.Name != svc[0].GetName() || s.Namespace != Namespace {
			t.Fatalf("webhook %s is called at %+v, want Service %s/%s", w.Name, w.ClientConfig, Namespace, svc[0].GetName())
		}
		if len(w.ClientConfig.CABundle) == 0 {
			t.Fatalf("webhook %s has no caBundle: cainjector did not inject it", w.Name)
		}
	}

	// The Service's endpoints are the Deployment's pods.
	pods, err := DeploymentPods(ctx, e.c, e.deployment(t))
	if err != nil {
		t.Fatal(err)
	}
	var slices discoveryv1.EndpointSliceList
	if err := e.c.Client.List(ctx, &slices, client.InNamespace(Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc[0].GetName()}); err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready && ep.TargetRef != nil {
				ready[ep.TargetRef.Name] = true
			}
		}
	}
	for _, p := range pods {
		if !ready[p.Name] {
			t.Errorf("pod %s is not a ready endpoint of Service %s (ready: %v)", p.Name, svc[0].GetName(), ready)
		}
	}

	out, err := e.c.Kubectl(ctx, "apply", "-f", Sample(brokenFile))
	if err == nil {
		t.Fatalf("kubectl apply -f %s was admitted, want our webhook's refusal:\n%s", brokenFile, out)
	}
	if !strings.Contains(out, brokenKubectl) {
		t.Fatalf("kubectl apply -f %s failed without our webhook's refusal %q:\n%s", brokenFile, brokenKubectl, out)
	}
	t.Logf("kubectl apply -f %s: %s", brokenFile, strings.TrimSpace(out))
}

// keycloakReady: the product document's example goes Ready and its path
// holds every declared key.
func (e *env) keycloakReady(t *testing.T) {
	ctx := t.Context()
	if out, err := e.c.Kubectl(ctx, "apply", "-f", Sample(keycloakFile)); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", keycloakFile, err, out)
	}
	if err := WaitFor(ctx, "VaultSeed "+keycloakName+" Ready", time.Second, 2*time.Minute, SeedReady(e.c, SeedNamespace, keycloakName)); err != nil {
		t.Fatal(err)
	}
	flat, err := e.vault.ReadPath(ctx, keycloakPath)
	if err != nil {
		t.Fatal(err)
	}
	generated := []string{"admin.password", "admin.passwordHashed", "clients.grafana-core.clientSecret"}
	for _, k := range append([]string{"admin.username", "webhook"}, generated...) {
		if _, ok := flat[k]; !ok {
			t.Errorf("%s has no key %s (keys: %v)", keycloakPath, k, Keys(flat))
		}
	}
	for _, k := range generated {
		e.secrets = append(e.secrets, Secret{What: keycloakPath + " " + k, Value: fmt.Sprint(flat[k])})
	}
}

// vaultToken: each pod mounts the projected token, with the config's
// audience, at the config's tokenFile (the config read from the ConfigMap
// the pod projects, with the controller's own loader), and Vault issued a
// token to the chart's ServiceAccount for it.
func (e *env) vaultToken(t *testing.T) {
	ctx := t.Context()
	pods, err := DeploymentPods(ctx, e.c, e.deployment(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		cfg, err := PodConfig(ctx, e.c, &p)
		if err != nil {
			t.Fatal(err)
		}
		auth := cfg.Backend.Auth
		proj, err := TokenVolume(&p, auth.TokenFile)
		if err != nil {
			t.Fatal(err)
		}
		if proj.Audience != auth.Audience || auth.Role != VaultRole {
			t.Errorf("pod %s: token audience %q, config audience %q and role %q; want %q and role %s", p.Name, proj.Audience, auth.Audience, auth.Role, auth.Audience, VaultRole)
		}
	}
	logins, err := e.vault.KubernetesLogins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sa := e.dep.Spec.Template.Spec.ServiceAccountName
	for _, m := range logins {
		if m["role"] == VaultRole && m["service_account_name"] == sa && m["service_account_namespace"] == Namespace {
			return
		}
	}
	t.Fatalf("Vault issued no Kubernetes-auth token to %s/%s with role %s (logins: %v): the pod's token file was not read", Namespace, sa, VaultRole, logins)
}
