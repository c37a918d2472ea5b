package chart_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// tenantsOn is the Vault target with one platform namespace and two
// tenants sharing one source.
const tenantsOn = `
targets:
  vault:
    enabled: true
    namespaces: [vault-operator-system]
    tenants:
      enabled: true
      namespaces: [team-a, team-b]
      sharedSources: [ohmlab/shared/public/]
`

// TestTenantDefaults: the chart's defaults of targets.vault.tenants are the
// controller's (tenancy.DefaultConfig), so that a values file that sets a
// few keys means the same to the chart, the controller and `ohmlab
// validate --values`.
func TestTenantDefaults(t *testing.T) {
	var values struct {
		Targets struct {
			Vault struct {
				Tenants map[string]any `json:"tenants"`
			} `json:"vault"`
		} `json:"targets"`
	}
	if err := yaml.Unmarshal([]byte(readChartFile(t, "values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	section, err := yaml.Marshal(values.Targets.Vault.Tenants)
	if err != nil {
		t.Fatal(err)
	}
	// Strict: every key of the chart's section is one of the controller's.
	var got tenancy.Config
	if err := yaml.UnmarshalStrict(section, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tenancy.DefaultConfig(), got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("values.yaml's targets.vault.tenants (-controller's defaults +chart's):\n%s", diff)
	}
}

// TestTenantsRender: with tenants on, the process's configuration carries
// them, each tenant namespace gets the target's Role plus TokenRequest for
// the tenants' ServiceAccount alone, the webhook is called there, and the
// ValidatingAdmissionPolicy and its binding select exactly the tenants.
// With tenants off (the default) none of it renders.
func TestTenantsRender(t *testing.T) {
	objs := render(t, tenantsOn)
	cfg := processConfig(t, objs, "vault")["vault"]
	want := tenancy.DefaultConfig()
	want.Enabled, want.Namespaces, want.SharedSources = true, []string{"team-a", "team-b"}, []string{"ohmlab/shared/public/"}
	if diff := cmp.Diff(want, cfg.Tenants); diff != "" {
		t.Errorf("config's tenants (-want +got):\n%s", diff)
	}

	tokenRule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{"ohmlab-vaultseed"}, Verbs: []string{"create"}}
	for namespace, tenant := range map[string]bool{"vault-operator-system": false, "team-a": true, "team-b": true} {
		var role rbacv1.Role
		// Outside the release namespace a Role is named after it too.
		charttest.Convert(t, mustFind(t, objs, "Role", namespace, clusterName+"-vault"), &role)
		mustFind(t, objs, "RoleBinding", namespace, clusterName+"-vault")
		if got := slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return cmp.Equal(r, tokenRule) }); got != tenant {
			t.Errorf("Role in %s: token rule %v, want %v: %+v", namespace, got, tenant, role.Rules)
		}
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "serviceaccounts/token") && !cmp.Equal(r, tokenRule) {
				t.Errorf("Role in %s: a broader token rule %+v", namespace, r)
			}
		}
	}

	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	charttest.Convert(t, mustFind(t, objs, "ValidatingWebhookConfiguration", "", clusterName), &vwc)
	if diff := cmp.Diff([]string{"vault-operator-system", "team-a", "team-b"}, vwc.Webhooks[0].NamespaceSelector.MatchExpressions[0].Values); diff != "" {
		t.Errorf("webhook's namespaces (-want +got):\n%s", diff)
	}
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	charttest.Convert(t, mustFind(t, objs, "ValidatingAdmissionPolicyBinding", "", clusterName+"-tenants"), &binding)
	if diff := cmp.Diff([]string{"team-a", "team-b"}, binding.Spec.MatchResources.NamespaceSelector.MatchExpressions[0].Values); diff != "" {
		t.Errorf("policy binding's namespaces (-want +got):\n%s", diff)
	}
	mustFind(t, objs, "ValidatingAdmissionPolicy", "", clusterName+"-tenants")

	for _, o := range render(t, vaultOn) {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			t.Errorf("tenants off, yet %s renders", charttest.Key(o))
		}
		if o.GetKind() == "Role" && strings.Contains(fmt.Sprint(o.Object["rules"]), "serviceaccounts/token") {
			t.Errorf("tenants off, yet %s may create tokens", charttest.Key(o))
		}
	}
}

