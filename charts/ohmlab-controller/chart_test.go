package chart_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/reconcilers"
)

const (
	ns       = charttest.Namespace
	fullname = "ohmlab-controller"
	// clusterName prefixes the cluster-scoped objects' names: <namespace>-<fullname>.
	clusterName = ns + "-" + fullname
	crdName     = "vaultseeds.ohmlab.fr"
)

// vaultOn enables the Vault target over two namespaces (two Roles, two RoleBindings).
const vaultOn = `
targets:
  vault:
    enabled: true
    namespaces: [vault-operator-system, platform-secrets]
`

var watched = []string{"vault-operator-system", "platform-secrets"}

func render(t *testing.T, doc string, apiVersions ...string) []unstructured.Unstructured {
	t.Helper()
	return charttest.Render(t, charttest.Values(t, doc), apiVersions...)
}

func mustFind(t *testing.T, objs []unstructured.Unstructured, kind, namespace, name string) unstructured.Unstructured {
	t.Helper()
	o := charttest.Find(objs, kind, namespace, name)
	if o == nil {
		t.Fatalf("no %s %s/%s among %v", kind, namespace, name, charttest.Keys(objs))
	}
	return *o
}

func sortedKeys(objs []unstructured.Unstructured) []string {
	k := charttest.Keys(objs)
	sort.Strings(k)
	return k
}

// processObjects are the keys of everything the chart renders for a vault-only process.
func processObjects(process string, withMonitoring bool) []string {
	p := fullname + "-" + process
	keys := []string{
		"CustomResourceDefinition/" + crdName,
		"ServiceAccount/" + ns + "/" + p,
		"ConfigMap/" + ns + "/" + p + "-config",
		"ConfigMap/" + ns + "/" + fullname + "-dashboard",
		"Deployment/" + ns + "/" + p,
		"PodDisruptionBudget/" + ns + "/" + p,
		"Role/" + ns + "/" + fullname + "-vault-leader-election",
		"RoleBinding/" + ns + "/" + fullname + "-vault-leader-election",
		"ClusterRole/" + clusterName + "-vault-crds",
		"ClusterRoleBinding/" + clusterName + "-vault-crds",
		"Service/" + ns + "/" + fullname + "-webhook",
		"ValidatingWebhookConfiguration/" + clusterName,
		"Issuer/" + ns + "/" + fullname + "-selfsigned",
		"Issuer/" + ns + "/" + fullname + "-ca",
		"Certificate/" + ns + "/" + fullname + "-ca",
		"Certificate/" + ns + "/" + fullname + "-webhook",
	}
	for _, w := range watched {
		keys = append(keys, "Role/"+w+"/"+ns+"-"+fullname+"-vault", "RoleBinding/"+w+"/"+ns+"-"+fullname+"-vault")
	}
	if withMonitoring {
		keys = append(keys, "PodMonitor/"+ns+"/"+fullname, "PrometheusRule/"+ns+"/"+fullname)
	}
	sort.Strings(keys)
	return keys
}

func TestDefaultsRenderNoController(t *testing.T) {
	for _, apis := range [][]string{nil, {charttest.MonitoringAPI}} {
		res, err := charttest.Run(nil, charttest.Options{APIVersions: apis})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"CustomResourceDefinition/" + crdName}, charttest.Keys(res.Objects)); diff != "" {
			t.Errorf("defaults with APIs %v: objects (-want +got):\n%s", apis, diff)
		}
		if !strings.Contains(res.Notes, "every target is off") {
			t.Errorf("NOTES do not say that every target is off:\n%s", res.Notes)
		}
	}
}

func TestTopologies(t *testing.T) {
	tests := []struct {
		name        string
		values      string
		apis        []string
		wantProcess string
	}{
		{name: "split", values: vaultOn, wantProcess: "vault"},
		{name: "split with monitoring", values: vaultOn, apis: []string{charttest.MonitoringAPI}, wantProcess: "vault"},
		{name: "grouped, reserved targets listed", values: vaultOn + "deployments: {all: [vault, harbor, sonarqube]}\n", wantProcess: "all"},
		{name: "vault kept alone, empty process dropped", values: vaultOn + "deployments: {vault: [vault], apps: [harbor, sonarqube]}\n", wantProcess: "vault"},
		{name: "grouped with monitoring", values: vaultOn + "deployments: {core: [vault]}\n", apis: []string{charttest.MonitoringAPI}, wantProcess: "core"},
		{name: "observe-only", values: vaultOn + "    observeOnly: true\n", wantProcess: "vault"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := render(t, tt.values, tt.apis...)
			if diff := cmp.Diff(processObjects(tt.wantProcess, len(tt.apis) > 0), sortedKeys(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			sa := fullname + "-" + tt.wantProcess
			checkDeployment(t, objs, tt.wantProcess)
			checkRBAC(t, objs, sa, ns)
			cfg := processConfig(t, objs, tt.wantProcess)
			if diff := cmp.Diff([]string{"vault"}, mapKeys(cfg)); diff != "" {
				t.Errorf("config sections (-want +got):\n%s", diff)
			}
			svc := mustFind(t, objs, "Service", ns, fullname+"-webhook")
			var s corev1.Service
			charttest.Convert(t, svc, &s)
			if got := s.Spec.Selector["ohmlab.fr/process"]; got != tt.wantProcess {
				t.Errorf("webhook Service selects process %q, want %q", got, tt.wantProcess)
			}
		})
	}
}

func TestObserveOnlyConfig(t *testing.T) {
	objs := render(t, vaultOn+"    observeOnly: true\n")
	cfg := processConfig(t, objs, "vault")
	if !cfg["vault"].ObserveOnly {
		t.Errorf("observeOnly is not in the process config: %+v", cfg["vault"])
	}
	// The RBAC of an observe-only target is the same: it still reads and patches status.
	checkRBAC(t, objs, fullname+"-vault", ns)
}

// checkDeployment asserts the pod of a process: image, arguments, probes, restricted Pod
// Security, the projected Vault token where the config's tokenFile points, the config and
// webhook certificate volumes.
func checkDeployment(t *testing.T, objs []unstructured.Unstructured, process string) {
	t.Helper()
	name := fullname + "-" + process
	var d appsv1.Deployment
	charttest.Convert(t, mustFind(t, objs, "Deployment", ns, name), &d)
	pod := d.Spec.Template.Spec

	if got := labels.SelectorFromSet(d.Spec.Selector.MatchLabels); !got.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %v does not match the pod labels %v", got, d.Spec.Template.Labels)
	}
	if pod.ServiceAccountName != name {
		t.Errorf("serviceAccountName = %q, want %q", pod.ServiceAccountName, name)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "ghcr.io/ohmlab/ohmlab-controller:"+release(t) {
		t.Errorf("image = %q", c.Image)
	}
	if diff := cmp.Diff([]string{"/ohmlab-controller"}, c.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	wantArgs := []string{
		"--config=/etc/ohmlab/config.yaml",
		"--metrics-bind-address=:8080",
		"--health-probe-bind-address=:8081",
		"--webhook-port=9443",
		"--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs",
		"--log-level=info",
	}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if diff := cmp.Diff(map[string]int32{"metrics": 8080, "health": 8081, "webhook": 9443}, ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "health" {
			t.Errorf("probe %s: %+v", want, probe)
		}
	}
	var podNS bool
	for _, e := range c.Env {
		if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			podNS = true
		}
	}
	if !podNS {
		t.Error("no POD_NAMESPACE from the downward API")
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources: %+v", c.Resources)
	}

	// Restricted Pod Security, as the admission plugin evaluates it.
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := policy.AggregateCheckResults(eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &d.Spec.Template.ObjectMeta, &pod))
	if !res.Allowed {
		t.Errorf("the pod is not allowed by restricted Pod Security: %s: %s", res.ForbiddenReason(), res.ForbiddenDetail())
	}
	// And the fields the document names, explicitly.
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.RunAsUser == nil || *sc.RunAsUser == 0 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Errorf("not a numeric non-root user: %+v", sc)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem is writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation allowed")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities: %+v", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("seccomp: %+v", sc.SeccompProfile)
	}
	if psc := pod.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod securityContext: %+v", pod.SecurityContext)
	}

	// Volumes and where they are mounted.
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
		if _, ok := volumes[m.Name]; !ok {
			t.Errorf("mount of unknown volume %q", m.Name)
		}
	}
	cfg := processConfig(t, objs, process)
	tokenFile := cfg["vault"].Backend.Auth.TokenFile
	tok, ok := volumes["vault-token"]
	if !ok || tok.Projected == nil || len(tok.Projected.Sources) != 1 || tok.Projected.Sources[0].ServiceAccountToken == nil {
		t.Fatalf("no projected token volume: %+v", tok)
	}
	sat := tok.Projected.Sources[0].ServiceAccountToken
	if sat.Audience != "vault" || sat.ExpirationSeconds == nil || *sat.ExpirationSeconds != 600 {
		t.Errorf("projected token: audience %q, expirationSeconds %v; want vault, 600", sat.Audience, sat.ExpirationSeconds)
	}
	if got := path.Join(mounts["vault-token"].MountPath, sat.Path); got != tokenFile {
		t.Errorf("token mounted at %s, config's tokenFile is %s", got, tokenFile)
	}
	if m := mounts["config"]; m.MountPath != "/etc/ohmlab" || !m.ReadOnly {
		t.Errorf("config mount: %+v", m)
	}
	if p := volumes["config"].Projected; p == nil || p.Sources[0].ConfigMap == nil || p.Sources[0].ConfigMap.Name != name+"-config" {
		t.Errorf("config volume: %+v", volumes["config"])
	}
	var cert unstructured.Unstructured = mustFind(t, objs, "Certificate", ns, fullname+"-webhook")
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	if v := volumes["webhook-certs"]; v.Secret == nil || v.Secret.SecretName != secretName {
		t.Errorf("webhook-certs volume %+v is not the Certificate's Secret %s", v, secretName)
	}
	if m := mounts["webhook-certs"]; m.MountPath != "/tmp/k8s-webhook-server/serving-certs" {
		t.Errorf("webhook certs mounted at %s", m.MountPath)
	}

	// The pod rolls when its configuration changes.
	var cm corev1.ConfigMap
	charttest.Convert(t, mustFind(t, objs, "ConfigMap", ns, name+"-config"), &cm)
	sum := sha256.Sum256([]byte(strings.TrimSuffix(cm.Data["config.yaml"], "\n")))
	if got := d.Spec.Template.Annotations["checksum/config"]; got != hex.EncodeToString(sum[:]) {
		t.Errorf("checksum/config = %s, want the sha256 of config.yaml", got)
	}
}

