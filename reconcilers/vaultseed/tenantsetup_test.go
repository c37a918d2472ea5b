package vaultseed

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	. "github.com/onsi/gomega"

	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// controllerPolicy is the controller's own Vault policy in the tenant
// tests, widened on purpose to the whole mount: a tenant's object that was
// written with it would reach any path.
const controllerPolicy = "ohmlab-controller-wide"

// sharedSource is the prefix of the tenants' shared sources, as in the
// chart's tenant-policy.hcl.
const sharedSource = "ohmlab/shared/public/"

var (
	tenantPoliciesOnce sync.Once
	tenantPoliciesErr  error
)

// tenantEnv is one test's tenant namespaces, set up in Vault as
// docs/users/tenants.md tells a platform team: the chart's tenant-policy.hcl and
// tenant-role.json (bound to the test's namespaces), a ServiceAccount per
// namespace, and Vault's file audit device on.
type tenantEnv struct {
	cfg tenancy.Config
	kv  *TenantKV
	// controller is the controller's own client, with controllerPolicy.
	controller vaultkv.KV
	audit      *auditLog
}

// setUpTenants sets up Vault for the tenant namespaces; ttl is the tenant
// role's token_ttl (0: the chart's).
func setUpTenants(t *testing.T, namespaces []string, ttl time.Duration, change func(*tenancy.Config)) *tenantEnv {
	t.Helper()
	enableKubernetesAuth(t)
	g := NewWithT(t)
	ctx := context.Background()
	tenantPoliciesOnce.Do(func() { tenantPoliciesErr = putTenantPolicies(ctx) })
	g.Expect(tenantPoliciesErr).NotTo(HaveOccurred())

	cfg := tenancy.DefaultConfig()
	cfg.Enabled, cfg.Namespaces, cfg.Role, cfg.SharedSources = true, namespaces, "tenant-"+namespaces[0], []string{sharedSource}
	if change != nil {
		change(&cfg)
	}
	var role map[string]any
	g.Expect(json.Unmarshal([]byte(chartVaultFile(t, "tenant-role.json")), &role)).To(Succeed())
	role["bound_service_account_namespaces"] = namespaces
	if ttl > 0 {
		role["token_ttl"], role["token_max_ttl"] = int(ttl.Seconds()), int(ttl.Seconds())
	}
	if cfg.AllowDelete {
		role["token_policies"] = []string{"ohmlab-tenant", "ohmlab-tenant-allow-delete"}
	}
	_, err := vault.Client.Logical().WriteWithContext(ctx, "auth/"+harness.KubernetesAuthMount+"/role/"+cfg.Role, role)
	g.Expect(err).NotTo(HaveOccurred())
	for _, ns := range namespaces {
		g.Expect(cp.EnsureServiceAccount(ctx, ns, cfg.ServiceAccount)).To(Succeed())
	}
	tok, err := vault.Client.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: []string{controllerPolicy}, NoDefaultPolicy: true})
	g.Expect(err).NotTo(HaveOccurred())
	controller, err := vaultkv.New(vaultkv.Config{Address: vault.Addr, Timeout: 5 * time.Second,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: tok.Auth.ClientToken}})
	g.Expect(err).NotTo(HaveOccurred())
	env := &tenantEnv{cfg: cfg, controller: controller, audit: enableAudit(t, namespaces[0])}
	env.kv = NewTenantKV(cfg, vaultkv.Config{Address: vault.Addr, Timeout: 5 * time.Second}, harness.KubernetesAuthMount, cp.Client)
	return env
}

// putTenantPolicies writes the chart's tenant policies and the widened
// controller policy.
func putTenantPolicies(ctx context.Context) error {
	auths, err := vault.Client.Sys().ListAuthWithContext(ctx)
	if err != nil {
		return err
	}
	accessor := auths[harness.KubernetesAuthMount+"/"].Accessor
	for name, file := range map[string]string{"ohmlab-tenant": "tenant-policy.hcl", "ohmlab-tenant-allow-delete": "tenant-policy-allow-delete.hcl"} {
		raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "charts", "ohmlab-controller", "vault", file))
		if err != nil {
			return err
		}
		if err := vault.Client.Sys().PutPolicyWithContext(ctx, name, strings.ReplaceAll(string(raw), "<accessor>", accessor)); err != nil {
			return err
		}
	}
	return vault.Client.Sys().PutPolicyWithContext(ctx, controllerPolicy,
		`path "ohmlab/*" { capabilities = ["create", "read", "update", "patch", "delete", "list"] }`)
}