func TestBadTenantValuesFail(t *testing.T) {
	tests := []struct {
		name, values string
		want         []string
	}{
		{name: "no tenant namespace", values: "targets:\n  vault:\n    enabled: true\n    namespaces: [a]\n    tenants: {enabled: true}\n",
			want: []string{"targets.vault.tenants.namespaces: tenants are enabled but no namespace is a tenant"}},
		{name: "a tenant also a platform namespace", values: "targets:\n  vault:\n    enabled: true\n    namespaces: [a]\n    tenants: {enabled: true, namespaces: [b, a]}\n",
			want: []string{`targets.vault.tenants.namespaces: "a" is also in targets.vault.namespaces`}},
		{name: "tenants without the Vault target", values: "targets:\n  vault:\n    tenants: {enabled: true, namespaces: [b]}\n",
			want: []string{"targets.vault.tenants.enabled: the Vault target is disabled"}},
		{name: "a prefix without the placeholder", values: "targets:\n  vault:\n    enabled: true\n    namespaces: [a]\n    tenants: {enabled: true, namespaces: [b], prefix: ohmlab/tenants/}\n",
			want: []string{"/targets/vault/tenants/prefix", "does not match pattern"}},
		{name: "a prefix with a dot-dot segment", values: "targets:\n  vault:\n    enabled: true\n    namespaces: [a]\n    tenants: {enabled: true, namespaces: [b], prefix: \"ohmlab/../{namespace}/\"}\n",
			want: []string{`targets.vault.tenants.prefix: "ohmlab/../{namespace}/" has a segment '..'`}},
		{name: "a shared source with a dot segment", values: "targets:\n  vault:\n    enabled: true\n    namespaces: [a]\n    tenants: {enabled: true, namespaces: [b], sharedSources: [ohmlab/./x/]}\n",
			want: []string{`targets.vault.tenants.sharedSources: "ohmlab/./x/" has a segment '.'`}},
		{name: "a shared source without its slash", values: "targets:\n  vault:\n    enabled: true\n    namespaces: [a]\n    tenants: {enabled: true, namespaces: [b], sharedSources: [ohmlab/shared]}\n",
			want: []string{"/targets/vault/tenants/sharedSources/0", "does not match pattern"}},
		{name: "a shared source over every tenant's prefix", values: "targets:\n  vault:\n    enabled: true\n    namespaces: [a]\n    tenants: {enabled: true, namespaces: [b], sharedSources: [ohmlab/tenants/]}\n",
			want: []string{`targets.vault.tenants.sharedSources: "ohmlab/tenants/" overlaps the tenants' prefix "ohmlab/tenants/{namespace}/"`}},
		{name: "a shared source inside a tenant's prefix", values: "targets:\n  vault:\n    enabled: true\n    namespaces: [a]\n    tenants: {enabled: true, namespaces: [b], sharedSources: [ohmlab/tenants/b/x/]}\n",
			want: []string{`targets.vault.tenants.sharedSources: "ohmlab/tenants/b/x/" overlaps the tenants' prefix`}},
		{name: "a short token", values: "targets:\n  vault:\n    enabled: true\n    namespaces: [a]\n    tenants: {enabled: true, namespaces: [b], tokenExpirationSeconds: 60}\n",
			want: []string{"/targets/vault/tenants/tokenExpirationSeconds", "minimum"}},
		{name: "an unknown key", values: "targets:\n  vault:\n    tenants: {vaultRole: x}\n",
			want: []string{"/targets/vault/tenants", "vaultRole"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantRenderError(t, tt.values, tt.want) })
	}
}

