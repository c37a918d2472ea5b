package vaultkv_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// TestIntegrationReadVersion reads earlier versions against the real Vault:
// a live one, a soft-deleted one, one that does not exist yet.
func TestIntegrationReadVersion(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	c := rootClient(t, r, v)
	const rest = "platforms/core/keycloak/versions"
	const path = "ohmlab/" + rest
	first, second := r.secret(randomSecret()), r.secret(randomSecret())
	for cas, value := range []string{first, second} {
		if _, err := c.Write(ctx, path, map[string]any{"password": value}, cas); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.ReadVersion(ctx, path, 1)
	if err != nil {
		t.Fatal(r.err(err))
	}
	if diff := cmp.Diff(map[string]any{"password": first}, got.Data); diff != "" || got.Version != 1 || !got.Exists || got.Deleted {
		t.Errorf("version 1: %+v (-want +got data):\n%s", got, diff)
	}
	if err := v.Client.KVv2("ohmlab").DeleteVersions(ctx, rest, []int{1}); err != nil {
		t.Fatal(err)
	}
	if got, err = c.ReadVersion(ctx, path, 1); err != nil || !got.Deleted || got.Data != nil {
		t.Errorf("soft-deleted version 1: %+v, %v", got, r.err(err))
	}
	if got, err = c.ReadVersion(ctx, path, 3); err != nil || got.Exists {
		t.Errorf("version 3, not written yet: %+v, %v", got, r.err(err))
	}
	if _, err = c.ReadVersion(ctx, path, 0); err == nil {
		t.Error("version 0 accepted")
	}
	if leaks := r.leaks(); len(leaks) > 0 {
		t.Errorf("values leaked: %v", leaks)
	}
}

// TestIntegrationOverVaultsJSONLimitsIsInvalid: Vault answers a value over
// its JSON limits with a 500; the same write always fails, so it is
// ClassInvalid (BackendError), not an outage.
func TestIntegrationOverVaultsJSONLimitsIsInvalid(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	c := rootClient(t, r, v)
	_, err := c.Write(ctx, "ohmlab/platforms/core/keycloak/huge", map[string]any{"v": strings.Repeat("x", 1536*1024)}, 0)
	if !errors.Is(err, vaultkv.ErrInvalid) || !strings.Contains(err.Error(), "exceeds allowed") {
		t.Fatalf("got %v, want invalid with Vault's reason", err)
	}
}