func chartVaultFile(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "charts", "ohmlab-controller", "vault", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// startTenants runs a controller on the tenant namespaces of env, the first
// the fixture's, and on the platform namespace platform with env's
// controller client.
func startTenants(t *testing.T, env *tenantEnv, platform string, opts controllerOptions) *fixture {
	t.Helper()
	opts.namespace, opts.more = env.cfg.Namespaces[0], append(slices.Clone(env.cfg.Namespaces[1:]), platform)
	opts.kv, opts.tenants, opts.tenantKV = env.controller, env.cfg, env.kv
	return startController(t, opts)
}

// in is the fixture for another namespace of the same controller.
func (f *fixture) in(namespace string) *fixture {
	g := *f
	g.ns = namespace
	return &g
}

// auditLog is Vault's file audit device, on for one test.
type auditLog struct {
	t    *testing.T
	file string
}

// auditEntry is one request or response of the audit log: who made it
// (the policies of its token, and the namespace of the ServiceAccount
// that logged in, for a Kubernetes-auth token), on which path.
type auditEntry struct {
	Type      string
	Operation string
	Path      string
	Policies  []string
	Namespace string
	Error     string
}

func enableAudit(t *testing.T, name string) *auditLog {
	t.Helper()
	file := filepath.Join(t.TempDir(), "audit.log")
	device := "file-" + name
	if err := vault.Client.Sys().EnableAuditWithOptions(device, &vaultapi.EnableAuditOptions{
		Type: "file", Options: map[string]string{"file_path": file},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vault.Client.Sys().DisableAudit(device) })
	return &auditLog{t: t, file: file}
}

// entries returns the audit log's requests and responses, the root
// token's (the test's own hand work) left out.
func (a *auditLog) entries() []auditEntry {
	a.t.Helper()
	f, err := os.Open(a.file)
	if err != nil {
		a.t.Fatal(err)
	}
	defer f.Close()
	var out []auditEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Type string `json:"type"`
			Auth struct {
				Policies []string          `json:"policies"`
				Metadata map[string]string `json:"metadata"`
			} `json:"auth"`
			Request struct {
				Operation string `json:"operation"`
				Path      string `json:"path"`
			} `json:"request"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			a.t.Fatalf("audit log: %v", err)
		}
		if slices.Contains(e.Auth.Policies, "root") {
			continue
		}
		out = append(out, auditEntry{Type: e.Type, Operation: e.Request.Operation, Path: e.Request.Path, Policies: e.Auth.Policies,
			Namespace: e.Auth.Metadata["service_account_namespace"], Error: e.Error})
	}
	return out
}

// requests are the audit log's requests, logins and the audit device's
// own enabling aside.
func (a *auditLog) requests() []auditEntry {
	var out []auditEntry
	for _, e := range a.entries() {
		if e.Type == "request" && !strings.HasPrefix(e.Path, "auth/") && !strings.HasPrefix(e.Path, "sys/audit/") {
			out = append(out, e)
		}
	}
	return out
}

// logins counts the successful Kubernetes-auth logins per namespace.
func (a *auditLog) logins() map[string]int {
	out := map[string]int{}
	for _, e := range a.entries() {
		if e.Type == "response" && e.Path == "auth/"+harness.KubernetesAuthMount+"/login" && e.Error == "" && e.Namespace != "" {
			out[e.Namespace]++
		}
	}
	return out
}

// underPrefix reports whether a request path of the KV v2 API
// ("<mount>/data/<rest>", "<mount>/metadata/<rest>") lies under the KV
// path prefix ("<mount>/<rest prefix>").
func underPrefix(requestPath, prefix string) bool {
	mount, rest, _ := strings.Cut(prefix, "/")
	for _, api := range []string{"/data/", "/metadata/"} {
		if strings.HasPrefix(requestPath, mount+api+rest) {
			return true
		}
	}
	return false
}