// checkRBAC asserts the RBAC of the Vault target, bound to the ServiceAccount sa.
func checkRBAC(t *testing.T, objs []unstructured.Unstructured, sa, leaseNamespace string) {
	t.Helper()
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}
	wantObjectRules := []rbacv1.PolicyRule{
		{APIGroups: []string{"ohmlab.fr"}, Resources: []string{"vaultseeds"}, Verbs: []string{"list", "watch", "patch"}},
		{APIGroups: []string{"ohmlab.fr"}, Resources: []string{"vaultseeds/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}},
	}
	wantLeaseRules := []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"ohmlab-controller-vault"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	}

	roles := map[string][]rbacv1.PolicyRule{}
	for _, o := range charttest.Filter(objs, "Role") {
		var r rbacv1.Role
		charttest.Convert(t, o, &r)
		roles[r.Namespace+"/"+r.Name] = r.Rules
	}
	leaseRole := fullname + "-vault-leader-election"
	if leaseNamespace != ns {
		leaseRole = ns + "-" + leaseRole
	}
	want := map[string][]rbacv1.PolicyRule{leaseNamespace + "/" + leaseRole: wantLeaseRules}
	for _, w := range watched {
		// Outside the release namespace, named after it too.
		want[w+"/"+ns+"-"+fullname+"-vault"] = wantObjectRules
	}
	if diff := cmp.Diff(want, roles); diff != "" {
		t.Errorf("Roles (-want +got):\n%s", diff)
	}

	var crs []rbacv1.ClusterRole
	for _, o := range charttest.Filter(objs, "ClusterRole") {
		var cr rbacv1.ClusterRole
		charttest.Convert(t, o, &cr)
		crs = append(crs, cr)
	}
	if len(crs) != 1 {
		t.Fatalf("%d ClusterRoles, want 1", len(crs))
	}
	wantCR := []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{crdName}, Verbs: []string{"get"}}}
	if diff := cmp.Diff(wantCR, crs[0].Rules); diff != "" {
		t.Errorf("ClusterRole rules (-want +got):\n%s", diff)
	}

	// Every binding binds a Role of the chart to the process's ServiceAccount, in the Role's
	// namespace; the ClusterRoleBinding binds the ClusterRole above.
	for _, o := range charttest.Filter(objs, "RoleBinding") {
		var rb rbacv1.RoleBinding
		charttest.Convert(t, o, &rb)
		if _, ok := roles[rb.Namespace+"/"+rb.RoleRef.Name]; !ok || rb.RoleRef.Kind != "Role" {
			t.Errorf("RoleBinding %s/%s refers to %+v", rb.Namespace, rb.Name, rb.RoleRef)
		}
		if diff := cmp.Diff(subject, rb.Subjects); diff != "" {
			t.Errorf("RoleBinding %s/%s subjects (-want +got):\n%s", rb.Namespace, rb.Name, diff)
		}
	}
	if n := len(charttest.Filter(objs, "RoleBinding")); n != len(roles) {
		t.Errorf("%d RoleBindings for %d Roles", n, len(roles))
	}
	for _, o := range charttest.Filter(objs, "ClusterRoleBinding") {
		var crb rbacv1.ClusterRoleBinding
		charttest.Convert(t, o, &crb)
		if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != crs[0].Name {
			t.Errorf("ClusterRoleBinding %s refers to %+v", crb.Name, crb.RoleRef)
		}
		if diff := cmp.Diff(subject, crb.Subjects); diff != "" {
			t.Errorf("ClusterRoleBinding %s subjects (-want +got):\n%s", crb.Name, diff)
		}
	}
	checkNoBroadAccess(t, objs)
}

// checkNoBroadAccess fails on any rule that names Secrets or a wildcard.
func checkNoBroadAccess(t *testing.T, objs []unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			for _, field := range []string{"apiGroups", "resources", "verbs", "nonResourceURLs"} {
				vals, _, _ := unstructured.NestedStringSlice(rule, field)
				for _, v := range vals {
					if v == "*" || v == "secrets" || strings.HasPrefix(v, "secrets/") {
						t.Errorf("%s grants %s %q", charttest.Key(o), field, v)
					}
				}
			}
		}
	}
}

