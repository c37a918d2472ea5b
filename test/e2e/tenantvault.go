package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// SetUpTenants does what docs/users/tenants.md asks of a platform team for
// the tenant namespaces, with the chart's defaults of
// targets.vault.tenants: Vault's tenant policy (the chart's
// vault/tenant-policy.hcl) and tenant role (vault/tenant-role.json, bound
// to namespaces), and the ServiceAccount of each namespace.
func (e *Env) SetUpTenants(ctx context.Context, namespaces []string) error {
	auths, err := e.Vault.Client.Sys().ListAuthWithContext(ctx)
	if err != nil {
		return err
	}
	accessor := auths[harness.KubernetesAuthMount+"/"].Accessor
	file := func(name string) (string, error) {
		raw, err := os.ReadFile(filepath.Join(charttest.ChartDir(), "vault", name))
		return strings.ReplaceAll(string(raw), "<accessor>", accessor), err
	}
	policy, err := file("tenant-policy.hcl")
	if err != nil {
		return err
	}
	if err := e.Vault.Client.Sys().PutPolicyWithContext(ctx, "ohmlab-tenant", policy); err != nil {
		return err
	}
	raw, err := file("tenant-role.json")
	if err != nil {
		return err
	}
	var role map[string]any
	if err := json.Unmarshal([]byte(raw), &role); err != nil {
		return err
	}
	role["bound_service_account_namespaces"] = namespaces
	defaults := tenancy.DefaultConfig()
	if _, err := e.Vault.Client.Logical().WriteWithContext(ctx, "auth/"+harness.KubernetesAuthMount+"/role/"+defaults.Role, role); err != nil {
		return err
	}
	for _, ns := range namespaces {
		if err := e.CP.EnsureServiceAccount(ctx, ns, defaults.ServiceAccount); err != nil {
			return err
		}
	}
	return nil
}
