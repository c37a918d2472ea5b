package vaultkv_test

// Tests against a real `vault server -dev` and, for Kubernetes auth, the
// envtest apiserver, both started by test/harness.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	vaultapi "github.com/hashicorp/vault/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// The control plane is started at the first test that needs it and
// shared by the package's tests.
var (
	cpOnce sync.Once
	cp     *harness.ControlPlane
	cpErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cp != nil {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}
	os.Exit(code)
}

func controlPlane(t *testing.T) *harness.ControlPlane {
	t.Helper()
	cpOnce.Do(func() { cp, cpErr = harness.StartControlPlane(harness.Options{}) })
	if cpErr != nil {
		t.Fatal(cpErr)
	}
	return cp
}

// recorder captures every log line and error text of a test and fails the
// test when one carries a registered secret (a value, a JWT, a token).
type recorder struct {
	mu      sync.Mutex
	lines   []string
	secrets []string
}

func record(t *testing.T) *recorder {
	r := &recorder{}
	t.Cleanup(func() {
		for _, leak := range r.leaks() {
			t.Error(leak)
		}
	})
	return r
}

// leaks describes each recorded line that carries a registered secret,
// with the secret masked.
func (r *recorder) leaks() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, line := range r.lines {
		for _, s := range r.secrets {
			if strings.Contains(line, s) {
				out = append(out, fmt.Sprintf("a secret (%d bytes) appears in %q", len(s), strings.ReplaceAll(line, s, "<SECRET>")))
			}
		}
	}
	return out
}

func (r *recorder) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.lines = append(r.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 10})
}

// err records err's text and returns err.
func (r *recorder) err(err error) error {
	if err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.lines = append(r.lines, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
	}
	return err
}

func (r *recorder) secret(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = append(r.secrets, s)
	return s
}

func (r *recorder) logLines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

func randomSecret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "s3cr3t-" + hex.EncodeToString(b)
}

func newClient(t *testing.T, r *recorder, cfg vaultkv.Config) *vaultkv.Client {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	cfg.Logger = r.logger()
	c, err := vaultkv.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func rootClient(t *testing.T, r *recorder, v *harness.Vault) *vaultkv.Client {
	return newClient(t, r, vaultkv.Config{Address: v.Addr, Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: harness.VaultRootToken}})
}

// platformsPolicy is the controller's policy: KV data and metadata under
// platforms/+/+/* of the ohmlab mount, nothing else.
const platformsPolicy = `
path "ohmlab/data/platforms/+/+/*" {
  capabilities = ["create", "read", "update", "patch", "delete"]
}
path "ohmlab/metadata/platforms/+/+/*" {
  capabilities = ["create", "read", "update", "patch", "delete", "list"]
}
`

func writePolicy(t *testing.T, v *harness.Vault) {
	t.Helper()
	if err := v.Client.Sys().PutPolicy("ohmlab-platforms", platformsPolicy); err != nil {
		t.Fatal(err)
	}
}