// processConfig loads a process's config.yaml with the controller's own loader (strict, every
// default and check applied) and returns its Vault section by target name.
func processConfig(t *testing.T, objs []unstructured.Unstructured, process string) map[string]reconcilers.VaultConfig {
	t.Helper()
	var cm corev1.ConfigMap
	charttest.Convert(t, mustFind(t, objs, "ConfigMap", ns, fullname+"-"+process+"-config"), &cm)
	if len(cm.Data) != 1 {
		t.Errorf("ConfigMap keys %v, want only config.yaml", mapKeys(cm.Data))
	}
	targets, err := reconcilers.Load([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatalf("the controller refuses the config.yaml of %s: %v\n%s", process, err, cm.Data["config.yaml"])
	}
	out := map[string]reconcilers.VaultConfig{}
	for name, target := range targets {
		out[name] = target.(reconcilers.VaultConfig)
	}
	return out
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestConfigValues(t *testing.T) {
	objs := render(t, `
targets:
  vault:
    enabled: true
    namespaces: [vault-operator-system]
    allowDelete: true
    resyncPeriod: 5m
    concurrency: 2
    leaderElection: {namespace: kube-leases, leaseDuration: 30s}
    backend:
      address: https://vault.example.test:8200
      ca: {configMap: vault-ca, key: root.pem}
      tlsServerName: vault.internal
      timeout: 5s
      qps: 2.5
      burst: 5
      auth: {mount: k8s-prod, role: seeder, audience: vault-prod, tokenExpirationSeconds: 900}
`)
	cfg := processConfig(t, objs, "vault")
	got := cfg["vault"]
	want := reconcilers.VaultConfig{Namespaces: []string{"vault-operator-system"}, AllowDelete: true, Shards: []string{}, ResyncPeriod: metav1.Duration{Duration: 5 * time.Minute}, Concurrency: 2}
	want.LeaderElection.Namespace = "kube-leases"
	want.LeaderElection.LeaseDuration = metav1.Duration{Duration: 30 * time.Second}
	want.Backend.Address = "https://vault.example.test:8200"
	want.Backend.CAFile = "/etc/ohmlab/vault-ca/ca.crt"
	want.Backend.TLSServerName = "vault.internal"
	want.Backend.Timeout = metav1.Duration{Duration: 5 * time.Second}
	want.Backend.QPS = 2.5
	want.Backend.Burst = 5
	want.Backend.Auth.Method = "kubernetes"
	want.Backend.Auth.Mount = "k8s-prod"
	want.Backend.Auth.Role = "seeder"
	want.Backend.Auth.Audience = "vault-prod"
	want.Backend.Auth.TokenFile = "/var/run/secrets/ohmlab/vault/token"
	// The tenants' section, off, as values.yaml has it.
	want.Tenants = tenancy.DefaultConfig()
	want.Tenants.Namespaces, want.Tenants.SharedSources = []string{}, []string{}
	// The brake's defaults, as values.yaml has them.
	want.Brake = reconcilers.VaultBrake{VanishedShare: 0.5, MinVanished: 5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}

	// A release reaches the config as the person wrote it.
	brake := processConfig(t, render(t, vaultOn+"    brake: {vanishedShare: 0.3, minVanished: 10, releasedAt: \"2026-03-01T12:00:00Z\"}\n"), "vault")["vault"].Brake
	if diff := cmp.Diff(reconcilers.VaultBrake{VanishedShare: 0.3, MinVanished: 10, ReleasedAt: "2026-03-01T12:00:00Z"}, brake); diff != "" {
		t.Errorf("brake (-want +got):\n%s", diff)
	}

	// The Lease Role follows the leader-election namespace.
	mustFind(t, objs, "Role", "kube-leases", ns+"-"+fullname+"-vault-leader-election")
	// The CA lands where caFile points, the token audience follows the config.
	var d appsv1.Deployment
	charttest.Convert(t, mustFind(t, objs, "Deployment", ns, fullname+"-vault"), &d)
	var caItem, audience string
	var expiration int64
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "config" {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil && s.ConfigMap.Name == "vault-ca" {
					caItem = s.ConfigMap.Items[0].Key + "->" + s.ConfigMap.Items[0].Path
				}
			}
		}
		if v.Name == "vault-token" {
			audience = v.Projected.Sources[0].ServiceAccountToken.Audience
			expiration = *v.Projected.Sources[0].ServiceAccountToken.ExpirationSeconds
		}
	}
	if caItem != "root.pem->vault-ca/ca.crt" {
		t.Errorf("CA item = %q, want root.pem->vault-ca/ca.crt (under /etc/ohmlab)", caItem)
	}
	if audience != "vault-prod" || expiration != 900 {
		t.Errorf("token audience %q expiration %d", audience, expiration)
	}

	// A CA from a Secret is mounted by the kubelet the same way.
	objs = render(t, vaultOn+"    backend: {ca: {secret: vault-tls}}\n")
	charttest.Convert(t, mustFind(t, objs, "Deployment", ns, fullname+"-vault"), &d)
	found := false
	for _, s := range d.Spec.Template.Spec.Volumes[0].Projected.Sources {
		if s.Secret != nil && s.Secret.Name == "vault-tls" && s.Secret.Items[0].Path == "vault-ca/ca.crt" {
			found = true
		}
	}
	if !found || processConfig(t, objs, "vault")["vault"].Backend.CAFile != "/etc/ohmlab/vault-ca/ca.crt" {
		t.Errorf("CA from a Secret not mounted: %+v", d.Spec.Template.Spec.Volumes[0])
	}
}

func TestPodSettings(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	objs := render(t, vaultOn+`
image: {digest: `+digest+`, tag: v9}
logLevel: debug
replicas: 2
priorityClassName: platform-critical
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: platform, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: tier, operator: In, values: [platform]}]}]}}}
podLabels: {team: platform}
podAnnotations: {example.com/note: hi}
resources: {limits: {memory: 128Mi}}
`)
	var d appsv1.Deployment
	charttest.Convert(t, mustFind(t, objs, "Deployment", ns, fullname+"-vault"), &d)
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	if c.Image != "ghcr.io/ohmlab/ohmlab-controller@"+digest {
		t.Errorf("image = %s", c.Image)
	}
	if !slices.Contains(c.Args, "--log-level=debug") {
		t.Errorf("args %v", c.Args)
	}
	if *d.Spec.Replicas != 2 || spec.PriorityClassName != "platform-critical" || spec.NodeSelector["kubernetes.io/os"] != "linux" ||
		len(spec.Tolerations) != 1 || spec.Affinity == nil || spec.Affinity.NodeAffinity == nil {
		t.Errorf("pod settings not applied: %+v", spec)
	}
	if d.Spec.Template.Labels["team"] != "platform" || d.Spec.Template.Annotations["example.com/note"] != "hi" {
		t.Errorf("pod metadata: %+v", d.Spec.Template.ObjectMeta)
	}
	if c.Resources.Limits.Memory().String() != "128Mi" {
		t.Errorf("resources: %+v", c.Resources)
	}

	objs = render(t, vaultOn+"image: {tag: v1.2.3}\n")
	charttest.Convert(t, mustFind(t, objs, "Deployment", ns, fullname+"-vault"), &d)
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "ghcr.io/ohmlab/ohmlab-controller:v1.2.3" {
		t.Errorf("image = %s", got)
	}
}

