package chart_test

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/reconcilers"
)

// shardsOn is vaultOn with two shards and a network policy.
const shardsOn = vaultOn + `    shards: [a, b]
    extraEgress: [{to: [{ipBlock: {cidr: 10.0.0.5/32}}], ports: [{port: 8200}]}]
networkPolicy: {enabled: true, apiServer: {cidrs: [10.0.0.1/32]}}
`

// TestConfigCarriesTheShards: the Vault target's configuration lists the shards the chart
// runs, empty without shards, so that the webhook of the process without a shard warns of an
// object labelled with another shard (issue 23, item 7).
func TestConfigCarriesTheShards(t *testing.T) {
	tests := []struct {
		name   string
		values string
		want   []string
	}{
		{name: "no shards", values: vaultOn, want: []string{}},
		{name: "two shards", values: shardsOn, want: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := processConfig(t, render(t, tt.values), "vault")["vault"].Shards
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("targets.vault.shards of the config (-want +got):\n%s", diff)
			}
		})
	}
}

// deployments are the rendered Deployments by process label.
func deployments(t *testing.T, objs []unstructured.Unstructured) map[string]appsv1.Deployment {
	t.Helper()
	out := map[string]appsv1.Deployment{}
	for _, o := range charttest.Filter(objs, "Deployment") {
		var d appsv1.Deployment
		charttest.Convert(t, o, &d)
		out[d.Labels["ohmlab.fr/process"]] = d
	}
	return out
}