func TestIntegrationCheckAndSet(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	if err := v.Client.Sys().Mount("casreq", &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Client.Logical().Write("casreq/config", map[string]any{"cas_required": true}); err != nil {
		t.Fatal(err)
	}
	// The mount really requires cas: a write without it is refused.
	if _, err := v.Client.KVv2("casreq").Put(ctx, "probe", map[string]any{"a": "b"}); err == nil || !strings.Contains(err.Error(), "check-and-set parameter required") {
		t.Fatalf("cas_required is not in force: %v", err)
	}

	r := record(t)
	c := rootClient(t, r, v)
	for _, mount := range []string{"ohmlab", "casreq"} {
		t.Run(mount, func(t *testing.T) {
			path := mount + "/platforms/core/keycloak/admin"
			s1, s2 := r.secret(randomSecret()), r.secret(randomSecret())
			if s, err := c.Read(ctx, path); err != nil || s.Exists {
				t.Fatalf("Read of a new path = %+v, %v; want absent", s, err)
			}
			steps := []struct {
				name  string
				data  map[string]any
				cas   int
				want  int
				class string
			}{
				{"create-only", map[string]any{"password": s1}, 0, 1, "ok"},
				{"create-only again conflicts", map[string]any{"password": s2}, 0, 0, "cas_mismatch"},
				{"update at the version read", map[string]any{"password": s2, "port": 5432, "nested": map[string]any{"k": s1}}, 1, 2, "ok"},
				{"stale version conflicts", map[string]any{"password": s1}, 1, 0, "cas_mismatch"},
			}
			for _, st := range steps {
				got, err := c.Write(ctx, path, st.data, st.cas)
				r.err(err)
				if got.Version != st.want || vaultkv.ClassOf(err) != st.class {
					t.Fatalf("%s: Write = %d, %v; want %d, class %s", st.name, got.Version, err, st.want, st.class)
				}
				if err != nil && !strings.Contains(err.Error(), "check-and-set parameter did not match the current version") {
					t.Fatalf("%s: %v lacks Vault's reason", st.name, err)
				}
			}
			s, err := c.Read(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			want := &vaultkv.Secret{Exists: true, Version: 2,
				Data: map[string]any{"password": s2, "port": json.Number("5432"), "nested": map[string]any{"k": s1}}}
			if diff := cmp.Diff(want, s, ignoreCreated); diff != "" {
				t.Fatalf("Read (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIntegrationWritesOverMaxWriteBytesAreRefused: Vault refuses a write
// whose values come to more than templating.MaxWriteBytes of JSON (its
// listener's default max_request_size), the limit the analysis refuses an
// object above. One over templating.MaxEntryBytes, only a warning, is
// taken by a Vault without integrated storage (this dev server's).
func TestIntegrationWritesOverMaxWriteBytesAreRefused(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	// Bodies of tens of MiB: the test clients' timeout, sized for small
	// requests, can end one on a loaded machine before Vault answers.
	c := newClient(t, record(t), vaultkv.Config{Address: v.Addr, Timeout: time.Minute,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: harness.VaultRootToken}})
	values := func(n int) map[string]any {
		const keys = 256 // Vault also bounds the length of one JSON string
		data := map[string]any{}
		for i := range keys {
			data[fmt.Sprintf("k%d", i)] = strings.Repeat("x", n/keys)
		}
		return data
	}
	path := "ohmlab/platforms/core/big/values"
	_, err := c.Write(ctx, path, values(templating.MaxWriteBytes+1), 0)
	if vaultkv.ClassOf(err) != "invalid" || !strings.Contains(fmt.Sprint(err), "request body too large") {
		t.Fatalf("a write of more than %d bytes: %v; want Vault's 413", templating.MaxWriteBytes, err)
	}
	if s, err := c.Read(ctx, path); err != nil || s.Exists {
		t.Fatalf("Read after the refused write = %v, %v; want absent", s.Exists, err)
	}
	if _, err := c.Write(ctx, path, values(2*templating.MaxEntryBytes), 0); err != nil {
		t.Fatalf("a write of %d bytes: %v", 2*templating.MaxEntryBytes, err)
	}
}

// TestIntegrationPathsAreNotResolved: vault/api cleans request paths, so a
// path with a ".." segment reaches another path (shown with vault/api
// itself); vaultkv refuses such a path before sending anything.
func TestIntegrationPathsAreNotResolved(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	c := rootClient(t, r, v)
	kv := v.Client.KVv2("ohmlab")
	if _, err := kv.Put(ctx, "platforms/x/../p/core/k", map[string]any{"a": "b"}); err != nil {
		t.Fatal(err)
	}
	if s, err := kv.Get(ctx, "platforms/p/core/k"); err != nil || s.Data["a"] != "b" {
		t.Fatalf("vault/api did not write platforms/x/../p/core/k at platforms/p/core/k: %v", err)
	}
	for _, path := range []string{"ohmlab/platforms/x/../p/core/k", "ohmlab/platforms/./p/core/k", "ohmlab/platforms//p/core/k", "ohmlab/platforms/p/core/k/"} {
		_, err := c.Write(ctx, path, map[string]any{"a": "c"}, 1)
		if !errors.Is(r.err(err), vaultkv.ErrInvalid) {
			t.Errorf("Write(%q): %v, want invalid", path, err)
		}
		if err := c.Mark(ctx, path, map[string]string{"ohmlab.fr/owner": "ns/a"}); !errors.Is(err, vaultkv.ErrInvalid) {
			t.Errorf("Mark(%q): %v, want invalid", path, err)
		}
		if err := c.Delete(ctx, path); !errors.Is(err, vaultkv.ErrInvalid) {
			t.Errorf("Delete(%q): %v, want invalid", path, err)
		}
	}
	s, err := c.Read(ctx, "ohmlab/platforms/p/core/k")
	if err != nil || s.Version != 1 || s.CustomMetadata != nil {
		t.Fatalf("the resolved path was touched: %+v, %v", s, err)
	}
}

func TestIntegrationMarkKeepsOthersAndCreatesNoVersion(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	c := rootClient(t, r, v)
	kv := v.Client.KVv2("ohmlab")
	metadata := func(rest string) (map[string]any, int) {
		t.Helper()
		m, err := kv.GetMetadata(ctx, rest)
		if err != nil {
			t.Fatal(err)
		}
		return m.CustomMetadata, m.CurrentVersion
	}

	// Someone else's metadata on a path without a version yet.
	const rest = "platforms/core/keycloak/admin"
	const path = "ohmlab/" + rest
	if err := kv.PutMetadata(ctx, rest, vaultapi.KVMetadataPutInput{CustomMetadata: map[string]any{"team": "platform"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Mark(ctx, path, map[string]string{"ohmlab.fr/owner": "ns/a"}); err != nil {
		t.Fatal(err)
	}
	if s, err := c.Read(ctx, path); err != nil || s.Exists {
		t.Fatalf("Read after a Mark = %+v, %v; want absent (no version)", s, err)
	}
	if v, err := c.Write(ctx, path, map[string]any{"password": r.secret(randomSecret())}, 0); err != nil || v.Version != 1 {
		t.Fatalf("Write = %d, %v", v.Version, err)
	}
	if err := c.Mark(ctx, path, map[string]string{"ohmlab.fr/owner": "ns/b", "ohmlab.fr/rotation": "t1"}); err != nil {
		t.Fatal(err)
	}
	s, err := c.Read(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	wantMD := map[string]string{"team": "platform", "ohmlab.fr/owner": "ns/b", "ohmlab.fr/rotation": "t1"}
	if diff := cmp.Diff(wantMD, s.CustomMetadata); diff != "" || s.Version != 1 {
		t.Fatalf("after two Marks: version %d, custom_metadata (-want +got):\n%s", s.Version, diff)
	}
	if _, current := metadata(rest); current != 1 {
		t.Fatalf("current_version %d after Marks, want 1", current)
	}

	// A path without any metadata: Mark creates it, with no version.
	const fresh = "platforms/core/grafana/admin"
	if err := c.Mark(ctx, "ohmlab/"+fresh, map[string]string{"ohmlab.fr/owner": "ns/c"}); err != nil {
		t.Fatal(err)
	}
	if md, current := metadata(fresh); current != 0 || !cmp.Equal(md, map[string]any{"ohmlab.fr/owner": "ns/c"}) {
		t.Fatalf("fresh path: current_version %d, custom_metadata %v", current, md)
	}

	// MarkNew is for a path ReadNew found without metadata: on one with
	// metadata and no version, it would replace custom_metadata (keeping
	// max_versions).
	const other = "platforms/core/keycloak/other"
	if err := kv.PutMetadata(ctx, other, vaultapi.KVMetadataPutInput{MaxVersions: 3, CustomMetadata: map[string]any{"team": "platform"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkNew(ctx, "ohmlab/"+other, map[string]string{"ohmlab.fr/owner": "ns/c"}); err != nil {
		t.Fatal(err)
	}
	if m, err := kv.GetMetadata(ctx, other); err != nil || m.MaxVersions != 3 || m.CurrentVersion != 0 || !cmp.Equal(m.CustomMetadata, map[string]any{"ohmlab.fr/owner": "ns/c"}) {
		t.Fatalf("after MarkNew: %+v, %v; want max_versions 3, no version, the owner only", m, err)
	}

	// Over Vault's limits: refused before sending, naming the key only.
	long := r.secret(strings.Repeat("x", 513))
	err = r.err(c.Mark(ctx, path, map[string]string{"ohmlab.fr/rotation": long}))
	if !errors.Is(err, vaultkv.ErrInvalid) || !strings.Contains(err.Error(), `"ohmlab.fr/rotation" is 513 bytes`) {
		t.Fatalf("Mark over the value limit: %v", err)
	}
	// What only Vault checks (unprintable characters) comes back as Invalid.
	bell := r.secret("bell\a" + randomSecret())
	if err := r.err(c.Mark(ctx, path, map[string]string{"ohmlab.fr/x": bell})); !errors.Is(err, vaultkv.ErrInvalid) {
		t.Fatalf("Mark of an unprintable value: %v", err)
	}

	if err := c.Delete(ctx, path); err != nil {
		t.Fatal(err)
	}
	if s, err := c.Read(ctx, path); err != nil || s.Exists {
		t.Fatalf("Read after Delete = %+v, %v", s, err)
	}
	if _, err := kv.GetMetadata(ctx, rest); !errors.Is(err, vaultapi.ErrSecretNotFound) {
		t.Fatalf("metadata after Delete: %v, want none", err)
	}
	if err := c.Delete(ctx, path); err != nil {
		t.Fatalf("Delete of an absent path: %v", err)
	}
}

// ReadNew tells the absent paths apart that Read cannot: no metadata at
// all (MarkNew is safe), metadata someone put before any version (kept in
// CustomMetadata, for Mark to merge into), and a path with a version (read
// as Read does). A token refused the metadata reads as Read does.
func TestIntegrationReadNew(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	c := rootClient(t, r, v)
	kv := v.Client.KVv2("ohmlab")
	if err := kv.PutMetadata(ctx, "platforms/core/readnew/premarked", vaultapi.KVMetadataPutInput{MaxVersions: 3, CustomMetadata: map[string]any{"team": "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "platforms/core/readnew/written", map[string]any{"a": "1"}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		path string
		want *vaultkv.Secret
	}{
		{"ohmlab/platforms/core/readnew/fresh", &vaultkv.Secret{NoMetadata: true}},
		{"ohmlab/platforms/core/readnew/premarked", &vaultkv.Secret{CustomMetadata: map[string]string{"team": "x"}}},
		{"ohmlab/platforms/core/readnew/written", &vaultkv.Secret{Exists: true, Version: 1, Data: map[string]any{"a": "1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := c.ReadNew(ctx, tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, ignoreCreated); diff != "" {
				t.Errorf("ReadNew (-want +got):\n%s", diff)
			}
			if s, err := c.Read(ctx, tt.path); err != nil || s.NoMetadata || (!s.Exists && s.CustomMetadata != nil) {
				t.Errorf("Read = %+v, %v: it cannot see metadata without a version", s, err)
			}
		})
	}
	if _, err := c.ReadNew(ctx, "nosuchmount/platforms/core/readnew/fresh"); !errors.Is(err, vaultkv.ErrNotFound) {
		t.Errorf("ReadNew on no mount: %v, want not found", err)
	}

	// A policy without read on metadata (older than the chart's): the
	// metadata stay unknown, never reported absent.
	if err := v.Client.Sys().PutPolicy("readnew-data-only", `path "ohmlab/data/*" { capabilities = ["read"] }`); err != nil {
		t.Fatal(err)
	}
	tok, err := v.Client.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{"readnew-data-only"}, TTL: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	limited := newClient(t, r, vaultkv.Config{Address: v.Addr, Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: tok.Auth.ClientToken}})
	if s, err := limited.ReadNew(ctx, "ohmlab/platforms/core/readnew/fresh"); err != nil || s.NoMetadata || s.Exists {
		t.Errorf("ReadNew without read on metadata = %+v, %v; want absent, metadata unknown", s, err)
	}
}

// TestIntegrationOlderPolicyMetadataReadIsNotForbidden: ReadNew under a
// policy without read on metadata (older than the chart's) counts its
// refused metadata read as metadata_refused and its data read as ok: the
// fallback is harmless, and OhmlabBackendForbidden, which counts code
// forbidden, stays silent. A path the policy does not cover at all is still
// counted forbidden, by its data read.
func TestIntegrationOlderPolicyMetadataReadIsNotForbidden(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	if err := v.Client.Sys().PutPolicy("older", `path "ohmlab/data/platforms/+/+/*" { capabilities = ["create", "read", "update", "patch"] }`); err != nil {
		t.Fatal(err)
	}
	tok, err := v.Client.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{"older"}, TTL: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	const header = `
# HELP ohmlab_backend_requests_total Requests to a backend by operation and outcome class (ok, not_found, cas_mismatch, forbidden, unavailable, invalid; metadata_refused: a new path's metadata read refused by an older policy, then read as before).
# TYPE ohmlab_backend_requests_total counter
`
	tests := []struct {
		name, path string
		wantErr    error
		want       string
	}{
		{
			name: "a new path the policy covers",
			path: "ohmlab/platforms/core/older/fresh",
			want: `ohmlab_backend_requests_total{code="metadata_refused",operation="read",target="vault"} 1
ohmlab_backend_requests_total{code="ok",operation="read",target="vault"} 1
`,
		},
		{
			name:    "a path outside the policy",
			path:    "ohmlab/elsewhere/older/fresh",
			wantErr: vaultkv.ErrForbidden,
			want: `ohmlab_backend_requests_total{code="forbidden",operation="read",target="vault"} 1
ohmlab_backend_requests_total{code="metadata_refused",operation="read",target="vault"} 1
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			c := newClient(t, r, vaultkv.Config{Address: v.Addr, Metrics: vaultkv.NewMetrics(reg),
				Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: tok.Auth.ClientToken}})
			s, err := c.ReadNew(ctx, tt.path)
			switch {
			case tt.wantErr != nil && !errors.Is(r.err(err), tt.wantErr):
				t.Fatalf("ReadNew = %v, want %v", err, tt.wantErr)
			case tt.wantErr == nil && (err != nil || s.Exists || s.NoMetadata):
				t.Fatalf("ReadNew = %+v, %v; want absent, metadata unknown", s, r.err(err))
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(header+tt.want), "ohmlab_backend_requests_total"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestIntegrationDeletedLatestVersion(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	c := rootClient(t, r, v)
	kv := v.Client.KVv2("ohmlab")
	const rest = "platforms/core/keycloak/admin"
	const path = "ohmlab/" + rest
	for cas := range 2 {
		if _, err := c.Write(ctx, path, map[string]any{"password": r.secret(randomSecret())}, cas); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Mark(ctx, path, map[string]string{"ohmlab.fr/owner": "ns/a"}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		delete  func(version int) error
		version int
	}{
		{"soft-deleted", func(int) error { return kv.Delete(ctx, rest) }, 2},
		{"destroyed", func(version int) error { return kv.Destroy(ctx, rest, []int{version}) }, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.delete(tt.version); err != nil {
				t.Fatal(err)
			}
			s, err := c.Read(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			want := &vaultkv.Secret{Exists: true, Version: tt.version, Deleted: true, CustomMetadata: map[string]string{"ohmlab.fr/owner": "ns/a"}}
			if diff := cmp.Diff(want, s, ignoreCreated); diff != "" {
				t.Fatalf("Read (-want +got):\n%s", diff)
			}
			if _, err := c.Write(ctx, path, map[string]any{"password": "x"}, 0); !errors.Is(r.err(err), vaultkv.ErrCASMismatch) {
				t.Fatalf("cas=0 on a deleted latest version: %v", err)
			}
			got, err := c.Write(ctx, path, map[string]any{"password": r.secret(randomSecret())}, tt.version)
			if err != nil || got.Version != tt.version+1 {
				t.Fatalf("cas=%d: %d, %v", tt.version, got.Version, err)
			}
		})
	}
}

func TestIntegrationForbidden(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	writePolicy(t, v)
	tok, err := v.Client.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{"ohmlab-platforms"}, NoDefaultPolicy: true, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	r := record(t)
	token := r.secret(tok.Auth.ClientToken)
	c := newClient(t, r, vaultkv.Config{Address: v.Addr, Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: token}})

	inside := "ohmlab/platforms/core/keycloak/admin"
	if _, err := c.Write(ctx, inside, map[string]any{"password": r.secret(randomSecret())}, 0); err != nil {
		t.Fatalf("write inside the policy: %v", err)
	}
	if err := c.Mark(ctx, inside, map[string]string{"ohmlab.fr/owner": "ns/a"}); err != nil {
		t.Fatalf("mark inside the policy: %v", err)
	}
	if s, err := c.Read(ctx, inside); err != nil || s.Version != 1 {
		t.Fatalf("read inside the policy: %+v, %v", s, err)
	}

	ops := []struct {
		name string
		call func(path string) error
	}{
		{vaultkv.OpRead, func(p string) error { _, err := c.Read(ctx, p); return err }},
		{vaultkv.OpWrite, func(p string) error {
			_, err := c.Write(ctx, p, map[string]any{"password": r.secret(randomSecret())}, 0)
			return err
		}},
		{vaultkv.OpMark, func(p string) error { return c.Mark(ctx, p, map[string]string{"ohmlab.fr/owner": "ns/a"}) }},
		{vaultkv.OpDelete, func(p string) error { return c.Delete(ctx, p) }},
	}
	for _, outside := range []string{"ohmlab/apps/core/keycloak/admin", "secret/platforms/core/keycloak/admin", "ohmlab/platforms/core/keycloak"} {
		for _, op := range ops {
			t.Run(op.name+" "+outside, func(t *testing.T) {
				err := r.err(op.call(outside))
				var e *vaultkv.Error
				if !errors.As(err, &e) || !errors.Is(err, vaultkv.ErrForbidden) || e.Op != op.name || e.Status != 403 || !strings.Contains(err.Error(), "permission denied") {
					t.Fatalf("got %v, want forbidden with Vault's reason", err)
				}
			})
		}
	}
	if c.Logins() != 1 {
		t.Fatalf("policy refusals loaded the token again: Logins() = %d", c.Logins())
	}
	if err := c.Delete(ctx, inside); err != nil {
		t.Fatalf("delete inside the policy: %v", err)
	}

	// A revoked token: loaded again once, retried once, then Forbidden.
	if err := v.Client.Auth().Token().RevokeTree(token); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(ctx, inside)
	if !errors.Is(r.err(err), vaultkv.ErrForbidden) || !strings.Contains(err.Error(), "invalid token") || c.Logins() != 2 {
		t.Fatalf("read with a revoked token: %v, Logins() = %d", err, c.Logins())
	}
}

func TestIntegrationUnavailable(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	const timeout = time.Second
	c := newClient(t, r, vaultkv.Config{Address: v.Addr, Timeout: timeout,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: harness.VaultRootToken}})
	const path = "ohmlab/platforms/core/keycloak/admin"
	if _, err := c.Write(ctx, path, map[string]any{"password": r.secret(randomSecret())}, 0); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name      string
		before    func() error
		after     func() error
		max       time.Duration   // bound on the Unavailable answer
		reasons   []string        // one of them is in the error
		wantAfter *vaultkv.Secret // what a read gives once the server is back
	}{
		{name: "stopped", before: func() error { v.Stop(); return nil }, after: v.Restart,
			max: 500 * time.Millisecond,
			// A new connection is refused; a kept-alive one the stopped
			// server closed ends in EOF.
			reasons: []string{"connection refused", "EOF"}, wantAfter: &vaultkv.Secret{}},
		{name: "hung", before: v.Pause, after: v.Resume, max: timeout + time.Second, reasons: []string{"deadline exceeded"}},
		{name: "sealed", before: v.Seal, after: v.Unseal, max: 500 * time.Millisecond, reasons: []string{"Vault is sealed"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.name != "stopped" {
				if _, err := c.Write(ctx, path, map[string]any{"password": r.secret(randomSecret())}, 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.before(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err := c.Write(ctx, path, map[string]any{"password": r.secret(randomSecret())}, 1)
			took := time.Since(start)
			t.Logf("%s: %v after %v", st.name, r.err(err), took)
			if !errors.Is(err, vaultkv.ErrUnavailable) || !slices.ContainsFunc(st.reasons, func(r string) bool { return strings.Contains(err.Error(), r) }) || took > st.max {
				t.Fatalf("got %v after %v, want unavailable (%s) within %v", err, took, strings.Join(st.reasons, " or "), st.max)
			}
			if err := st.after(); err != nil {
				t.Fatal(err)
			}
			s, err := c.Read(ctx, path)
			if err != nil {
				t.Fatalf("read once the server is back: %v", err)
			}
			if st.wantAfter != nil {
				if diff := cmp.Diff(st.wantAfter, s, ignoreCreated); diff != "" {
					t.Fatalf("read once back (-want +got):\n%s", diff)
				}
			} else if s.Version < 1 {
				t.Fatalf("read once back: %+v, want the data kept", s)
			}
			// A write that timed out may still have been applied: the hung
			// server reads it from its socket once resumed.
			t.Logf("%s: version %d once back", st.name, s.Version)
			// Each step starts from a fresh path.
			if err := c.Delete(ctx, path); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// kubernetesSetup enables Kubernetes auth on v against the shared control
// plane, with the controller's ServiceAccount and the platforms policy,
// and returns a function writing a TokenRequest token of the given
// audience to a file.
func kubernetesSetup(t *testing.T, v *harness.Vault, r *recorder) (tokenFile func(audience string) string) {
	t.Helper()
	ctx := context.Background()
	cp := controlPlane(t)
	if err := v.EnableKubernetesAuth(ctx, cp); err != nil {
		t.Fatal(err)
	}
	const ns, sa = "ohmlab-system", "ohmlab-controller"
	if err := cp.EnsureServiceAccount(ctx, ns, sa); err != nil {
		t.Fatal(err)
	}
	writePolicy(t, v)
	for _, role := range []harness.KubernetesRole{
		{Name: "ohmlab", ServiceAccount: sa, Namespace: ns, Audience: "vault", Policies: []string{"ohmlab-platforms"}, TTL: 15 * time.Minute},
		{Name: "ohmlab-short", ServiceAccount: sa, Namespace: ns, Audience: "vault", Policies: []string{"ohmlab-platforms"}, TTL: 6 * time.Second},
	} {
		if err := v.WriteKubernetesRole(ctx, role); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	return func(audience string) string {
		t.Helper()
		jwt, err := cp.ServiceAccountToken(ctx, ns, sa, audience, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, audience)
		if err := os.WriteFile(f, []byte(r.secret(jwt)), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
}

func kubernetesClient(t *testing.T, r *recorder, v *harness.Vault, role, tokenFile string) *vaultkv.Client {
	return newClient(t, r, vaultkv.Config{Address: v.Addr,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodKubernetes, Role: role, Audience: "vault", TokenFile: tokenFile}})
}

func TestIntegrationKubernetesAuth(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	tokenFile := kubernetesSetup(t, v, r)
	const path = "ohmlab/platforms/core/keycloak/admin"

	t.Run("audience vault", func(t *testing.T) {
		c := kubernetesClient(t, r, v, "ohmlab", tokenFile("vault"))
		if _, err := c.Write(ctx, path, map[string]any{"password": r.secret(randomSecret())}, 0); err != nil {
			t.Fatal(err)
		}
		r.secret(c.TokenForTest())
		for range 5 {
			if s, err := c.Read(ctx, path); err != nil || s.Version != 1 {
				t.Fatalf("Read = %+v, %v", s, err)
			}
		}
		if _, err := c.Read(ctx, "ohmlab/elsewhere/x"); !errors.Is(r.err(err), vaultkv.ErrForbidden) {
			t.Fatalf("read outside the policy: %v", err)
		}
		if c.Logins() != 1 {
			t.Fatalf("Logins() = %d, want 1", c.Logins())
		}
	})

	t.Run("audience other", func(t *testing.T) {
		c := kubernetesClient(t, r, v, "ohmlab", tokenFile("other"))
		_, err := c.Read(ctx, path)
		var e *vaultkv.Error
		if !errors.As(r.err(err), &e) || !errors.Is(err, vaultkv.ErrForbidden) || e.Op != vaultkv.OpLogin || e.Reason == "" {
			t.Fatalf("login with audience other: %v, want a forbidden login with Vault's reason", err)
		}
		t.Logf("audience other: %v", err)
		if c.Logins() != 0 {
			t.Fatalf("Logins() = %d, want 0", c.Logins())
		}
	})

	t.Run("short TTL replaced before expiry once per lifetime", func(t *testing.T) {
		// Tokens live 6 s; the client replaces each at 4 s. Reading without
		// pause for 7 s crosses one replacement and no expiry.
		c := kubernetesClient(t, r, v, "ohmlab-short", tokenFile("vault"))
		start := time.Now()
		var changes []time.Duration // when Logins() went up
		tokens := map[string]bool{}
		for time.Since(start) < 7*time.Second {
			before := c.Logins()
			if _, err := c.Read(ctx, path); err != nil {
				t.Fatalf("read at %v: %v", time.Since(start), r.err(err))
			}
			if c.Logins() != before {
				changes = append(changes, time.Since(start))
			}
			tokens[r.secret(c.TokenForTest())] = true
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("logins at %v", changes)
		if len(changes) != 2 || changes[1] < 3500*time.Millisecond || changes[1] > 5500*time.Millisecond {
			t.Fatalf("logins at %v, want 2: at the start and about 4 s later, before the 6 s expiry", changes)
		}
		if c.Logins() != 2 || len(tokens) != 2 {
			t.Fatalf("Logins() = %d with %d tokens, want 2", c.Logins(), len(tokens))
		}
		for _, line := range r.logLines() {
			if strings.Contains(line, "rejected") {
				t.Fatalf("a token was rejected: %s", line)
			}
		}
	})
}

// TestIntegrationLoginRefusals: each way the Kubernetes auth method refuses
// the controller's login is Forbidden with Vault's reason, and counted as
// ohmlab_backend_requests_total{operation="login",code="forbidden"}
// (product document, "Forbidden": the login role is missing or does not
// accept the controller's ServiceAccount; alert OhmlabBackendForbidden).
func TestIntegrationLoginRefusals(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	tokenFile := kubernetesSetup(t, v, r)
	for _, role := range []harness.KubernetesRole{
		{Name: "other-sa", ServiceAccount: "someone-else", Namespace: "ohmlab-system", Audience: "vault", Policies: []string{"ohmlab-platforms"}},
		{Name: "other-namespace", ServiceAccount: "ohmlab-controller", Namespace: "elsewhere", Audience: "vault", Policies: []string{"ohmlab-platforms"}},
	} {
		if err := v.WriteKubernetesRole(ctx, role); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		role      string
		audience  string // of the ServiceAccount token
		wantCode  int
		wantCause string // Vault's reason
	}{
		{"missing role", "nope", "vault", 400, `invalid role name "nope"`},
		{"role bound to another ServiceAccount", "other-sa", "vault", 403, "service account name not authorized"},
		{"role bound to another namespace", "other-namespace", "vault", 403, "namespace not authorized"},
		{"token with the wrong audience", "ohmlab", "other", 403, "invalid audience (aud) claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			c := newClient(t, r, vaultkv.Config{Address: v.Addr, Metrics: vaultkv.NewMetrics(reg),
				Auth: vaultkv.AuthConfig{Method: vaultkv.MethodKubernetes, Role: tt.role, Audience: "vault", TokenFile: tokenFile(tt.audience)}})
			_, err := c.Read(ctx, "ohmlab/platforms/core/keycloak/admin")
			var e *vaultkv.Error
			if !errors.As(r.err(err), &e) || !errors.Is(err, vaultkv.ErrForbidden) || e.Op != vaultkv.OpLogin ||
				e.Status != tt.wantCode || !strings.Contains(e.Reason, tt.wantCause) {
				t.Fatalf("got %v, want a forbidden login (%d) with Vault's reason %q", err, tt.wantCode, tt.wantCause)
			}
			t.Logf("%s: %v", tt.name, err)
			want := `
# HELP ohmlab_backend_requests_total Requests to a backend by operation and outcome class (ok, not_found, cas_mismatch, forbidden, unavailable, invalid; metadata_refused: a new path's metadata read refused by an older policy, then read as before).
# TYPE ohmlab_backend_requests_total counter
ohmlab_backend_requests_total{code="forbidden",operation="login",target="vault"} 1
ohmlab_backend_requests_total{code="forbidden",operation="read",target="vault"} 1
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ohmlab_backend_requests_total"); err != nil {
				t.Fatal(err)
			}
			if c.Logins() != 0 {
				t.Fatalf("Logins() = %d, want 0", c.Logins())
			}
		})
	}
}

// TestIntegrationNoSecretsInErrorsOrLogs drives every failure path with
// secret values, JWTs and Vault tokens around, then searches every error
// text and log line (at the highest verbosity) for them. The other
// integration tests run the same search on what they record.
func TestIntegrationNoSecretsInErrorsOrLogs(t *testing.T) {
	ctx := context.Background()
	v := harness.VaultForTest(t)
	r := record(t)
	tokenFile := kubernetesSetup(t, v, r)
	c := kubernetesClient(t, r, v, "ohmlab", tokenFile("vault"))
	const path = "ohmlab/platforms/core/keycloak/admin"
	value := func() map[string]any { return map[string]any{"password": r.secret(randomSecret())} }

	if _, err := c.Write(ctx, path, value(), 0); err != nil {
		t.Fatal(err)
	}
	first := r.secret(c.TokenForTest())
	failures := []struct {
		name  string
		call  func() error
		class string
	}{
		{"cas mismatch", func() error { _, err := c.Write(ctx, path, value(), 0); return err }, "cas_mismatch"},
		{"forbidden write", func() error { _, err := c.Write(ctx, "ohmlab/apps/a/b/c", value(), 0); return err }, "forbidden"},
		{"metadata over the limit", func() error {
			return c.Mark(ctx, path, map[string]string{"k": r.secret(strings.Repeat(randomSecret(), 20))})
		}, "invalid"},
		{"metadata Vault refuses", func() error {
			return c.Mark(ctx, path, map[string]string{"k": r.secret("\x00" + randomSecret())})
		}, "invalid"},
		{"revoked token: login again, then ok", func() error {
			if err := v.Client.Auth().Token().RevokeTree(first); err != nil {
				t.Fatal(err)
			}
			_, err := c.Write(ctx, path, value(), 1)
			r.secret(c.TokenForTest())
			return err
		}, "ok"},
		{"sealed", func() error {
			if err := v.Seal(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := v.Unseal(); err != nil {
					t.Fatal(err)
				}
			}()
			_, err := c.Write(ctx, path, value(), 2)
			return err
		}, "unavailable"},
		{"login refused", func() error {
			_, err := kubernetesClient(t, r, v, "ohmlab", tokenFile("other")).Write(ctx, path, value(), 2)
			return err
		}, "forbidden"},
		{"login to an unknown role", func() error {
			_, err := kubernetesClient(t, r, v, "nope", tokenFile("vault")).Write(ctx, path, value(), 2)
			return err
		}, "forbidden"},
	}
	for _, f := range failures {
		if got := vaultkv.ClassOf(r.err(f.call())); got != f.class {
			t.Errorf("%s: class %s, want %s", f.name, got, f.class)
		}
	}

	lines := r.logLines()
	var logins, rejections int
	for _, l := range lines {
		logins += strings.Count(l, "Logged in to Vault")
		rejections += strings.Count(l, "Vault rejected the client token")
	}
	if logins != 2 || rejections != 1 {
		t.Fatalf("%d login and %d rejection log lines, want 2 and 1: the recorder misses lines", logins, rejections)
	}
	r.mu.Lock()
	n := len(r.secrets)
	r.mu.Unlock()
	t.Logf("searched %d lines for %d secrets", len(lines), n)
	if leaks := r.leaks(); len(leaks) > 0 {
		t.Fatalf("%d leaks, first: %s", len(leaks), leaks[0])
	}
}

// ignoreCreated leaves created_time out of a comparison:
// TestIntegrationCreatedTimeNamesOneWrite checks it.
var ignoreCreated = cmpopts.IgnoreFields(vaultkv.Secret{}, "Created")

// TestIntegrationCreatedTimeNamesOneWrite: Vault's answer to a write and a
// read of that version carry the same created_time, and a path deleted with
// its metadata and written again numbers its versions from 1 again, with
// another created_time: the number and the time together name one write.
func TestIntegrationCreatedTimeNamesOneWrite(t *testing.T) {
	v := harness.VaultForTest(t)
	c, err := vaultkv.New(vaultkv.Config{Address: v.Addr, Timeout: 5 * time.Second,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: harness.VaultRootToken}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	path := "secret/platforms/core/created/time"
	first, err := c.Write(ctx, path, map[string]any{"a": "1"}, 0)
	if err != nil || first.Version != 1 || first.Created.IsZero() {
		t.Fatalf("Write = %+v, %v", first, err)
	}
	s, err := c.Read(ctx, path)
	if err != nil || !s.Created.Equal(first.Created) {
		t.Fatalf("Read = %+v, %v; the write answered %s", s, err, first.Created)
	}
	if err := c.Delete(ctx, path); err != nil {
		t.Fatal(err)
	}
	again, err := c.Write(ctx, path, map[string]any{"a": "1"}, 0)
	if err != nil || again.Version != 1 || !again.Created.After(first.Created) {
		t.Fatalf("Write after the metadata delete = %+v, %v; want version 1 created after %s", again, err, first.Created)
	}
	v1, err := c.ReadVersion(ctx, path, 1)
	if err != nil || !v1.Created.Equal(again.Created) {
		t.Fatalf("ReadVersion(1) = %+v, %v; want created %s", v1, err, again.Created)
	}
}