func TestNetworkPolicy(t *testing.T) {
	if n := len(charttest.Filter(render(t, vaultOn), "NetworkPolicy")); n != 0 {
		t.Errorf("%d NetworkPolicies with networkPolicy.enabled=false", n)
	}
	vaultEgress := `[{to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: vault-operator-system}}}], ports: [{port: 8200, protocol: TCP}]}]`
	objs := render(t, vaultOn+"    extraEgress: "+vaultEgress+`
networkPolicy:
  enabled: true
  apiServer: {cidrs: [10.0.0.1/32]}
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
  extraEgress: [{to: [{ipBlock: {cidr: 192.0.2.10/32}}], ports: [{port: 4317}]}]
`)
	var np networkingv1.NetworkPolicy
	charttest.Convert(t, mustFind(t, objs, "NetworkPolicy", ns, fullname+"-vault"), &np)
	var d appsv1.Deployment
	charttest.Convert(t, mustFind(t, objs, "Deployment", ns, fullname+"-vault"), &d)
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("podSelector %v does not select the process's pods", np.Spec.PodSelector)
	}
	if diff := cmp.Diff([]networkingv1.PolicyType{"Ingress", "Egress"}, np.Spec.PolicyTypes); diff != "" {
		t.Errorf("policyTypes (-want +got):\n%s", diff)
	}
	var ingressPorts []string
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			ingressPorts = append(ingressPorts, p.Port.String())
		}
		if len(r.Ports) == 1 && r.Ports[0].Port.IntValue() == 8080 && len(r.From) != 1 {
			t.Errorf("metrics ingress from %v, want metricsFrom", r.From)
		}
	}
	if diff := cmp.Diff([]string{"9443", "8080", "8081"}, ingressPorts); diff != "" {
		t.Errorf("ingress ports (-want +got):\n%s", diff)
	}
	var egress []string
	for _, r := range np.Spec.Egress {
		var to, ports []string
		for _, p := range r.To {
			switch {
			case p.IPBlock != nil:
				to = append(to, p.IPBlock.CIDR)
			case p.NamespaceSelector != nil:
				to = append(to, metav1.FormatLabelSelector(p.NamespaceSelector)+"|"+metav1.FormatLabelSelector(p.PodSelector))
			}
		}
		for _, p := range r.Ports {
			proto := "TCP"
			if p.Protocol != nil {
				proto = string(*p.Protocol)
			}
			ports = append(ports, p.Port.String()+"/"+proto)
		}
		egress = append(egress, strings.Join(to, ",")+" "+strings.Join(ports, ","))
	}
	wantEgress := []string{
		"kubernetes.io/metadata.name=kube-system|k8s-app=kube-dns 53/UDP,53/TCP",
		"10.0.0.1/32 443/TCP,6443/TCP",
		"kubernetes.io/metadata.name=vault-operator-system|<none> 8200/TCP",
		"192.0.2.10/32 4317/TCP",
	}
	if diff := cmp.Diff(wantEgress, egress); diff != "" {
		t.Errorf("egress (-want +got):\n%s", diff)
	}
}

// TestNetworkPolicyNeedsAWayToVault: a default-deny policy without an egress rule for Vault
// would keep the Vault target from logging in, so the chart refuses to render it (a NOTES
// warning is not shown by every installer) instead of installing a controller that cannot work.
func TestNetworkPolicyNeedsAWayToVault(t *testing.T) {
	const (
		policyOn    = "networkPolicy: {enabled: true, apiServer: {cidrs: [10.0.0.1/32]}}\n"
		vaultEgress = "    extraEgress: [{to: [{ipBlock: {cidr: 10.0.0.5/32}}], ports: [{port: 8200}]}]\n"
	)
	refused := []string{
		"targets.vault.extraEgress: required with networkPolicy.enabled and the Vault target",
		"without a rule to Vault (https://vault.vault-operator-system.svc:8200) the controller cannot log in",
	}
	tests := []struct {
		name, values string
		want         []string // the render error; nil: it renders
		wantPolicies int
	}{
		{name: "no egress rule", values: vaultOn + policyOn, want: refused},
		{name: "no egress rule, sharded", values: vaultOn + "    shards: [a]\n" + policyOn, want: refused},
		{name: "no egress rule, grouped process", values: vaultOn + "deployments: {all: [vault, harbor]}\n" + policyOn, want: refused},
		{name: "no egress rule, address in the message", values: vaultOn + "    backend: {address: https://vault.example.com:8200}\n" + policyOn,
			want: []string{"without a rule to Vault (https://vault.example.com:8200)"}},
		{name: "the target's extraEgress", values: vaultOn + vaultEgress + policyOn, wantPolicies: 1},
		{name: "networkPolicy.extraEgress", values: vaultOn + "networkPolicy: {enabled: true, apiServer: {cidrs: [10.0.0.1/32]}, extraEgress: [{to: [{ipBlock: {cidr: 10.0.0.5/32}}]}]}\n", wantPolicies: 1},
		{name: "the target's extraEgress, sharded", values: vaultOn + "    shards: [a]\n" + vaultEgress + policyOn, wantPolicies: 2},
		{name: "policy off", values: vaultOn},
		{name: "Vault target off", values: policyOn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want != nil {
				wantRenderError(t, tt.values, tt.want)
				return
			}
			if n := len(charttest.Filter(render(t, tt.values), "NetworkPolicy")); n != tt.wantPolicies {
				t.Errorf("%d NetworkPolicies, want %d", n, tt.wantPolicies)
			}
		})
	}
}

func TestWebhook(t *testing.T) {
	objs := render(t, vaultOn+"webhook: {timeoutSeconds: 7}\n")
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	charttest.Convert(t, mustFind(t, objs, "ValidatingWebhookConfiguration", "", clusterName), &vwc)
	if got := vwc.Annotations["cert-manager.io/inject-ca-from"]; got != ns+"/"+fullname+"-webhook" {
		t.Errorf("inject-ca-from = %q", got)
	}
	mustFind(t, objs, "Certificate", ns, fullname+"-webhook")
	if len(vwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks", len(vwc.Webhooks))
	}
	w := vwc.Webhooks[0]
	fail, none, seven, port := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, int32(7), int32(443)
	webhookPath := "/validate-ohmlab-fr-v1alpha1-vaultseed"
	want := admissionregistrationv1.ValidatingWebhook{
		Name:                    "vvaultseed.ohmlab.fr",
		AdmissionReviewVersions: []string{"v1"},
		SideEffects:             &none,
		FailurePolicy:           &fail,
		MatchPolicy:             ptr(admissionregistrationv1.Equivalent),
		TimeoutSeconds:          &seven,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Name: fullname + "-webhook", Namespace: ns, Path: &webhookPath, Port: &port,
		}},
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: watched},
		}},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"ohmlab.fr"}, APIVersions: []string{"v1alpha1"},
				Resources: []string{"vaultseeds"}, Scope: ptr(admissionregistrationv1.NamespacedScope)},
		}},
		// What the API server does with it is test/e2e's TestRunbookRemovesAFinalizerWithEveryControllerStopped.
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name: "changes-spec-or-labels",
			Expression: "request.operation != 'UPDATE' || (!has(object.metadata.deletionTimestamp) && (object.spec != oldObject.spec || " +
				"object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({})))",
		}},
	}
	if diff := cmp.Diff(want, w); diff != "" {
		t.Errorf("webhook (-want +got):\n%s", diff)
	}

	// The Service reaches the webhook port of the Vault target's pods.
	var svc corev1.Service
	charttest.Convert(t, mustFind(t, objs, "Service", ns, fullname+"-webhook"), &svc)
	var d appsv1.Deployment
	charttest.Convert(t, mustFind(t, objs, "Deployment", ns, fullname+"-vault"), &d)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) ||
		svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "webhook" {
		t.Errorf("webhook Service: %+v", svc.Spec)
	}

	// The serving certificate names the Service; by default a self-signed CA issues it.
	cert := mustFind(t, objs, "Certificate", ns, fullname+"-webhook")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if !slices.Contains(dns, fullname+"-webhook."+ns+".svc") {
		t.Errorf("dnsNames %v", dns)
	}
	issuer, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef")
	if diff := cmp.Diff(map[string]string{"name": fullname + "-ca", "kind": "Issuer", "group": "cert-manager.io"}, issuer); diff != "" {
		t.Errorf("issuerRef (-want +got):\n%s", diff)
	}
	ca := mustFind(t, objs, "Certificate", ns, fullname+"-ca")
	if isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA"); !isCA {
		t.Error("the CA Certificate is not a CA")
	}

	// An existing issuer replaces the self-signed CA.
	objs = render(t, vaultOn+"webhook: {certManager: {issuerRef: {name: platform-ca, kind: ClusterIssuer}}}\n")
	if n := len(charttest.Filter(objs, "Issuer")); n != 0 {
		t.Errorf("%d Issuers with an existing issuer", n)
	}
	cert = mustFind(t, objs, "Certificate", ns, fullname+"-webhook")
	issuer, _, _ = unstructured.NestedStringMap(cert.Object, "spec", "issuerRef")
	if diff := cmp.Diff(map[string]string{"name": "platform-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}, issuer); diff != "" {
		t.Errorf("issuerRef (-want +got):\n%s", diff)
	}
}

