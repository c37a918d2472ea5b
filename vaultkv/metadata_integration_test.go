package vaultkv_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
	"github.com/ohmlab/ohmlab-controller/vaultkv/fake"
)

// metadataCases are custom_metadata at and past each of Vault's rules, each
// sent as a creation (MarkNew: POST on a path without metadata) and as a
// merge (Mark: PATCH onto the path's metadata, existing when given).
var metadataCases = []struct {
	name     string
	existing map[string]string
	md       map[string]string
	refused  bool
}{
	{name: "printable ASCII, the ASCII space included", md: map[string]string{"ohmlab.fr/rotation-token": "2026-11-29 rotate all"}},
	{name: "a value of 512 bytes", md: map[string]string{"v": strings.Repeat("x", 512)}},
	{name: "a value of 513 bytes", md: map[string]string{"v": strings.Repeat("x", 513)}, refused: true},
	{name: "256 two-byte characters: 512 bytes", md: map[string]string{"v": strings.Repeat("é", 256)}},
	{name: "171 three-byte characters: 513 bytes", md: map[string]string{"v": strings.Repeat("€", 171)}, refused: true},
	{name: "letters, marks, symbols of other scripts", md: map[string]string{"v": "rotation-été-🔑-ﾛ-\u0301"}},
	{name: "an empty value", md: map[string]string{"v": ""}, refused: true},
	{name: "a tab in a value", md: map[string]string{"v": "a\tb"}, refused: true},
	{name: "a newline in a value", md: map[string]string{"v": "a\n"}, refused: true},
	{name: "a carriage return in a value", md: map[string]string{"v": "a\rb"}, refused: true},
	{name: "DEL in a value", md: map[string]string{"v": "a\x7f"}, refused: true},
	{name: "a no-break space in a value", md: map[string]string{"v": "a\u00a0b"}, refused: true},
	{name: "a zero-width space in a value", md: map[string]string{"v": "a\u200bb"}, refused: true},
	{name: "a line separator in a value", md: map[string]string{"v": "a\u2028b"}, refused: true},
	{name: "a private-use character in a value", md: map[string]string{"v": "a\ue000"}, refused: true},
	{name: "a key of 128 bytes", md: map[string]string{strings.Repeat("k", 128): "v"}},
	{name: "a key of 129 bytes", md: map[string]string{strings.Repeat("k", 129): "v"}, refused: true},
	{name: "an empty key", md: map[string]string{"": "v"}, refused: true},
	{name: "a tab in a key", md: map[string]string{"a\tb": "v"}, refused: true},
	{name: "64 keys", md: keys(0, 64)},
	{name: "65 keys", md: keys(0, 65), refused: true},
	// Vault judges the request's custom_metadata, not the merged result.
	{name: "a merge past 64 keys in all", existing: keys(0, 40), md: keys(40, 40)},
}

// keys returns n keys k<from>... with a short value each.
func keys(from, n int) map[string]string {
	md := map[string]string{}
	for i := from; i < from+n; i++ {
		md[fmt.Sprintf("k%d", i)] = "v"
	}
	return md
}

// TestIntegrationFakeRefusesWhatVaultRefuses sends each of metadataCases
// to the real Vault as it is (vault/api, bypassing the client's checks),
// through *vaultkv.Client, and to the fake: all three accept or refuse it
// alike, a refusal in the class the client gives Vault's own answer
// (ClassInvalid, Vault's 400), and what is accepted reads back the same.
func TestIntegrationFakeRefusesWhatVaultRefuses(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	c := rootClient(t, r, v)
	f := fake.New()
	const mount = harness.VaultMount

	for i, tc := range metadataCases {
		for _, op := range []string{"create", "merge"} {
			t.Run(tc.name+"/"+op, func(t *testing.T) {
				existing := tc.existing
				if op == "merge" && existing == nil {
					existing = map[string]string{"team": "platform"}
				}
				if op == "create" && tc.existing != nil {
					t.Skip("a creation replaces custom_metadata: the case is a merge's")
				}
				// One path per case and target.
				rest := func(target string) string { return fmt.Sprintf("platforms/meta/%d-%s/%s", i, op, target) }
				setup := func(target string, mark func(string, map[string]string) error) {
					if existing == nil {
						return
					}
					if err := mark(mount+"/"+rest(target), existing); err != nil {
						t.Fatalf("%s: setting the existing metadata: %v", target, err)
					}
				}
				setup("vault", func(p string, md map[string]string) error { return c.MarkNew(ctx, p, md) })
				setup("client", func(p string, md map[string]string) error { return c.MarkNew(ctx, p, md) })
				setup("fake", func(p string, md map[string]string) error { return f.MarkNew(ctx, p, md) })

				// Vault's own verdict, on the request the client would send.
				body := map[string]any{"custom_metadata": anyMap(tc.md)}
				var err error
				if op == "create" {
					_, err = v.Client.Logical().WriteWithContext(ctx, mount+"/metadata/"+rest("vault"), body)
				} else {
					_, err = v.Client.Logical().JSONMergePatch(ctx, mount+"/metadata/"+rest("vault"), body)
				}
				vaultClass := "accepted"
				if err != nil {
					vaultClass = string(vaultkv.Classify(vaultkv.OpMark, mount+"/"+rest("vault"), err).Class)
				}
				var re *vaultapi.ResponseError
				if errors.As(err, &re) && re.StatusCode != http.StatusBadRequest {
					t.Errorf("Vault answered %d, want 400: %v", re.StatusCode, err)
				}

				mark := func(kv vaultkv.KV, p string) error {
					if op == "create" {
						return kv.MarkNew(ctx, p, tc.md)
					}
					return kv.Mark(ctx, p, tc.md)
				}
				clientErr := r.err(mark(c, mount+"/"+rest("client")))
				fakeErr := mark(f, mount+"/"+rest("fake"))

				want := "accepted"
				if tc.refused {
					want = string(vaultkv.ClassInvalid)
				}
				got := map[string]string{"vault": vaultClass, "client": classOf(clientErr), "fake": classOf(fakeErr)}
				if diff := cmp.Diff(map[string]string{"vault": want, "client": want, "fake": want}, got); diff != "" {
					t.Fatalf("verdicts (-want +got):\n%s\nVault: %v\nclient: %v\nfake: %v", diff, err, clientErr, fakeErr)
				}
				if tc.refused {
					return
				}
				wantMD := maps.Clone(existing)
				if wantMD == nil || op == "create" {
					wantMD = map[string]string{}
				}
				maps.Copy(wantMD, tc.md)
				for _, target := range []string{"vault", "client"} {
					m, err := v.Client.KVv2(mount).GetMetadata(ctx, rest(target))
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(anyMap(wantMD), m.CustomMetadata); diff != "" {
						t.Errorf("%s: custom_metadata (-want +got):\n%s", target, diff)
					}
				}
				s, err := f.ReadNew(ctx, mount+"/"+rest("fake"))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(wantMD, s.CustomMetadata); diff != "" {
					t.Errorf("fake: custom_metadata (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// classOf is "accepted" when err is nil, else its class.
func classOf(err error) string {
	if err == nil {
		return "accepted"
	}
	return vaultkv.ClassOf(err)
}

func anyMap(md map[string]string) map[string]any {
	out := make(map[string]any, len(md))
	for k, v := range md {
		out[k] = v
	}
	return out
}
