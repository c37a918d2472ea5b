package chart_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// TestTenantVaultSide runs vault/tenant-policy.hcl and vault/tenant-role.json
// on a real Vault whose Kubernetes auth method trusts a real kube-apiserver:
// a login with the token of a tenant namespace's ServiceAccount can make
// every call of the controller under its own prefix, read the shared
// source, and nothing else, whatever path is asked: Vault, not the
// controller, keeps a tenant in its prefix. Only the bound ServiceAccount of
// a listed namespace, with the audience vault, logs in.
func TestTenantVaultSide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	v := harness.VaultForTest(t)
	if err := v.EnableKubernetesAuth(ctx, cp); err != nil {
		t.Fatal(err)
	}
	auths, err := v.Client.Sys().ListAuthWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	accessor := auths[harness.KubernetesAuthMount+"/"].Accessor
	vaultFile := func(name string) string {
		raw, err := os.ReadFile(filepath.Join(charttest.ChartDir(), "vault", name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(string(raw), "<accessor>", accessor)
	}
	if err := v.Client.Sys().PutPolicyWithContext(ctx, "ohmlab-tenant", vaultFile("tenant-policy.hcl")); err != nil {
		t.Fatal(err)
	}
	if err := v.Client.Sys().PutPolicyWithContext(ctx, "ohmlab-tenant-allow-delete", vaultFile("tenant-policy-allow-delete.hcl")); err != nil {
		t.Fatal(err)
	}
	var role map[string]any
	if err := json.Unmarshal([]byte(vaultFile("tenant-role.json")), &role); err != nil {
		t.Fatal(err)
	}
	// The role's defaults are the chart's.
	defaults := tenancy.DefaultConfig()
	if role["bound_service_account_names"].([]any)[0] != defaults.ServiceAccount || role["audience"] != defaults.Audience {
		t.Errorf("tenant-role.json binds %v with audience %v, the chart's defaults are %s and %s", role["bound_service_account_names"], role["audience"], defaults.ServiceAccount, defaults.Audience)
	}
	if _, err := v.Client.Logical().WriteWithContext(ctx, "auth/kubernetes/role/ohmlab-tenant", role); err != nil {
		t.Fatal(err)
	}
	role["token_policies"] = []string{"ohmlab-tenant", "ohmlab-tenant-allow-delete"}
	if _, err := v.Client.Logical().WriteWithContext(ctx, "auth/kubernetes/role/ohmlab-tenant-delete", role); err != nil {
		t.Fatal(err)
	}
	for _, sa := range [][2]string{{"team-a", "ohmlab-vaultseed"}, {"team-b", "ohmlab-vaultseed"}, {"team-c", "ohmlab-vaultseed"}, {"team-a", "app"}, {"ohmlab-system", "ohmlab-controller-vault"}} {
		if err := cp.EnsureServiceAccount(ctx, sa[0], sa[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Client.Logical().WriteWithContext(ctx, "ohmlab/data/shared/public/ca", map[string]any{"data": map[string]any{"pem": "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Client.Logical().WriteWithContext(ctx, "sys/policies/password/"+testPasswordPolicy, map[string]any{"policy": `length = 20
rule "charset" { charset = "abcdefghijklmnopqrstuvwxyz0123456789" }`}); err != nil {
		t.Fatal(err)
	}
	login := func(namespace, sa, audience, role string) (vaultkv.KV, error) {
		t.Helper()
		jwt, err := cp.ServiceAccountToken(ctx, namespace, sa, audience, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		secret, err := v.Client.Logical().WriteWithContext(ctx, "auth/kubernetes/login", map[string]any{"role": role, "jwt": jwt})
		if err != nil {
			return nil, err
		}
		kv, err := vaultkv.New(vaultkv.Config{Address: v.Addr, Timeout: 5 * time.Second, Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: secret.Auth.ClientToken}})
		if err != nil {
			t.Fatal(err)
		}
		return kv, nil
	}

	teamA, err := login("team-a", "ohmlab-vaultseed", "vault", "ohmlab-tenant")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("every call of the controller under its own prefix", func(t *testing.T) {
		for _, c := range append(slices.Clone(vaultCalls), generateCall) {
			if err := c.do(ctx, teamA, "ohmlab/tenants/team-a/app"); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if err := deleteCall.do(ctx, teamA, "ohmlab/tenants/team-a/app"); !errors.Is(err, vaultkv.ErrForbidden) {
			t.Errorf("delete without tenant-policy-allow-delete.hcl: %v, want 403", err)
		}
	})
	t.Run("no call anywhere else", func(t *testing.T) {
		for _, p := range []string{
			"ohmlab/tenants/team-b/app",
			"ohmlab/tenants/team-ab/app",
			"ohmlab/tenants/team-a",
			"ohmlab/platforms/production/core/keycloak",
			"secret/tenants/team-a/app",
			"ohmlab/shared/private/ca",
		} {
			for _, c := range append(vaultCalls[:4:4], deleteCall) {
				if err := c.do(ctx, teamA, p); !errors.Is(err, vaultkv.ErrForbidden) {
					t.Errorf("%s on %s: %v, want 403", c.name, p, err)
				}
			}
		}
	})
	t.Run("the shared source is read-only", func(t *testing.T) {
		if s, err := teamA.Read(ctx, "ohmlab/shared/public/ca"); err != nil || !s.Exists {
			t.Errorf("reading the shared source: %+v, %v", s, err)
		}
		if err := teamA.Mark(ctx, "ohmlab/shared/public/ca", map[string]string{"ohmlab.fr/owner": "team-a/x"}); !errors.Is(err, vaultkv.ErrForbidden) {
			t.Errorf("marking the shared source: %v, want 403", err)
		}
		if _, err := teamA.Write(ctx, "ohmlab/shared/public/ca", map[string]any{"pem": "y"}, 1); !errors.Is(err, vaultkv.ErrForbidden) {
			t.Errorf("writing the shared source: %v, want 403", err)
		}
	})
	t.Run("the other tenant's login has its own prefix", func(t *testing.T) {
		teamB, err := login("team-b", "ohmlab-vaultseed", "vault", "ohmlab-tenant")
		if err != nil {
			t.Fatal(err)
		}
		if err := vaultCalls[2].do(ctx, teamB, "ohmlab/tenants/team-b/app"); err != nil {
			t.Errorf("team-b in its prefix: %v", err)
		}
		if _, err := teamB.Read(ctx, "ohmlab/tenants/team-a/app"); !errors.Is(err, vaultkv.ErrForbidden) {
			t.Errorf("team-b reading team-a's path: %v, want 403", err)
		}
	})
	t.Run("with the allow-delete policy, a tenant deletes in its prefix only", func(t *testing.T) {
		kv, err := login("team-a", "ohmlab-vaultseed", "vault", "ohmlab-tenant-delete")
		if err != nil {
			t.Fatal(err)
		}
		if err := deleteCall.do(ctx, kv, "ohmlab/tenants/team-a/app"); err != nil {
			t.Errorf("deleting its path: %v", err)
		}
		if err := deleteCall.do(ctx, kv, "ohmlab/tenants/team-b/app"); !errors.Is(err, vaultkv.ErrForbidden) {
			t.Errorf("deleting team-b's path: %v, want 403", err)
		}
	})
	t.Run("only the bound ServiceAccount of a listed namespace logs in, with the audience vault", func(t *testing.T) {
		for _, l := range []struct{ namespace, sa, audience string }{
			{"team-c", "ohmlab-vaultseed", "vault"},               // a namespace the role does not list
			{"team-a", "app", "vault"},                            // another ServiceAccount of a tenant
			{"ohmlab-system", "ohmlab-controller-vault", "vault"}, // the controller itself
			{"team-a", "ohmlab-vaultseed", ""},                    // the API server's audience
		} {
			if _, err := login(l.namespace, l.sa, l.audience, "ohmlab-tenant"); err == nil {
				t.Errorf("%s/%s (audience %q) logged in to the tenant role", l.namespace, l.sa, l.audience)
			} else if re := (*vaultapi.ResponseError)(nil); !errors.As(err, &re) || re.StatusCode != 403 {
				t.Errorf("%s/%s (audience %q): %v, want 403", l.namespace, l.sa, l.audience, err)
			}
		}
	})
}