func ptr[T any](v T) *T { return &v }

// TestWebhookMatchesTheMarker: the chart's webhook is what controller-gen writes into
// config/webhook from the marker in webhooks/ (make manifests), plus what only a deployment
// knows (the Service, the namespaces, the timeout) and matchConditions, which controller-gen's
// webhook marker cannot express (kubernetes-sigs/controller-tools#1242).
func TestWebhookMatchesTheMarker(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(charttest.RepoRoot(), "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var generated admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(raw, &generated); err != nil {
		t.Fatal(err)
	}
	var chart admissionregistrationv1.ValidatingWebhookConfiguration
	charttest.Convert(t, mustFind(t, render(t, vaultOn), "ValidatingWebhookConfiguration", "", clusterName), &chart)
	if len(generated.Webhooks) != 1 || len(chart.Webhooks) != 1 {
		t.Fatalf("%d generated webhooks, %d in the chart, want 1 each", len(generated.Webhooks), len(chart.Webhooks))
	}
	want, got := generated.Webhooks[0], chart.Webhooks[0]
	if *want.ClientConfig.Service.Path != *got.ClientConfig.Service.Path {
		t.Errorf("path %s, the marker's is %s", *got.ClientConfig.Service.Path, *want.ClientConfig.Service.Path)
	}
	// The generated rule leaves the scope to the API server's default (*).
	for i := range got.Rules {
		got.Rules[i].Scope = nil
	}
	got.ClientConfig, got.NamespaceSelector, got.TimeoutSeconds, got.MatchConditions = want.ClientConfig, nil, nil, nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the chart's webhook differs from the marker's (-config/webhook +chart):\n%s", diff)
	}
}

// The kinds of the Prometheus Operator the chart renders, as a cluster announces them.
const (
	podMonitorKind     = charttest.MonitoringAPI + "/PodMonitor"
	prometheusRuleKind = charttest.MonitoringAPI + "/PrometheusRule"
)

func TestMonitoringNeedsTheAPI(t *testing.T) {
	for _, tt := range []struct {
		name           string
		values         string
		apis           []string
		podMonitor     bool
		prometheusRule bool
		// noAlertsNote: NOTES.txt says why no alert renders.
		noAlertsNote bool
	}{
		{name: "without the API", values: vaultOn},
		{name: "with the API", values: vaultOn, apis: []string{charttest.MonitoringAPI}, podMonitor: true, prometheusRule: true},
		// Nothing scrapes under the job the alerts select: they could never be right.
		{name: "PodMonitor off", values: vaultOn + "metrics: {podMonitor: {enabled: false}}\n", apis: []string{charttest.MonitoringAPI}, noAlertsNote: true},
		{name: "PodMonitor off, another scrape's job", values: vaultOn + "metrics: {podMonitor: {enabled: false}, prometheusRule: {job: kubernetes-pods}}\n", apis: []string{charttest.MonitoringAPI}, prometheusRule: true},
		{name: "PrometheusRule off", values: vaultOn + "metrics: {prometheusRule: {enabled: false}}\n", apis: []string{charttest.MonitoringAPI}, podMonitor: true},
		{name: "no controller", values: "{}", apis: []string{charttest.MonitoringAPI}},
		// A live cluster announces each kind (Helm's capabilities list group/version/Kind); one
		// may have some of the Prometheus Operator's CRDs only, and an object of a kind it does
		// not serve would fail the whole install.
		{name: "both kinds served", values: vaultOn, apis: []string{charttest.MonitoringAPI, podMonitorKind, prometheusRuleKind}, podMonitor: true, prometheusRule: true},
		{name: "only the PodMonitor kind served", values: vaultOn, apis: []string{charttest.MonitoringAPI, podMonitorKind}, podMonitor: true},
		{name: "only the PrometheusRule kind served", values: vaultOn, apis: []string{charttest.MonitoringAPI, prometheusRuleKind}, noAlertsNote: true},
		{name: "only the PrometheusRule kind served, another scrape's job", values: vaultOn + "metrics: {prometheusRule: {job: kubernetes-pods}}\n", apis: []string{charttest.MonitoringAPI, prometheusRuleKind}, prometheusRule: true},
		{name: "another kind of the API only", values: vaultOn, apis: []string{charttest.MonitoringAPI, charttest.MonitoringAPI + "/ServiceMonitor"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := charttest.Run(charttest.Values(t, tt.values), charttest.Options{APIVersions: tt.apis})
			if err != nil {
				t.Fatal(err)
			}
			objs := res.Objects
			if got := strings.Contains(res.Notes, "No alerts: "); got != tt.noAlertsNote {
				t.Errorf("NOTES say there is no alert: %v, want %v:\n%s", got, tt.noAlertsNote, res.Notes)
			}
			if got := len(charttest.Filter(objs, "PodMonitor")) == 1; got != tt.podMonitor {
				t.Errorf("PodMonitor rendered: %v, want %v", got, tt.podMonitor)
			}
			if got := len(charttest.Filter(objs, "PrometheusRule")) == 1; got != tt.prometheusRule {
				t.Errorf("PrometheusRule rendered: %v, want %v", got, tt.prometheusRule)
			}
		})
	}
}

func TestPodMonitor(t *testing.T) {
	objs := render(t, vaultOn+"metrics: {podMonitor: {labels: {release: prometheus-stack}}}\n", charttest.MonitoringAPI)
	pm := mustFind(t, objs, "PodMonitor", ns, fullname)
	if pm.GetLabels()["release"] != "prometheus-stack" {
		t.Errorf("labels %v", pm.GetLabels())
	}
	match, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	var d appsv1.Deployment
	charttest.Convert(t, mustFind(t, objs, "Deployment", ns, fullname+"-vault"), &d)
	if !labels.SelectorFromSet(match).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("PodMonitor selector %v does not select the pods", match)
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 {
		t.Fatalf("endpoints %v", eps)
	}
	ep := eps[0].(map[string]any)
	if ep["port"] != "metrics" || ep["path"] != "/metrics" || ep["honorLabels"] != true {
		t.Errorf("endpoint %v", ep)
	}
}

