package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// TestTenantNamespaces runs the built controller installed as the chart
// renders it with targets.vault.tenants on (team-a, team-b), Vault set up
// with the chart's vault/tenant-*.hcl and tenant-role.json, and each tenant
// namespace holding the ServiceAccount docs/users/tenants.md asks of the
// namespace template: each tenant's object goes Ready, written with a token
// of its own namespace's ServiceAccount that the controller minted with
// the chart's RBAC (Vault's audit log: the tenant policy writes it, the
// controller's policy never touches a tenant's path), one login per
// tenant; a path outside the prefix is refused at admission with reason
// OutOfScope.
func TestTenantNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenants := []string{"team-a", "team-b"}
	env, err := Start(ctx, Options{Dir: t.TempDir(), Resync: time.Hour, ControllerBin: controllerBin, Values: map[string]any{
		"targets": map[string]any{"vault": map[string]any{"tenants": map[string]any{
			"enabled": true, "namespaces": []any{"team-a", "team-b"}, "sharedSources": []any{"ohmlab/shared/public/"},
		}}},
	}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(env.Stop)
	defaults := tenancy.DefaultConfig()
	setUpTenantVault(t, env)
	for _, ns := range tenants {
		g.Expect(env.CP.EnsureServiceAccount(ctx, ns, defaults.ServiceAccount)).To(Succeed())
	}
	audit := enableAudit(t, env)
	startController(t, env)

	for _, ns := range tenants {
		for _, name := range []string{"app", "db"} {
			g.Expect(env.CP.Client.Create(ctx, tenantSeed(ns, name, "ohmlab/tenants/"+ns+"/"+name))).To(Succeed())
		}
	}
	for _, ns := range tenants {
		for _, name := range []string{"app", "db"} {
			g.Eventually(func() string {
				obj := &ohmlabv1alpha1.VaultSeed{}
				if err := env.CP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
					return err.Error()
				}
				if c := meta.FindStatusCondition(obj.Status.Conditions, ohmlabv1alpha1.ConditionReady); c != nil {
					return c.Reason + ": " + c.Message
				}
				return "no Ready condition"
			}).WithTimeout(30*time.Second).Should(HavePrefix(ohmlabv1alpha1.ReasonReconciled), "%s/%s", ns, name)
			data, _ := readPath(t, env, "ohmlab/tenants/"+ns+"/"+name)
			g.Expect(data).To(HaveKey("password"))
		}
	}

	err = env.CP.Client.Create(ctx, tenantSeed("team-a", "escape", "ohmlab/tenants/team-b/escape"))
	g.Expect(err).To(MatchError(ContainSubstring("must be a path under ohmlab/tenants/team-a/")))

	for _, w := range audit.writesBy(VaultPolicy) {
		g.Expect(w).NotTo(ContainSubstring("/tenants/"), "the controller's own token wrote a tenant's path")
	}
	tenantWrites := audit.writesBy("ohmlab-tenant")
	for _, ns := range tenants {
		g.Expect(tenantWrites).To(ContainElement(ContainSubstring("ohmlab/data/tenants/"+ns+"/app")), "%s's write by the tenant policy", ns)
	}
	g.Expect(loginsOf(t, audit)).To(Equal(map[string]int{"team-a": 1, "team-b": 1}))
}

// setUpTenantVault writes the chart's tenant policy and role as
// docs/users/tenants.md says, the policy's <accessor> replaced.
func setUpTenantVault(t *testing.T, env *Env) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	auths, err := env.Vault.Client.Sys().ListAuthWithContext(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	accessor := auths[harness.KubernetesAuthMount+"/"].Accessor
	file := func(name string) string {
		raw, err := os.ReadFile(filepath.Join(charttest.ChartDir(), "vault", name))
		g.Expect(err).NotTo(HaveOccurred())
		return strings.ReplaceAll(string(raw), "<accessor>", accessor)
	}
	g.Expect(env.Vault.Client.Sys().PutPolicyWithContext(ctx, "ohmlab-tenant", file("tenant-policy.hcl"))).To(Succeed())
	var role map[string]any
	g.Expect(json.Unmarshal([]byte(file("tenant-role.json")), &role)).To(Succeed())
	_, err = env.Vault.Client.Logical().WriteWithContext(ctx, "auth/"+harness.KubernetesAuthMount+"/role/"+tenancy.DefaultConfig().Role, role)
	g.Expect(err).NotTo(HaveOccurred())
}

// tenantSeed is a VaultSeed of a tenant namespace.
func tenantSeed(namespace, name, path string) *ohmlabv1alpha1.VaultSeed {
	return &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: path, Data: &apiextensionsv1.JSON{Raw: []byte(`{"password":"<random:24>"}`)}},
	}
}

// loginsOf counts the successful Kubernetes-auth logins of the audit log
// per ServiceAccount namespace, the controller's own aside.
func loginsOf(t *testing.T, a *auditLog) map[string]int {
	t.Helper()
	raw, err := os.ReadFile(a.file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(raw), "\n") {
		var e struct {
			Type string `json:"type"`
			Auth struct {
				Metadata map[string]string `json:"metadata"`
			} `json:"auth"`
			Request struct {
				Path string `json:"path"`
			} `json:"request"`
			Error string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Type != "response" || e.Request.Path != "auth/"+harness.KubernetesAuthMount+"/login" || e.Error != "" {
			continue
		}
		if ns := e.Auth.Metadata["service_account_namespace"]; ns != "" && ns != ControllerNamespace {
			out[ns]++
		}
	}
	return out
}