// TestTenantAdmissionPolicy: the chart's ValidatingAdmissionPolicy alone,
// with no webhook, on a real kube-apiserver: a tenant's object outside its
// prefix, or with deletionPolicy Delete, is refused in internal/tenancy's
// words; the platform namespace is not its business; an object admitted
// before can still lose its finalizer. And the chart's RBAC lets the
// controller mint a token for the tenants' ServiceAccount only.
func TestTenantAdmissionPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	objs := render(t, tenantsOn)
	for _, n := range []string{ns, "vault-operator-system", "team-a", "team-b", "team-c"} {
		g.Expect(cp.EnsureNamespace(ctx, n)).To(Succeed())
	}
	// An object admitted before the policy, out of scope, with the
	// controller's finalizer.
	legacy := tenantSeed("team-a", "legacy", "ohmlab/platforms/production/core/legacy")
	legacy.Finalizers = []string{ohmlabv1alpha1.Finalizer}
	g.Expect(cp.Client.Create(ctx, legacy)).To(Succeed())

	for _, o := range objs {
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "Role", "RoleBinding":
			o := o
			g.Expect(cp.Client.Patch(ctx, &o, client.Apply, client.ForceOwnership, client.FieldOwner("chart-test"))).To(Succeed(), charttest.Key(o))
		}
	}
	// The API server compiles the policy and starts enforcing it a moment
	// after it is created.
	g.Eventually(func() error {
		return cp.Client.Create(ctx, tenantSeed("team-a", "probe", "ohmlab/platforms/production/core/probe"), client.DryRunAll)
	}, time.Minute, 200*time.Millisecond).Should(MatchError(ContainSubstring("denied request")))

	// The policy says what internal/tenancy's check says, in its words.
	cfg := processConfig(t, objs, "vault")["vault"].Tenants
	refused := tenancy.Check(cfg, "team-a", tenancy.Object{Path: "elsewhere/x", DeletionPolicy: "Delete"}).Problems
	g.Expect(refused).To(HaveLen(2))
	deleteScope, pathScope := refused[0].String(), refused[1].String()
	g.Expect(pathScope).To(HavePrefix("spec.path: must be a path under ohmlab/tenants/team-a/"))
	tests := []struct {
		name, namespace, path string
		deletionPolicy        ohmlabv1alpha1.DeletionPolicy
		want                  string // "" admits
	}{
		{name: "in its prefix", namespace: "team-a", path: "ohmlab/tenants/team-a/app"},
		{name: "deeper in its prefix", namespace: "team-a", path: "ohmlab/tenants/team-a/app/db"},
		{name: "the other tenant in its own prefix", namespace: "team-b", path: "ohmlab/tenants/team-b/app"},
		{name: "another tenant's absolute path", namespace: "team-a", path: "ohmlab/tenants/team-b/x", want: pathScope},
		{name: "a platform path", namespace: "team-a", path: "ohmlab/platforms/production/core/keycloak", want: pathScope},
		{name: "the prefix itself", namespace: "team-a", path: "ohmlab/tenants/team-a", want: pathScope},
		{name: "a name that starts with the namespace's", namespace: "team-a", path: "ohmlab/tenants/team-ab/x", want: pathScope},
		{name: "another mount", namespace: "team-a", path: "secret/tenants/team-a/x", want: pathScope},
		{name: "deletionPolicy Delete", namespace: "team-a", path: "ohmlab/tenants/team-a/del", deletionPolicy: ohmlabv1alpha1.DeletionPolicyDelete, want: deleteScope},
		{name: "a platform namespace is not the policy's business", namespace: "vault-operator-system", path: "ohmlab/platforms/production/core/keycloak", deletionPolicy: ohmlabv1alpha1.DeletionPolicyDelete},
		{name: "nor is a namespace that is no tenant", namespace: "team-c", path: "ohmlab/tenants/team-a/x"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := tenantSeed(tt.namespace, fmt.Sprintf("s%d", i), tt.path)
			if tt.deletionPolicy != "" {
				s.Spec.DeletionPolicy = tt.deletionPolicy
			}
			err := cp.Client.Create(ctx, s)
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("ValidatingAdmissionPolicy '%s-tenants' with binding '%s-tenants' denied request: %s", clusterName, clusterName, tt.want))))
		})
	}
	// The path escapes the CRD's own rule refuses never reach the policy;
	// its shape check stands for a CRD without them.
	for _, p := range []string{"ohmlab/tenants/team-a/../team-b/x", "ohmlab/tenants/team-a//x", "ohmlab/tenants/team-a/%2e%2e/x", "ohmlab/tenants/team-a/x ", "ohmlab/tenants/team-\u0430/x"} {
		g.Expect(cp.Client.Create(ctx, tenantSeed("team-a", "escape", p))).To(MatchError(ContainSubstring("spec.path: Invalid value")), p)
	}

	t.Run("an object admitted before can still be changed in metadata and released", func(t *testing.T) {
		g := NewWithT(t)
		got := &ohmlabv1alpha1.VaultSeed{}
		g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(legacy), got)).To(Succeed())
		got.Labels = map[string]string{"team": "a"}
		g.Expect(cp.Client.Update(ctx, got)).To(Succeed())
		got.Spec.Prune = true
		g.Expect(cp.Client.Update(ctx, got)).To(MatchError(ContainSubstring(pathScope)), "a change of its spec is judged")
		g.Expect(cp.Client.Delete(ctx, legacy)).To(Succeed())
		g.Expect(cp.Client.Patch(ctx, legacy, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	})

	t.Run("the controller may mint a token for the tenants' ServiceAccount only", func(t *testing.T) {
		sa := "system:serviceaccount:" + ns + ":" + fullname + "-vault"
		tests := []struct {
			name                          string
			namespace, resource, sub, rsc string
			verb                          string
			allowed                       bool
		}{
			{name: "the tenants' ServiceAccount in a tenant namespace", namespace: "team-a", resource: "serviceaccounts", sub: "token", rsc: "ohmlab-vaultseed", verb: "create", allowed: true},
			{name: "in the other tenant namespace", namespace: "team-b", resource: "serviceaccounts", sub: "token", rsc: "ohmlab-vaultseed", verb: "create", allowed: true},
			{name: "another ServiceAccount of a tenant namespace", namespace: "team-a", resource: "serviceaccounts", sub: "token", rsc: "default", verb: "create"},
			{name: "any ServiceAccount of a tenant namespace", namespace: "team-a", resource: "serviceaccounts", sub: "token", verb: "create"},
			{name: "that name in a platform namespace", namespace: "vault-operator-system", resource: "serviceaccounts", sub: "token", rsc: "ohmlab-vaultseed", verb: "create"},
			{name: "that name in a namespace that is no tenant", namespace: "team-c", resource: "serviceaccounts", sub: "token", rsc: "ohmlab-vaultseed", verb: "create"},
			{name: "the ServiceAccount itself", namespace: "team-a", resource: "serviceaccounts", rsc: "ohmlab-vaultseed", verb: "get"},
			{name: "Secrets of a tenant namespace", namespace: "team-a", resource: "secrets", verb: "get"},
			{name: "Secrets listed", namespace: "team-a", resource: "secrets", verb: "list"},
			{name: "its VaultSeeds", namespace: "team-a", resource: "vaultseeds", verb: "watch", allowed: true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				g := NewWithT(t)
				group := ""
				if tt.resource == "vaultseeds" {
					group = "ohmlab.fr"
				}
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   sa,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: tt.namespace, Verb: tt.verb, Group: group, Resource: tt.resource, Subresource: tt.sub, Name: tt.rsc,
					},
				}}
				g.Expect(cp.Client.Create(ctx, sar)).To(Succeed())
				g.Expect(sar.Status.Allowed).To(Equal(tt.allowed), "%+v", sar.Status)
			})
		}
	})
}

func tenantSeed(namespace, name, path string) *ohmlabv1alpha1.VaultSeed {
	return &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: path, Data: &apiextensionsv1.JSON{Raw: []byte(`{"k":"<random:8>"}`)}},
	}
}