// metrics the controller exports (and controller-runtime's), the only ones alerts and the
// dashboard may use.
var knownMetrics = []string{
	"up",
	"ohmlab_build_info",
	"ohmlab_crd_revision_mismatch",
	"ohmlab_object_ready",
	"ohmlab_object_last_reconcile_timestamp_seconds",
	"ohmlab_planned_changes",
	"ohmlab_data_writes_total",
	"ohmlab_backend_requests_total",
	"ohmlab_backend_request_duration_seconds_bucket",
	"ohmlab_resync_period_seconds",
	"ohmlab_vanished_brake_holds",
	"ohmlab_vanished_paths",
	"controller_runtime_reconcile_total",
	"controller_runtime_reconcile_errors_total",
	"workqueue_depth",
}

var alertNames = []string{
	"OhmlabControllerDown",
	"OhmlabObjectNotReady",
	"OhmlabReconcileStale",
	"OhmlabBackendErrors",
	"OhmlabBackendForbidden",
	"OhmlabWriteLoop",
	"OhmlabCRDRevisionMismatch",
	"OhmlabVaultDataLoss",
}

func TestAlerts(t *testing.T) {
	objs := render(t, vaultOn+"metrics: {prometheusRule: {alertLabels: {team: platform}}}\n", charttest.MonitoringAPI)
	pr := mustFind(t, objs, "PrometheusRule", ns, fullname)
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	readme := readmeAnchors(t)
	var names []string
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			name := rule["alert"].(string)
			names = append(names, name)
			ann, _, _ := unstructured.NestedStringMap(rule, "annotations")
			lbl, _, _ := unstructured.NestedStringMap(rule, "labels")
			if ann["summary"] == "" || ann["description"] == "" {
				t.Errorf("%s: summary %q description %q", name, ann["summary"], ann["description"])
			}
			base, anchor, ok := strings.Cut(ann["runbook_url"], "#")
			if !ok || !strings.HasSuffix(base, "/charts/ohmlab-controller/README.md") || !readme[anchor] || anchor != strings.ToLower(name) {
				t.Errorf("%s: runbook_url %q does not point to its README section", name, ann["runbook_url"])
			}
			if lbl["severity"] == "" || lbl["team"] != "platform" {
				t.Errorf("%s: labels %v", name, lbl)
			}
			expr, _ := rule["expr"].(string)
			if !strings.Contains(expr, `job="`+ns+"/"+fullname+`"`) {
				t.Errorf("%s: expression does not select the PodMonitor's job: %s", name, expr)
			}
			checkMetrics(t, name, expr)
			if _, err := time.ParseDuration(rule["for"].(string)); err != nil {
				t.Errorf("%s: for: %v", name, err)
			}
		}
	}
	if diff := cmp.Diff(alertNames, names); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}

	// An alert can be switched off and tuned.
	objs = render(t, vaultOn+"metrics: {prometheusRule: {alerts: {OhmlabWriteLoop: {enabled: false}, OhmlabObjectNotReady: {for: 1h, severity: critical}}}}\n", charttest.MonitoringAPI)
	pr = mustFind(t, objs, "PrometheusRule", ns, fullname)
	groups, _, _ = unstructured.NestedSlice(pr.Object, "spec", "groups")
	rules, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
	for _, r := range rules {
		rule := r.(map[string]any)
		switch rule["alert"] {
		case "OhmlabWriteLoop":
			t.Error("OhmlabWriteLoop rendered while disabled")
		case "OhmlabObjectNotReady":
			if rule["for"] != "1h" || rule["labels"].(map[string]any)["severity"] != "critical" {
				t.Errorf("OhmlabObjectNotReady not tuned: %v", rule)
			}
		}
	}

	// Another scrape: every alert selects its job instead of the PodMonitor's.
	objs = render(t, vaultOn+"metrics: {podMonitor: {enabled: false}, prometheusRule: {job: kubernetes-pods}}\n", charttest.MonitoringAPI)
	pr = mustFind(t, objs, "PrometheusRule", ns, fullname)
	groups, _, _ = unstructured.NestedSlice(pr.Object, "spec", "groups")
	rules, _, _ = unstructured.NestedSlice(groups[0].(map[string]any), "rules")
	if len(rules) != len(alertNames) {
		t.Errorf("%d alerts with metrics.prometheusRule.job, want %d", len(rules), len(alertNames))
	}
	for _, r := range rules {
		rule := r.(map[string]any)
		if expr := rule["expr"].(string); !strings.Contains(expr, `job="kubernetes-pods"`) || strings.Contains(expr, `job="`+ns+"/") {
			t.Errorf("%s does not select the job of metrics.prometheusRule.job: %s", rule["alert"], expr)
		}
	}
}

// checkMetrics fails when an expression uses a metric the controller does not export.
func checkMetrics(t *testing.T, where, expr string) {
	t.Helper()
	for _, m := range metricNames(expr) {
		if !slices.Contains(knownMetrics, m) {
			t.Errorf("%s uses unknown metric %s: %s", where, m, expr)
		}
	}
	if len(metricNames(expr)) == 0 {
		t.Errorf("%s uses no metric: %s", where, expr)
	}
}

// metricNames returns the identifiers of an expression followed by a selector or a range
// ("name{", "name["), which is how every expression of the chart names a metric.
func metricNames(expr string) []string {
	var out []string
	isIdent := func(b byte) bool {
		return b == '_' || b == ':' || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
	}
	for i := 0; i < len(expr); i++ {
		if expr[i] != '{' && expr[i] != '[' {
			continue
		}
		j := i
		for j > 0 && isIdent(expr[j-1]) {
			j--
		}
		if j < i {
			out = append(out, expr[j:i])
		}
	}
	return out
}

// TestAvailability: two replicas and a PodDisruptionBudget by default, so that a drain or a
// restart leaves one replica answering admissions; none with one replica, where minAvailable 1
// would block every drain.
func TestAvailability(t *testing.T) {
	objs := render(t, vaultOn)
	var d appsv1.Deployment
	charttest.Convert(t, mustFind(t, objs, "Deployment", ns, fullname+"-vault"), &d)
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d, want 2", *d.Spec.Replicas)
	}
	// Until kube-proxy drops a deleted pod from the Service, admissions still reach it.
	if h := d.Spec.Template.Spec.Containers[0].Lifecycle; h == nil || h.PreStop == nil || h.PreStop.Sleep == nil || h.PreStop.Sleep.Seconds < 1 {
		t.Errorf("the controller container has no preStop sleep (lifecycle %+v): a rollout would lose admissions", h)
	}
	var pdb policyv1.PodDisruptionBudget
	charttest.Convert(t, mustFind(t, objs, "PodDisruptionBudget", ns, fullname+"-vault"), &pdb)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget spec %+v, want minAvailable 1", pdb.Spec)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget selector %v does not select the process's pods", pdb.Spec.Selector)
	}
	grouped := render(t, vaultOn+"deployments: {all: [vault, harbor]}\n")
	mustFind(t, grouped, "PodDisruptionBudget", ns, fullname+"-all")
	for _, values := range []string{vaultOn + "replicas: 1\n", vaultOn + "podDisruptionBudget: {enabled: false}\n"} {
		if n := len(charttest.Filter(render(t, values), "PodDisruptionBudget")); n != 0 {
			t.Errorf("%d PodDisruptionBudgets with %q", n, values)
		}
	}
}