// TestShards checks what targets.vault.shards renders: one Deployment per shard besides the
// target's own, each with its ConfigMap (the controller's loader accepts it, with the shard),
// PodDisruptionBudget and NetworkPolicy selecting only its pods; the target's ServiceAccount;
// a Lease Role naming exactly the Leases the processes take; the webhook served by the
// target's own pods only; and an OhmlabControllerDown alert per Deployment.
func TestShards(t *testing.T) {
	objs := render(t, shardsOn, charttest.MonitoringAPI)
	shardProcs := []string{"vault-shard-a", "vault-shard-b"}
	wantKeys := processObjects("vault", true)
	wantKeys = append(wantKeys, "NetworkPolicy/"+ns+"/"+fullname+"-vault")
	for _, p := range shardProcs {
		n := fullname + "-" + p
		wantKeys = append(wantKeys, "Deployment/"+ns+"/"+n, "ConfigMap/"+ns+"/"+n+"-config",
			"PodDisruptionBudget/"+ns+"/"+n, "NetworkPolicy/"+ns+"/"+n)
	}
	sort.Strings(wantKeys)
	if diff := cmp.Diff(wantKeys, sortedKeys(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	// The target's own Deployment is rendered as without shards, so an upgrade keeps it.
	checkDeployment(t, objs, "vault")
	checkRBACWithLeases(t, objs, fullname+"-vault", []string{"ohmlab-controller-vault", "ohmlab-controller-vault-a", "ohmlab-controller-vault-b"})

	deps := deployments(t, objs)
	if diff := cmp.Diff(append([]string{"vault"}, shardProcs...), mapKeys(deps)); diff != "" {
		t.Fatalf("Deployments by process (-want +got):\n%s", diff)
	}
	base := processConfig(t, objs, "vault")["vault"]
	var leases []string
	for _, proc := range mapKeys(deps) {
		d := deps[proc]
		cfg := processConfig(t, objs, proc)["vault"]
		leases = append(leases, reconcilers.LeaseName("vault", cfg.Shard))
		pod := d.Spec.Template.Spec
		c := pod.Containers[0]
		if pod.ServiceAccountName != fullname+"-vault" {
			t.Errorf("%s: serviceAccountName %q, want the target's %s-vault (its RBAC and Vault role)", proc, pod.ServiceAccountName, fullname)
		}
		if proc == "vault" {
			continue
		}
		shard := strings.TrimPrefix(proc, "vault-shard-")
		if cfg.Shard != shard {
			t.Errorf("%s: config shard %q, want %q", proc, cfg.Shard, shard)
		}
		// Apart from the shard, its section is the target's.
		cfg.Shard = ""
		if diff := cmp.Diff(base, cfg); diff != "" {
			t.Errorf("%s: config differs from the target's (-want +got):\n%s", proc, diff)
		}
		if d.Labels["ohmlab.fr/shard"] != shard || d.Spec.Template.Labels["ohmlab.fr/shard"] != shard {
			t.Errorf("%s: shard labels %v / %v", proc, d.Labels, d.Spec.Template.Labels)
		}
		wantArgs := []string{"--config=/etc/ohmlab/config.yaml", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--webhook-port=0", "--log-level=info"}
		if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
			t.Errorf("%s: args (-want +got):\n%s", proc, diff)
		}
		for _, p := range c.Ports {
			if p.Name == "webhook" {
				t.Errorf("%s: exposes the webhook port", proc)
			}
		}
		for _, v := range pod.Volumes {
			if v.Secret != nil {
				t.Errorf("%s: mounts Secret %s (the webhook's key): a shard serves no webhook", proc, v.Secret.SecretName)
			}
		}
		if p := pod.Volumes[0].Projected; p == nil || p.Sources[0].ConfigMap == nil || p.Sources[0].ConfigMap.Name != d.Name+"-config" {
			t.Errorf("%s: config volume %+v", proc, pod.Volumes[0])
		}
	}
	// The Leases the processes take (the controller's own naming) are those the Role names.
	if diff := cmp.Diff([]string{"ohmlab-controller-vault", "ohmlab-controller-vault-a", "ohmlab-controller-vault-b"}, leases); diff != "" {
		t.Errorf("Leases of the processes (-want +got):\n%s", diff)
	}

	// Each selector (Deployment, PDB, NetworkPolicy, webhook Service) selects exactly the pods it
	// is for.
	podsOf := func(sel labels.Selector) []string {
		var out []string
		for _, proc := range mapKeys(deps) {
			if sel.Matches(labels.Set(deps[proc].Spec.Template.Labels)) {
				out = append(out, proc)
			}
		}
		return out
	}
	for _, proc := range mapKeys(deps) {
		name := deps[proc].Name
		sel, err := metav1.LabelSelectorAsSelector(deps[proc].Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{proc}, podsOf(sel)); diff != "" {
			t.Errorf("Deployment %s selects (-want +got):\n%s", name, diff)
		}
		var pdb policyv1.PodDisruptionBudget
		charttest.Convert(t, mustFind(t, objs, "PodDisruptionBudget", ns, name), &pdb)
		if sel, err = metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{proc}, podsOf(sel)); diff != "" {
			t.Errorf("PodDisruptionBudget %s selects (-want +got):\n%s", name, diff)
		}
		var np networkingv1.NetworkPolicy
		charttest.Convert(t, mustFind(t, objs, "NetworkPolicy", ns, name), &np)
		if sel, err = metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{proc}, podsOf(sel)); diff != "" {
			t.Errorf("NetworkPolicy %s selects (-want +got):\n%s", name, diff)
		}
		var ingress []int
		for _, r := range np.Spec.Ingress {
			for _, p := range r.Ports {
				ingress = append(ingress, p.Port.IntValue())
			}
		}
		wantIngress := []int{8080, 8081}
		if proc == "vault" {
			wantIngress = []int{9443, 8080, 8081}
		}
		if diff := cmp.Diff(wantIngress, ingress); diff != "" {
			t.Errorf("NetworkPolicy %s ingress ports (-want +got):\n%s", name, diff)
		}
		if !slices.ContainsFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
			return len(r.To) == 1 && r.To[0].IPBlock != nil && r.To[0].IPBlock.CIDR == "10.0.0.5/32"
		}) {
			t.Errorf("NetworkPolicy %s has no egress to Vault (targets.vault.extraEgress)", name)
		}
	}
	var svc corev1.Service
	charttest.Convert(t, mustFind(t, objs, "Service", ns, fullname+"-webhook"), &svc)
	if diff := cmp.Diff([]string{"vault"}, podsOf(labels.SelectorFromSet(svc.Spec.Selector))); diff != "" {
		t.Errorf("the webhook Service selects (-want +got):\n%s", diff)
	}

	// OhmlabControllerDown, per Deployment: its pod pattern matches its own pods only.
	downs := map[string]*regexp.Regexp{}
	pr := mustFind(t, objs, "PrometheusRule", ns, fullname)
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	rules, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
	podPattern := regexp.MustCompile(`pod=~"([^"]+)"`)
	for _, r := range rules {
		rule := r.(map[string]any)
		if rule["alert"] != "OhmlabControllerDown" {
			continue
		}
		lbl, _, _ := unstructured.NestedStringMap(rule, "labels")
		m := podPattern.FindStringSubmatch(rule["expr"].(string))
		if m == nil {
			t.Fatalf("OhmlabControllerDown for %s: no pod pattern in %s", lbl["process"], rule["expr"])
		}
		downs[lbl["process"]] = regexp.MustCompile("^(?:" + m[1] + ")$") // PromQL anchors =~
		if want := strings.TrimPrefix(lbl["process"], "vault-shard-"); lbl["process"] != "vault" && lbl["shard"] != want {
			t.Errorf("OhmlabControllerDown for %s: shard label %q, want %q", lbl["process"], lbl["shard"], want)
		}
	}
	if diff := cmp.Diff(mapKeys(deps), mapKeys(downs)); diff != "" {
		t.Errorf("OhmlabControllerDown per process (-want +got):\n%s", diff)
	}
	for alert, re := range downs {
		for _, proc := range mapKeys(deps) {
			pod := fmt.Sprintf("%s-7d9f8b6c5-x2k4q", deps[proc].Name)
			if got, want := re.MatchString(pod), alert == proc; got != want {
				t.Errorf("OhmlabControllerDown for %s on pod %s: matches %v, want %v", alert, pod, got, want)
			}
		}
	}
}

