package chart_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

// readPolicy parses a Vault policy file (HCL, as Vault parses it) into path -> capabilities.
func readPolicy(t *testing.T, name string) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(charttest.ChartDir(), "vault", name))
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := hcl.Decode(&generic, string(raw)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for k := range generic {
		if k != "path" {
			t.Errorf("%s: unexpected top-level key %q", name, k)
		}
	}
	var policy struct {
		Path map[string]struct {
			Capabilities []string `hcl:"capabilities"`
		} `hcl:"path"`
	}
	if err := hcl.Decode(&policy, string(raw)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out := map[string][]string{}
	for p, rule := range policy.Path {
		caps := append([]string(nil), rule.Capabilities...)
		sort.Strings(caps)
		out[p] = caps
	}
	return out
}

func TestVaultPolicy(t *testing.T) {
	data, metadata := []string{"read", "update"}, []string{"create", "patch", "read"}
	want := map[string][]string{
		"ohmlab/data/platforms/+/+/*":      data,
		"ohmlab/metadata/platforms/+/+/*":  metadata,
		"secret/data/platforms/+/+/*":      data,
		"secret/metadata/platforms/+/+/*":  metadata,
		"sys/policies/password/+/generate": {"read"},
	}
	policy := readPolicy(t, "policy.hcl")
	if diff := cmp.Diff(want, policy); diff != "" {
		t.Errorf("policy.hcl (-want +got):\n%s", diff)
	}
	wantDelete := map[string][]string{
		"ohmlab/metadata/platforms/+/+/*": {"delete"},
		"secret/metadata/platforms/+/+/*": {"delete"},
	}
	if diff := cmp.Diff(wantDelete, readPolicy(t, "policy-allow-delete.hcl")); diff != "" {
		t.Errorf("policy-allow-delete.hcl (-want +got):\n%s", diff)
	}

	// What the policy reaches, with Vault's matching (+ is one segment, a trailing * a prefix).
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"ohmlab/data/platforms/production/core/keycloak", true},
		{"ohmlab/metadata/platforms/production/core/keycloak", true},
		{"secret/data/platforms/staging/apps/grafana/oidc", true},
		{"ohmlab/data/platforms/production/core", false},
		{"ohmlab/data/other/production/core/keycloak", false},
		{"kv/data/platforms/production/core/keycloak", false},
		{"sys/mounts", false},
		{"sys/policies/acl/ohmlab-controller", false},
		{"identity/entity", false},
		{"auth/kubernetes/role/ohmlab-controller", false},
		{"auth/token/create", false},
	} {
		covered := false
		for pattern := range policy {
			if vaultMatch(pattern, tt.path) {
				covered = true
			}
		}
		if covered != tt.want {
			t.Errorf("policy covers %s: %v, want %v", tt.path, covered, tt.want)
		}
	}
}

// vaultMatch matches a policy path the way Vault does for "+" and a trailing "*".
func vaultMatch(pattern, path string) bool {
	prefix := strings.HasSuffix(pattern, "*")
	pattern = strings.TrimSuffix(pattern, "*")
	ps := strings.Split(pattern, "/")
	xs := strings.Split(path, "/")
	if len(xs) < len(ps) || (!prefix && len(xs) != len(ps)) {
		return false
	}
	for i, p := range ps {
		last := i == len(ps)-1
		switch {
		case p == "+":
		case last && prefix:
			if !strings.HasPrefix(strings.Join(xs[i:], "/"), p) {
				return false
			}
		case p != xs[i]:
			return false
		}
	}
	return true
}

func TestVaultRole(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(charttest.ChartDir(), "vault", "role.json"))
	if err != nil {
		t.Fatal(err)
	}
	var role map[string]any
	if err := json.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"bound_service_account_names":      []any{"ohmlab-controller-vault"},
		"bound_service_account_namespaces": []any{"ohmlab-system"},
		"audience":                         "vault",
		"token_policies":                   []any{"ohmlab-controller"},
		"token_no_default_policy":          true,
		"token_ttl":                        "15m",
		"token_max_ttl":                    "15m",
		"token_type":                       "service",
	}
	if diff := cmp.Diff(want, role); diff != "" {
		t.Errorf("role.json (-want +got):\n%s", diff)
	}

	// The role's example ServiceAccount is the one the chart renders for a release named
	// ohmlab-controller in its namespace, and the audience is the chart's default.
	objs := render(t, vaultOn)
	mustFind(t, objs, "ServiceAccount", charttest.Namespace, "ohmlab-controller-vault")
	cfg := processConfig(t, objs, "vault")
	if a := cfg["vault"].Backend.Auth; a.Audience != "vault" || a.Role != "ohmlab-controller" || a.Mount != "kubernetes" {
		t.Errorf("the chart's defaults do not match the role: %+v", a)
	}
}