// TestTopologySpread: by default each process's replicas spread over nodes, preferably (a
// single node still runs them all), so that losing a node leaves a replica answering the
// webhook; an explicit list replaces the default and [] removes it.
func TestTopologySpread(t *testing.T) {
	spread := func(process string) []corev1.TopologySpreadConstraint {
		return []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				"app.kubernetes.io/name": fullname, "app.kubernetes.io/instance": charttest.ReleaseName,
				"app.kubernetes.io/component": "controller", "ohmlab.fr/process": process,
			}},
			MatchLabelKeys: []string{"pod-template-hash"},
		}}
	}
	zones := []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": fullname}}}}
	tests := []struct {
		name   string
		values string
		want   map[string][]corev1.TopologySpreadConstraint
	}{
		{name: "default", values: vaultOn, want: map[string][]corev1.TopologySpreadConstraint{"vault": spread("vault")}},
		{name: "default, shards each on their own pods", values: vaultOn + "    shards: [a]\n", want: map[string][]corev1.TopologySpreadConstraint{
			"vault": spread("vault"), "vault-shard-a": spread("vault-shard-a"),
		}},
		{name: "a list replaces the default", values: vaultOn + "topologySpreadConstraints: [{maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app.kubernetes.io/name: ohmlab-controller}}}]\n",
			want: map[string][]corev1.TopologySpreadConstraint{"vault": zones}},
		{name: "[] sets none", values: vaultOn + "topologySpreadConstraints: []\n", want: map[string][]corev1.TopologySpreadConstraint{"vault": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string][]corev1.TopologySpreadConstraint{}
			for proc, d := range deployments(t, render(t, tt.values)) {
				got[proc] = d.Spec.Template.Spec.TopologySpreadConstraints
				if c := got[proc]; c != nil && tt.want[proc] != nil && c[0].LabelSelector != nil {
					if sel := labels.SelectorFromSet(c[0].LabelSelector.MatchLabels); !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
						t.Errorf("%s: the spread's selector %v does not select the Deployment's pods", proc, sel)
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("topologySpreadConstraints by process (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPrometheusDurations: the PodMonitor's interval and every alert's for accept what
// Prometheus parses and refuse the rest with the value's name, not Prometheus' rejection of
// the whole object at apply time. The verdicts are Prometheus' own (test/prometheus).
func TestPrometheusDurations(t *testing.T) {
	// A field's name, and the values that set it to d.
	type field struct {
		name  string
		value func(d string) string
	}
	fields := []field{{name: "metrics.podMonitor.interval", value: func(d string) string {
		return fmt.Sprintf("metrics: {podMonitor: {interval: %q}}\n", d)
	}}}
	for _, a := range alertNames {
		fields = append(fields, field{name: "metrics.prometheusRule.alerts." + a + ".for", value: func(d string) string {
			return fmt.Sprintf("metrics: {prometheusRule: {alerts: {%s: {for: %q}}}}\n", a, d)
		}})
	}
	for _, f := range fields {
		for _, d := range charttest.PrometheusDurations {
			t.Run(f.name+"="+d.Value, func(t *testing.T) {
				_, err := charttest.RenderE(charttest.Values(t, vaultOn+f.value(d.Value)), charttest.Options{APIVersions: []string{charttest.MonitoringAPI}})
				switch {
				case d.Valid && err != nil:
					t.Errorf("%q refused, Prometheus accepts it: %v", d.Value, err)
				case !d.Valid && err == nil:
					t.Errorf("%q accepted, Prometheus refuses it", d.Value)
				case !d.Valid && !strings.Contains(err.Error(), path.Base(strings.ReplaceAll(f.name, ".", "/"))):
					t.Errorf("the refusal of %q does not name %s: %v", d.Value, f.name, err)
				}
			})
		}
	}
}

func TestBadValuesFail(t *testing.T) {
	tests := []struct {
		name   string
		values string
		want   []string
	}{
		{
			name:   "target in two deployments",
			values: vaultOn + "deployments: {a: [vault], b: [vault, harbor]}\n",
			want:   []string{`target "vault" is listed in both "a" and "b"`, "exactly one process"},
		},
		{
			name:   "disabled target in two deployments",
			values: vaultOn + "deployments: {a: [vault, harbor], b: [harbor]}\n",
			want:   []string{`target "harbor" is listed in both "a" and "b"`},
		},
		{
			name:   "enabled target in none",
			values: vaultOn + "deployments: {apps: [harbor, sonarqube]}\n",
			want:   []string{`target "vault" is enabled but no process lists it`, "deployments.vault: [vault]"},
		},
		{
			name:   "brake released at no time",
			values: vaultOn + "    brake: {releasedAt: yesterday}\n",
			want:   []string{"releasedAt", "does not match pattern"},
		},
		{
			name:   "brake share above all",
			values: vaultOn + "    brake: {vanishedShare: 2}\n",
			want:   []string{"vanishedShare"},
		},
		{
			name:   "gogc below 1",
			values: vaultOn + "gogc: 0\n",
			want:   []string{"gogc", "minimum"},
		},
		{
			name:   "gogc not a number",
			values: vaultOn + "gogc: fast\n",
			want:   []string{"gogc", "integer"},
		},
		{
			name:   "harbor is reserved",
			values: "targets: {harbor: {enabled: true}}\n",
			want:   []string{`targets.harbor.enabled: "harbor" is a reserved target name`},
		},
		{
			name:   "sonarqube is reserved",
			values: vaultOn + "  sonarqube: {enabled: true}\n",
			want:   []string{`targets.sonarqube.enabled: "sonarqube" is a reserved target name`},
		},
		{
			name:   "vault without namespaces",
			values: "targets: {vault: {enabled: true}}\n",
			want:   []string{"targets.vault.namespaces", "watches no namespace"},
		},
		{
			name:   "two CA sources",
			values: vaultOn + "    backend: {ca: {configMap: a, secret: b}}\n",
			want:   []string{"targets.vault.backend.ca: set configMap or secret, not both"},
		},
		{
			name:   "unknown top-level key",
			values: "replicaCount: 2\n",
			want:   []string{"values don't meet the specifications of the schema", "replicaCount"},
		},
		{
			name:   "unknown target key",
			values: vaultOn + "    namespace: vault-operator-system\n",
			want:   []string{"values don't meet the specifications of the schema", "namespace"},
		},
		{
			name:   "unknown target",
			values: "targets: {gitlab: {enabled: true}}\n",
			want:   []string{"values don't meet the specifications of the schema", "gitlab"},
		},
		{
			name:   "unknown target in deployments",
			values: vaultOn + "deployments: {all: [vault, gitlab]}\n",
			want:   []string{"values don't meet the specifications of the schema", "deployments"},
		},
		{
			name:   "token auth is for local runs",
			values: vaultOn + "    backend: {auth: {method: token}}\n",
			want:   []string{"values don't meet the specifications of the schema", "method"},
		},
		{
			name:   "token shorter than Kubernetes allows",
			values: vaultOn + "    backend: {auth: {tokenExpirationSeconds: 60}}\n",
			want:   []string{"values don't meet the specifications of the schema", "tokenExpirationSeconds"},
		},
		{
			name:   "bad digest",
			values: "image: {digest: latest}\n",
			want:   []string{"values don't meet the specifications of the schema", "digest"},
		},
		{
			name:   "bad duration",
			values: vaultOn + "    resyncPeriod: ten minutes\n",
			want:   []string{"values don't meet the specifications of the schema", "resyncPeriod"},
		},
		{
			name:   "network policy without the API server's CIDRs",
			values: vaultOn + "networkPolicy: {enabled: true}\n",
			want:   []string{"networkPolicy.apiServer.cidrs: required with networkPolicy.enabled", "does not open ports 443/6443 to any address"},
		},
		{
			name:   "no replica with a target enabled",
			values: vaultOn + "replicas: 0\n",
			want:   []string{"replicas: 0 with the targets vault enabled", "Set replicas to 1 or more"},
		},
		{
			name:   "minAvailable not below replicas",
			values: vaultOn + "replicas: 2\npodDisruptionBudget: {minAvailable: 2}\n",
			want:   []string{"podDisruptionBudget.minAvailable: 2 is not below replicas (2)", "Set it below replicas"},
		},
		{
			name:   "root user",
			values: "securityContext: {runAsUser: 0}\n",
			want:   []string{"values don't meet the specifications of the schema", "runAsUser"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantRenderError(t, tt.values, tt.want) })
	}
}

func TestCRD(t *testing.T) {
	// The chart's copy must be the generated CRD (make manifests copies it).
	generated, err := os.ReadFile(filepath.Join(charttest.RepoRoot(), "config", "crd", "bases", "ohmlab.fr_vaultseeds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile(filepath.Join(charttest.ChartDir(), "files", "crds", "ohmlab.fr_vaultseeds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(generated) != string(copied) {
		t.Errorf("charts/ohmlab-controller/files/crds/ohmlab.fr_vaultseeds.yaml differs from config/crd/bases: run make manifests\n%s",
			cmp.Diff(string(generated), string(copied)))
	}
	sourceJSON, err := yaml.YAMLToJSON(generated)
	if err != nil {
		t.Fatal(err)
	}
	var source unstructured.Unstructured
	if err := source.UnmarshalJSON(sourceJSON); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		values string
		want   map[string]string
	}{
		{name: "defaults", values: "{}", want: map[string]string{
			"ohmlab.fr/revision": release(t), "argocd.argoproj.io/sync-wave": "-10", "helm.sh/resource-policy": "keep",
			"controller-gen.kubebuilder.io/version": "v0.23.0",
		}},
		{name: "not kept, pinned revision", values: "crds: {keep: false, revision: 0123abc}", want: map[string]string{
			"ohmlab.fr/revision": "0123abc", "argocd.argoproj.io/sync-wave": "-10",
			"controller-gen.kubebuilder.io/version": "v0.23.0",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := render(t, tt.values)
			crd := mustFind(t, objs, "CustomResourceDefinition", "", crdName)
			if diff := cmp.Diff(tt.want, crd.GetAnnotations()); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(source.Object["spec"], crd.Object["spec"]); diff != "" {
				t.Errorf("the rendered spec differs from the generated CRD (-want +got):\n%s", diff)
			}
		})
	}
	if n := len(charttest.Filter(render(t, "crds: {install: false}"), "CustomResourceDefinition")); n != 0 {
		t.Errorf("%d CRDs with crds.install=false", n)
	}
}

func TestReleaseNames(t *testing.T) {
	objs, err := charttest.RenderE(charttest.Values(t, vaultOn), charttest.Options{ReleaseName: "ohmlab", Namespace: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	// A release named otherwise prefixes every name with release-chart.
	mustFind(t, objs, "Deployment", "platform", "ohmlab-ohmlab-controller-vault")
	mustFind(t, objs, "ServiceAccount", "platform", "ohmlab-ohmlab-controller-vault")
	var rb rbacv1.RoleBinding
	charttest.Convert(t, mustFind(t, objs, "RoleBinding", "vault-operator-system", "platform-ohmlab-ohmlab-controller-vault"), &rb)
	if rb.Subjects[0].Namespace != "platform" {
		t.Errorf("subject %+v", rb.Subjects[0])
	}
	for _, o := range objs {
		if len(o.GetName()) > 63 {
			t.Errorf("%s: name longer than 63", charttest.Key(o))
		}
	}
}

func TestLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(charttest.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	// helm lint announces no cert-manager API: the webhook's certificate is the user's here, or
	// rendering would stop at the chart's fail (which lint reports as information only).
	for _, values := range []string{"{}", ownCertificate, ownCertificate + "deployments: {all: [vault, harbor]}\nnetworkPolicy: {enabled: true}\n"} {
		linter := lint.AllWithKubeVersion(charttest.ChartDir(), charttest.Values(t, values), ns, kv)
		for _, m := range linter.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("helm lint with %s: %v", strings.TrimSpace(values), m)
			} else {
				t.Logf("helm lint: %v", m)
			}
		}
	}
}

func TestPackagedFiles(t *testing.T) {
	chrt, err := charttest.Load()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range chrt.Files {
		names = append(names, f.Name)
		if strings.HasSuffix(f.Name, ".go") || strings.Contains(f.Name, "testdata/") {
			t.Errorf("the chart packages test file %s (.helmignore)", f.Name)
		}
	}
	for _, want := range []string{"argocd/health.lua", "vault/policy.hcl", "vault/policy-allow-delete.hcl", "vault/role.json", "files/crds/ohmlab.fr_vaultseeds.yaml", "README.md"} {
		if !slices.Contains(names, want) {
			t.Errorf("the chart does not ship %s (has %v)", want, names)
		}
	}
}

// TestRenderHelpers covers what the envtest tests use from charttest.
func TestRenderHelpers(t *testing.T) {
	objs := render(t, vaultOn+"deployments: {core: [vault]}\n", charttest.MonitoringAPI)
	core := charttest.Core(objs)
	for _, o := range core {
		if g := o.GroupVersionKind().Group; g == "cert-manager.io" || g == "monitoring.coreos.com" {
			t.Errorf("Core keeps %s", charttest.Key(o))
		}
	}
	// 4 cert-manager objects, the PodMonitor and the PrometheusRule are left out.
	if len(core) != len(objs)-6 || charttest.Find(core, "CustomResourceDefinition", "", crdName) == nil {
		t.Errorf("Core: %v", charttest.Keys(core))
	}
	if diff := cmp.Diff([]string{"core"}, mapKeys(charttest.ProcessConfigs(objs))); diff != "" {
		t.Errorf("ProcessConfigs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ns, "platform-secrets", "vault-operator-system"}, charttest.Namespaces(objs)); diff != "" {
		t.Errorf("Namespaces (-want +got):\n%s", diff)
	}
}

// wantRenderError renders the chart with values and checks that rendering
// fails with an error holding every string of want.
func wantRenderError(t *testing.T, values string, want []string) {
	t.Helper()
	_, err := charttest.RenderE(charttest.Values(t, values), charttest.Options{})
	if err == nil {
		t.Fatal("rendering succeeded")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}

// TestGOGC: the gogc value is the controller container's GOGC; null leaves
// Go's default (no variable).
func TestGOGC(t *testing.T) {
	tests := []struct {
		name, values string
		want         []string
	}{
		{name: "default", want: []string{"GOGC=50"}},
		{name: "set", values: "gogc: 80\n", want: []string{"GOGC=80"}},
		{name: "null leaves Go's default", values: "gogc: null\n", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d appsv1.Deployment
			charttest.Convert(t, mustFind(t, render(t, vaultOn+tt.values), "Deployment", ns, fullname+"-vault"), &d)
			var got []string
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "GOGC" {
					got = append(got, e.Name+"="+e.Value)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("GOGC variables %v, want %v", got, tt.want)
			}
		})
	}
}