// checkRBACWithLeases checks the Lease rule of the Vault target's leader-election Role: get
// and update on exactly leases, by name.
func checkRBACWithLeases(t *testing.T, objs []unstructured.Unstructured, sa string, leases []string) {
	t.Helper()
	var r rbacv1.Role
	charttest.Convert(t, mustFind(t, objs, "Role", ns, fullname+"-vault-leader-election"), &r)
	want := rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: leases, Verbs: []string{"get", "update"}}
	if diff := cmp.Diff(want, r.Rules[0]); diff != "" {
		t.Errorf("Lease rule (-want +got):\n%s", diff)
	}
	var rb rbacv1.RoleBinding
	charttest.Convert(t, mustFind(t, objs, "RoleBinding", ns, fullname+"-vault-leader-election"), &rb)
	if len(rb.Subjects) != 1 || rb.Subjects[0].Name != sa {
		t.Errorf("leader-election RoleBinding subjects %+v, want only %s", rb.Subjects, sa)
	}
	checkNoBroadAccess(t, objs)
}

// TestShardsInAGroupedProcess checks that the shards of a target run by a grouped process use
// that process's ServiceAccount and config section, and carry only the Vault target.
func TestShardsInAGroupedProcess(t *testing.T) {
	objs := render(t, vaultOn+"    shards: [a]\ndeployments: {core: [vault, harbor]}\n")
	deps := deployments(t, objs)
	if diff := cmp.Diff([]string{"core", "vault-shard-a"}, mapKeys(deps)); diff != "" {
		t.Fatalf("Deployments (-want +got):\n%s", diff)
	}
	d := deps["vault-shard-a"]
	if d.Spec.Template.Spec.ServiceAccountName != fullname+"-core" {
		t.Errorf("serviceAccountName %q, want %s-core", d.Spec.Template.Spec.ServiceAccountName, fullname)
	}
	if d.Annotations["ohmlab.fr/targets"] != "vault" {
		t.Errorf("ohmlab.fr/targets = %q, want vault", d.Annotations["ohmlab.fr/targets"])
	}
	if cfg := processConfig(t, objs, "vault-shard-a"); cfg["vault"].Shard != "a" || len(cfg) != 1 {
		t.Errorf("config %+v, want only the vault section with shard a", cfg)
	}
}

func TestBadShardsFail(t *testing.T) {
	tests := []struct {
		name   string
		values string
		want   []string
	}{
		{name: "shards of a disabled target", values: "targets:\n  vault:\n    shards: [a, b]\n", want: []string{"targets.vault.shards: the Vault target is disabled, so no shard runs"}},
		{name: "upper case", values: vaultOn + "    shards: [A]\n", want: []string{"values don't meet the specifications of the schema", "shards"}},
		{name: "listed twice", values: vaultOn + "    shards: [a, a]\n", want: []string{"values don't meet the specifications of the schema", "shards"}},
		{name: "a process has a shard's name", values: vaultOn + "    shards: [a]\ndeployments: {vault-shard-a: [vault]}\n", want: []string{`deployments: process "vault-shard-a" has the name of the Deployment of shard "a"`}},
		{name: "name too long with the release's", values: vaultOn + "    shards: [abcdefghijklmnopqrstuvwxyz0123456]\nfullnameOverride: a-rather-long-release-name\n", want: []string{"longer than 63 characters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantRenderError(t, tt.values, tt.want) })
	}
}

// TestNamedLease: targets.vault.leaderElection.name names the target's
// Lease and its shards' in the configuration each process loads, and the
// leader-election Role grants exactly those, so that two releases in one
// namespace each have their own.
func TestNamedLease(t *testing.T) {
	objs := render(t, vaultOn+"    shards: [a]\n    leaderElection: {name: team-b-ohmlab}\n")
	cfg := processConfig(t, objs, "vault")["vault"]
	if cfg.LeaderElection.Name != "team-b-ohmlab" {
		t.Errorf("the configuration's Lease name %q, want team-b-ohmlab", cfg.LeaderElection.Name)
	}
	checkRBACWithLeases(t, objs, fullname+"-vault", []string{"team-b-ohmlab", "team-b-ohmlab-a"})
	if _, err := charttest.RenderE(charttest.Values(t, vaultOn+"    leaderElection: {name: Team_B}\n"), charttest.Options{}); err == nil {
		t.Error("a Lease name that is no DNS name renders")
	}
}
