package chart_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// vaultCall is one call the controller makes to Vault (vaultkv, in the
// reconciler's order: read, owner marker first, then data with
// check-and-set), on a fresh path.
type vaultCall struct {
	name string
	do   func(ctx context.Context, kv vaultkv.KV, path string) error
}

var vaultCalls = []vaultCall{
	{"read an absent path", func(ctx context.Context, kv vaultkv.KV, path string) error {
		_, err := kv.Read(ctx, path)
		return err
	}},
	{"read a new path's metadata", func(ctx context.Context, kv vaultkv.KV, path string) error {
		s, err := kv.ReadNew(ctx, path)
		if err == nil && !s.NoMetadata {
			// Refused, ReadNew reads the data instead: the path's metadata
			// stays unknown and a new path costs one request more.
			return fmt.Errorf("%w: the path's metadata are unknown", vaultkv.ErrForbidden)
		}
		return err
	}},
	{"mark a new path (owner marker)", func(ctx context.Context, kv vaultkv.KV, path string) error {
		return kv.Mark(ctx, path, map[string]string{"ohmlab.fr/owner": "vault-operator-system/keycloak"})
	}},
	{"write a new path (cas=0)", func(ctx context.Context, kv vaultkv.KV, path string) error {
		_, err := kv.Write(ctx, path, map[string]any{"admin": map[string]any{"password": "x"}}, 0)
		return err
	}},
	{"read a path with data", func(ctx context.Context, kv vaultkv.KV, path string) error {
		s, err := kv.Read(ctx, path)
		if err == nil && !s.Exists {
			return errors.New("the path reads as absent")
		}
		return err
	}},
	{"mark a marked path (rotation token)", func(ctx context.Context, kv vaultkv.KV, path string) error {
		return kv.Mark(ctx, path, map[string]string{"ohmlab.fr/rotation": "t1"})
	}},
	{"write an existing path (cas=1)", func(ctx context.Context, kv vaultkv.KV, path string) error {
		_, err := kv.Write(ctx, path, map[string]any{"admin": map[string]any{"password": "y"}}, 1)
		return err
	}},
}

// generateCall asks the password policy testPasswordPolicy, as a
// <vault-password:> key does (the reconciler's generation, between the read
// and the writes). Not among vaultCalls, which run on KV paths.
var generateCall = vaultCall{"generate a password (<vault-password:>)", func(ctx context.Context, kv vaultkv.KV, _ string) error {
	_, err := kv.GeneratePassword(ctx, testPasswordPolicy)
	return err
}}

const testPasswordPolicy = "app-db"

var deleteCall = vaultCall{"delete a path (deletionPolicy Delete)", func(ctx context.Context, kv vaultkv.KV, path string) error {
	return kv.Delete(ctx, path)
}}

