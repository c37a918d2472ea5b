package vaultkv_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// digitsPolicy is a Vault password policy: 20 characters of a-f and
// digits, at least 4 of them digits.
const digitsPolicy = `
length = 20
rule "charset" {
  charset = "abcdef0123456789"
}
rule "charset" {
  charset = "0123456789"
  min-chars = 4
}
`

var digitsPolicyValue = regexp.MustCompile(`^[a-f0-9]{20}$`)

// putPasswordPolicy creates Vault's password policy name.
func putPasswordPolicy(t *testing.T, v *harness.Vault, name, hcl string) {
	t.Helper()
	if _, err := v.Client.Logical().Write("sys/policies/password/"+name, map[string]any{"policy": hcl}); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationGeneratePassword asks Vault's own password policy endpoint:
// a value that follows the policy; a missing policy is NotFound, a token
// without read on the endpoint Forbidden, a name that is not one path
// segment Invalid before sending; no value in an error.
func TestIntegrationGeneratePassword(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	putPasswordPolicy(t, v, "app-db", digitsPolicy)
	r := record(t)
	root := rootClient(t, r, v)

	seen := map[string]bool{}
	for range 5 {
		p, err := root.GeneratePassword(ctx, "app-db")
		if err != nil {
			t.Fatal(r.err(err))
		}
		r.secret(p)
		if !digitsPolicyValue.MatchString(p) || len(regexp.MustCompile(`[0-9]`).FindAllString(p, -1)) < 4 {
			t.Fatal("the password does not follow the policy (20 of a-f0-9, 4 digits or more)")
		}
		seen[p] = true
	}
	if len(seen) != 5 {
		t.Errorf("5 passwords, %d different", len(seen))
	}

	// The KV policy of a controller without the endpoint's grant.
	writePolicy(t, v)
	tok, err := v.Client.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{"ohmlab-platforms"}, NoDefaultPolicy: true, TTL: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	none := newClient(t, r, vaultkv.Config{Address: v.Addr, Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: r.secret(tok.Auth.ClientToken)}})
	tests := []struct {
		name   string
		c      *vaultkv.Client
		policy string
		class  error
		reason string
	}{
		{"missing policy", root, "nope", vaultkv.ErrNotFound, "policy does not exist"},
		{"no grant", none, "app-db", vaultkv.ErrForbidden, "permission denied"},
		{"a path, not a name", root, "a/../app-db", vaultkv.ErrInvalid, "not one plain path segment"},
		{"dot-dot", root, "..", vaultkv.ErrInvalid, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.c.GeneratePassword(ctx, tt.policy)
			var e *vaultkv.Error
			if p != "" || !errors.Is(r.err(err), tt.class) || !errors.As(err, &e) || e.Op != vaultkv.OpGenerate || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("GeneratePassword(%q) = %d characters, %v; want %v with %q", tt.policy, len(p), err, tt.class, tt.reason)
			}
		})
	}
}