// TestVaultPolicyIsMinimal proves each capability of vault/policy.hcl
// against a real Vault: the controller's calls (KV, and a password from a
// Vault password policy) all succeed with the policy;
// removing any one capability makes a named call fail with 403; the delete
// grant lives only in policy-allow-delete.hcl.
func TestVaultPolicyIsMinimal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	v := harness.VaultForTest(t)
	policy := readPolicy(t, "policy.hcl")
	allowDelete := readPolicy(t, "policy-allow-delete.hcl")
	if _, err := v.Client.Logical().WriteWithContext(ctx, "sys/policies/password/"+testPasswordPolicy, map[string]any{"policy": `length = 20
rule "charset" { charset = "abcdefghijklmnopqrstuvwxyz0123456789" }`}); err != nil {
		t.Fatal(err)
	}
	calls := append(slices.Clone(vaultCalls), generateCall)

	n := 0
	run := func(t *testing.T, policies map[string]map[string][]string, calls []vaultCall, mount string) (string, error) {
		t.Helper()
		n++
		var names []string
		for name, p := range policies {
			name = fmt.Sprintf("%s-%d", name, n)
			if err := v.Client.Sys().PutPolicyWithContext(ctx, name, policyHCL(p)); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		tok, err := v.Client.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: names, NoDefaultPolicy: true, TTL: "10m"})
		if err != nil {
			t.Fatal(err)
		}
		kv, err := vaultkv.New(vaultkv.Config{Address: v.Addr, Timeout: 5 * time.Second, Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: tok.Auth.ClientToken}})
		if err != nil {
			t.Fatal(err)
		}
		path := fmt.Sprintf("%s/platforms/production/core/app-%d", mount, n)
		for _, c := range calls {
			if err := c.do(ctx, kv, path); err != nil {
				return c.name, err
			}
		}
		return "", nil
	}

	for _, mount := range []string{"ohmlab", "secret"} {
		if call, err := run(t, map[string]map[string][]string{"full": policy}, calls, mount); err != nil {
			t.Fatalf("with policy.hcl, %q on mount %s fails: %v", call, mount, err)
		}
		if call, err := run(t, map[string]map[string][]string{"full": policy}, append(slices.Clone(calls), deleteCall), mount); call != deleteCall.name || !errors.Is(err, vaultkv.ErrForbidden) {
			t.Errorf("without policy-allow-delete.hcl, the first failing call on mount %s is %q (%v), want %q refused", mount, call, err, deleteCall.name)
		}
		both := map[string]map[string][]string{"full": policy, "delete": allowDelete}
		if call, err := run(t, both, append(slices.Clone(calls), deleteCall), mount); err != nil {
			t.Errorf("with both policies, %q on mount %s fails: %v", call, mount, err)
		}
	}

	// Which call needs each capability, on either mount.
	want := map[string]string{
		"data read":                             "read an absent path",
		"data update":                           "write a new path (cas=0)",
		"metadata create":                       "mark a new path (owner marker)",
		"metadata read":                         "read a new path's metadata",
		"metadata patch":                        "mark a new path (owner marker)",
		"sys/policies/password/+/generate read": generateCall.name,
	}
	got := map[string]string{}
	for _, pattern := range slices.Sorted(maps.Keys(policy)) {
		// A KV v2 pattern is <mount>/<data|metadata>/...; the calls run on its mount.
		mount, kind, _ := strings.Cut(pattern, "/")
		kind, _, _ = strings.Cut(kind, "/")
		if mount != "ohmlab" && mount != "secret" {
			mount, kind = "ohmlab", pattern
		}
		for _, capability := range policy[pattern] {
			reduced := maps.Clone(policy)
			reduced[pattern] = slices.DeleteFunc(slices.Clone(policy[pattern]), func(c string) bool { return c == capability })
			call, err := run(t, map[string]map[string][]string{"reduced": reduced}, calls, mount)
			key := kind + " " + capability
			switch {
			case call == "":
				t.Errorf("%s %q: no call of the controller needs it: remove it from policy.hcl", pattern, capability)
			case !errors.Is(err, vaultkv.ErrForbidden):
				t.Errorf("%s %q removed: %q fails with %v, want 403", pattern, capability, call, err)
			case got[key] != "" && got[key] != call:
				t.Errorf("%s %q removed: %q fails, but %q on the other mount", pattern, capability, call, got[key])
			default:
				got[key] = call
				t.Logf("without %s %q: %q is refused", pattern, capability, call)
			}
		}
	}
	for key, call := range want {
		if got[key] != call {
			t.Errorf("capability %s: the call that needs it is %q, want %q", key, got[key], call)
		}
	}
}

// policyHCL writes a policy as Vault's HCL.
func policyHCL(p map[string][]string) string {
	var b strings.Builder
	for _, path := range slices.Sorted(maps.Keys(p)) {
		if len(p[path]) == 0 {
			continue
		}
		quoted := make([]string, len(p[path]))
		for i, c := range p[path] {
			quoted[i] = fmt.Sprintf("%q", c)
		}
		fmt.Fprintf(&b, "path %q {\n  capabilities = [%s]\n}\n", path, strings.Join(quoted, ", "))
	}
	return b.String()
}
