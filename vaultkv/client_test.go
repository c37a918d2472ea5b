package vaultkv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeVault answers Kubernetes-auth logins itself and KV requests with kv.
type fakeVault struct {
	ttl int // lease_duration of issued tokens, seconds
	kv  http.HandlerFunc

	mu       sync.Mutex
	jwts     []string        // JWTs received by logins, in order
	rejected map[string]bool // tokens answered 403 "invalid token"
	requests []string        // "METHOD /v1/path" of KV requests
}

func (f *fakeVault) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if r.URL.Path == "/v1/auth/kubernetes/login" {
		var body struct{ Role, JWT string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		if r.Header.Get("X-Vault-Token") != "" {
			f.mu.Unlock()
			http.Error(w, `{"errors":["bad login request"]}`, http.StatusBadRequest)
			return
		}
		if body.Role != "ohmlab" { // what Kubernetes auth answers
			f.mu.Unlock()
			msg, _ := json.Marshal(map[string][]string{"errors": {fmt.Sprintf("invalid role name %q", body.Role)}})
			answer(http.StatusBadRequest, string(msg))(w, r)
			return
		}
		f.jwts = append(f.jwts, body.JWT)
		tok := fmt.Sprintf("hvs.token-%d", len(f.jwts))
		f.mu.Unlock()
		fmt.Fprintf(w, `{"auth":{"client_token":%q,"lease_duration":%d,"renewable":true}}`, tok, f.ttl)
		return
	}
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	rejected := f.rejected[r.Header.Get("X-Vault-Token")]
	f.mu.Unlock()
	if rejected {
		http.Error(w, `{"errors":["permission denied","invalid token"]}`, http.StatusForbidden)
		return
	}
	f.kv(w, r)
}

func (f *fakeVault) reject(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rejected == nil {
		f.rejected = map[string]bool{}
	}
	f.rejected[token] = true
}

func (f *fakeVault) seen() (jwts, requests []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.jwts...), append([]string(nil), f.requests...)
}

// answer returns a KV handler that always answers status and body.
func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func tokenClient(t *testing.T, h http.Handler, mutate func(*Config)) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := Config{Address: srv.URL, Timeout: 2 * time.Second, Auth: AuthConfig{Method: MethodToken, Token: "static"}}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestReadShapes(t *testing.T) {
	const md = `"created_time":"2026-01-01T00:00:00.123456789Z","version":3`
	created := time.Date(2026, 1, 1, 0, 0, 0, 123456789, time.UTC)
	tests := []struct {
		name   string
		status int
		body   string
		want   *Secret
		class  string
	}{
		{name: "present", status: 200,
			body: `{"data":{"data":{"a":"x","n":12345678901234567890,"t":{"u":["v"]}},"metadata":{` + md + `,"deletion_time":"","destroyed":false,"custom_metadata":{"owner":"o"}}}}`,
			want: &Secret{Exists: true, Version: 3, Created: created, Data: map[string]any{"a": "x", "n": json.Number("12345678901234567890"), "t": map[string]any{"u": []any{"v"}}},
				CustomMetadata: map[string]string{"owner": "o"}}},
		{name: "present, future deletion_time, no custom_metadata", status: 200,
			body: `{"data":{"data":{},"metadata":{` + md + `,"deletion_time":"2999-01-01T00:00:00Z","custom_metadata":null}}}`,
			want: &Secret{Exists: true, Version: 3, Created: created, Data: map[string]any{}}},
		{name: "empty body: not Vault", status: 404, body: ``, class: "not_found"},
		{name: "absent, empty errors", status: 404, body: `{"errors":[]}`, want: &Secret{}},
		{name: "soft-deleted", status: 404,
			body: `{"data":{"data":null,"metadata":{` + md + `,"deletion_time":"2026-01-02T00:00:00Z","destroyed":false,"custom_metadata":{"k":"v"}}}}`,
			want: &Secret{Exists: true, Version: 3, Created: created, Deleted: true, CustomMetadata: map[string]string{"k": "v"}}},
		{name: "destroyed", status: 404,
			body: `{"data":{"data":null,"metadata":{` + md + `,"deletion_time":"","destroyed":true}}}`,
			want: &Secret{Exists: true, Version: 3, Created: created, Deleted: true}},
		{name: "no such mount", status: 404, body: `{"errors":["no handler for route \"nope/data/x\". route entry not found."]}`, class: "not_found"},
		{name: "policy", status: 403, body: `{"errors":["1 error occurred:\n\t* permission denied\n\n"]}`, class: "forbidden"},
		{name: "sealed", status: 503, body: `{"errors":["Vault is sealed"]}`, class: "unavailable"},
		{name: "garbage", status: 200, body: `<html>`, class: "unavailable"},
		{name: "a created_time that is not one", status: 200, body: `{"data":{"data":{},"metadata":{"created_time":"yesterday","version":3}}}`, class: "unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tokenClient(t, &fakeVault{kv: answer(tt.status, tt.body)}, nil)
			got, err := c.Read(context.Background(), "ohmlab/platforms/a/b/c")
			if tt.class != "" {
				if got != nil || ClassOf(err) != tt.class {
					t.Fatalf("Read = %+v, %v; want class %s", got, err, tt.class)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteSendsCASAndReturnsVersion(t *testing.T) {
	var got map[string]any
	fv := &fakeVault{kv: func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		_, _ = io.WriteString(w, `{"data":{"created_time":"2026-01-01T00:00:00Z","version":8}}`)
	}}
	c := tokenClient(t, fv, nil)
	v, err := c.Write(context.Background(), "ohmlab/platforms/a/b/c", nil, 7)
	if want := (Written{Version: 8, Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil || !v.Created.Equal(want.Created) || v.Version != want.Version {
		t.Fatalf("Write = %+v, %v; want %+v", v, err, want)
	}
	want := map[string]any{"data": map[string]any{}, "options": map[string]any{"cas": float64(7)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("body (-want +got):\n%s", diff)
	}
	if _, err := c.Write(context.Background(), "ohmlab/x", nil, -1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative cas: %v", err)
	}
	if _, reqs := fv.seen(); len(reqs) != 1 {
		t.Fatalf("requests %v, want the first write only", reqs)
	}
}

func TestMark(t *testing.T) {
	type req struct{ Method, Path, ContentType, Body string }
	tests := []struct {
		name      string
		patch     int // status of the PATCH
		md        map[string]string
		new       bool // MarkNew: the path was read absent
		wantReqs  []req
		wantClass string
	}{
		{name: "a path read absent: one creation", new: true, md: map[string]string{"owner": "ns/name"},
			wantReqs:  []req{{"PUT", "/v1/ohmlab/metadata/p/a/b", "", `{"custom_metadata":{"owner":"ns/name"}}`}},
			wantClass: "ok"},
		{name: "a path read absent, over the limits", new: true, md: map[string]string{"owner": strings.Repeat("v", 513)}, wantClass: "invalid"},
		{name: "existing metadata: one merge patch", patch: 204, md: map[string]string{"owner": "ns/name"},
			wantReqs:  []req{{"PATCH", "/v1/ohmlab/metadata/p/a/b", "application/merge-patch+json", `{"custom_metadata":{"owner":"ns/name"}}`}},
			wantClass: "ok"},
		{name: "no metadata yet: patch then create", patch: 404, md: map[string]string{"owner": "ns/name"},
			wantReqs: []req{
				{"PATCH", "/v1/ohmlab/metadata/p/a/b", "application/merge-patch+json", `{"custom_metadata":{"owner":"ns/name"}}`},
				{"PUT", "/v1/ohmlab/metadata/p/a/b", "", `{"custom_metadata":{"owner":"ns/name"}}`},
			},
			wantClass: "ok"},
		{name: "policy refusal", patch: 403, md: map[string]string{"owner": "ns/name"},
			wantReqs:  []req{{"PATCH", "/v1/ohmlab/metadata/p/a/b", "application/merge-patch+json", `{"custom_metadata":{"owner":"ns/name"}}`}},
			wantClass: "forbidden"},
		{name: "nothing to mark", md: map[string]string{}, wantClass: "ok"},
		{name: "over the limits", md: map[string]string{"owner": strings.Repeat("v", 513)}, wantClass: "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []req
			fv := &fakeVault{kv: func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				ct := r.Header.Get("Content-Type")
				if r.Method != http.MethodPatch {
					ct = ""
				}
				mu.Lock()
				got = append(got, req{r.Method, r.URL.Path, ct, string(b)})
				mu.Unlock()
				switch {
				case r.Method == http.MethodPatch && tt.patch == 404:
					w.WriteHeader(404) // Vault's answer: no body
				case r.Method == http.MethodPatch && tt.patch == 403:
					answer(403, `{"errors":["permission denied"]}`)(w, r)
				default:
					w.WriteHeader(204)
				}
			}}
			c := tokenClient(t, fv, nil)
			mark := c.Mark
			if tt.new {
				mark = c.MarkNew
			}
			err := mark(context.Background(), "ohmlab/p/a/b", tt.md)
			if ClassOf(err) != tt.wantClass {
				t.Fatalf("Mark: %v, want class %s", err, tt.wantClass)
			}
			if diff := cmp.Diff(tt.wantReqs, got); diff != "" {
				t.Fatalf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeClock is a settable clock for the token lifecycle.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func kubernetesClient(t *testing.T, fv *fakeVault, mutate func(*Config)) (*Client, *fakeClock, string) {
	t.Helper()
	jwtFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(jwtFile, []byte("jwt-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := tokenClient(t, fv, func(cfg *Config) {
		cfg.Auth = AuthConfig{Method: MethodKubernetes, Role: "ohmlab", Audience: "vault", TokenFile: jwtFile}
		if mutate != nil {
			mutate(cfg)
		}
	})
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.now = clock.Now
	return c, clock, jwtFile
}

func TestTokenLifecycle(t *testing.T) {
	ctx := context.Background()
	fv := &fakeVault{ttl: 900, kv: answer(404, `{"errors":[]}`)}
	c, clock, jwtFile := kubernetesClient(t, fv, nil)
	read := func() {
		t.Helper()
		if _, err := c.Read(ctx, "ohmlab/x"); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name       string
		advance    time.Duration
		jwt        string // new content of the token file, "" to keep it
		wantLogins int
	}{
		{name: "first request logs in", wantLogins: 1},
		{name: "same lifetime", advance: 599 * time.Second, wantLogins: 1},
		{name: "two thirds of the TTL: new login with the rotated file", advance: time.Second, jwt: "jwt-2", wantLogins: 2},
		{name: "many requests, one lifetime", wantLogins: 2},
		{name: "idle past expiry: login before the request", advance: time.Hour, jwt: "jwt-3", wantLogins: 3},
	}
	for _, st := range steps {
		clock.Add(st.advance)
		if st.jwt != "" {
			if err := os.WriteFile(jwtFile, []byte(st.jwt), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for range 5 {
			read()
		}
		if got := c.Logins(); got != st.wantLogins {
			t.Fatalf("%s: Logins() = %d, want %d", st.name, got, st.wantLogins)
		}
	}
	jwts, _ := fv.seen()
	if diff := cmp.Diff([]string{"jwt-1", "jwt-2", "jwt-3"}, jwts); diff != "" {
		t.Fatalf("JWTs sent (-want +got):\n%s", diff)
	}
}

// TestTokenSource: a client given a token source instead of a file asks it
// for a ServiceAccount token at each login, and only then: one call per
// token lifetime, however many requests.
func TestTokenSource(t *testing.T) {
	ctx := context.Background()
	fv := &fakeVault{ttl: 900, kv: answer(404, `{"errors":[]}`)}
	var calls int
	c, clock, _ := kubernetesClient(t, fv, func(cfg *Config) {
		cfg.Auth.TokenFile, cfg.Auth.TokenSource = "", func(context.Context) (string, error) {
			calls++
			return fmt.Sprintf("minted-%d\n", calls), nil
		}
	})
	for _, advance := range []time.Duration{0, time.Second, 600 * time.Second} {
		clock.Add(advance)
		for range 5 {
			if _, err := c.Read(ctx, "ohmlab/x"); err != nil {
				t.Fatal(err)
			}
		}
	}
	jwts, _ := fv.seen()
	if diff := cmp.Diff([]string{"minted-1", "minted-2"}, jwts); diff != "" {
		t.Fatalf("JWTs sent (-want +got):\n%s", diff)
	}
	if calls != 2 || c.Logins() != 2 {
		t.Fatalf("token source called %d times, Logins() = %d, want 2 and 2", calls, c.Logins())
	}
}

func TestFailedReplacementKeepsTheTokenUntilExpiry(t *testing.T) {
	ctx := context.Background()
	fv := &fakeVault{ttl: 900, kv: answer(404, `{"errors":[]}`)}
	c, clock, jwtFile := kubernetesClient(t, fv, nil)
	if _, err := c.Read(ctx, "ohmlab/x"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(jwtFile); err != nil {
		t.Fatal(err)
	}
	clock.Add(700 * time.Second) // past two thirds, before expiry
	for range 3 {
		if _, err := c.Read(ctx, "ohmlab/x"); err != nil {
			t.Fatalf("read with a token that still works: %v", err)
		}
	}
	clock.Add(200 * time.Second) // expired
	if _, err := c.Read(ctx, "ohmlab/x"); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("read with an expired token and no login: %v", err)
	}
	if err := os.WriteFile(jwtFile, []byte("jwt-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, "ohmlab/x"); err != nil || c.Logins() != 2 {
		t.Fatalf("read once the login works again: %v, Logins() = %d", err, c.Logins())
	}
}

func TestRejectedTokenLogsInOnceAndRetriesOnce(t *testing.T) {
	ctx := context.Background()
	var policy atomic.Bool
	fv := &fakeVault{ttl: 900}
	fv.kv = func(w http.ResponseWriter, r *http.Request) {
		if policy.Load() {
			answer(403, `{"errors":["permission denied"]}`)(w, r)
			return
		}
		answer(404, `{"errors":[]}`)(w, r)
	}
	c, _, _ := kubernetesClient(t, fv, nil)
	if _, err := c.Read(ctx, "ohmlab/x"); err != nil {
		t.Fatal(err)
	}

	fv.reject("hvs.token-1")
	if _, err := c.Read(ctx, "ohmlab/x"); err != nil {
		t.Fatalf("read after a revoked token: %v", err)
	}
	if c.Logins() != 2 {
		t.Fatalf("Logins() = %d, want 2", c.Logins())
	}

	policy.Store(true)
	if _, err := c.Read(ctx, "ohmlab/x"); !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("policy refusal: %v", err)
	}
	if c.Logins() != 2 {
		t.Fatalf("a policy refusal logged in again: Logins() = %d", c.Logins())
	}

	policy.Store(false)
	fv.reject("hvs.token-2")
	fv.reject("hvs.token-3")
	_, err := c.Read(ctx, "ohmlab/x")
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "invalid token") {
		t.Fatalf("token rejected twice: %v", err)
	}
	if c.Logins() != 3 {
		t.Fatalf("Logins() = %d, want one more login, 3", c.Logins())
	}
	if _, reqs := fv.seen(); len(reqs) != 6 {
		t.Fatalf("KV requests %d, want 6 (1, 2 with retry, 1, 2 with retry)", len(reqs))
	}
}

func TestConcurrentRejectionsLogInOnce(t *testing.T) {
	ctx := context.Background()
	fv := &fakeVault{ttl: 900, kv: answer(404, `{"errors":[]}`)}
	c, _, _ := kubernetesClient(t, fv, nil)
	if _, err := c.Read(ctx, "ohmlab/x"); err != nil {
		t.Fatal(err)
	}
	fv.reject("hvs.token-1")
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			_, err := c.Read(ctx, "ohmlab/x")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c.Logins() != 2 {
		t.Fatalf("Logins() = %d, want 2", c.Logins())
	}
}

func TestLoginFailures(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		class  string
		reason string
	}{
		{name: "unknown role", mutate: func(c *Config) { c.Auth.Role = "other" }, class: "forbidden", reason: `invalid role name "other"`},
		{name: "missing token file", mutate: func(c *Config) { c.Auth.TokenFile = "/nonexistent/token" }, class: "unavailable",
			reason: "open /nonexistent/token: no such file or directory"},
		{name: "token source refused", mutate: func(c *Config) {
			c.Auth.TokenFile, c.Auth.TokenSource = "", func(context.Context) (string, error) {
				return "", &Error{Op: OpLogin, Path: "team-a/ohmlab-vaultseed", Class: ClassForbidden, Reason: "serviceaccounts \"ohmlab-vaultseed\" not found"}
			}
		}, class: "forbidden", reason: `serviceaccounts "ohmlab-vaultseed" not found`},
		{name: "token source failed", mutate: func(c *Config) {
			c.Auth.TokenFile, c.Auth.TokenSource = "", func(context.Context) (string, error) { return "", errors.New("connection refused") }
		}, class: "unavailable", reason: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fv := &fakeVault{ttl: 900, kv: answer(404, `{"errors":[]}`)}
			c, _, _ := kubernetesClient(t, fv, tt.mutate)
			_, err := c.Read(context.Background(), "ohmlab/x")
			var e *Error
			if !errors.As(err, &e) || e.Op != OpLogin || string(e.Class) != tt.class || !strings.Contains(e.Reason, tt.reason) {
				t.Fatalf("Read: %v, want a login error of class %s with %q", err, tt.class, tt.reason)
			}
			if _, reqs := fv.seen(); len(reqs) != 0 || c.Logins() != 0 {
				t.Fatalf("sent %v after a failed login, Logins() = %d", reqs, c.Logins())
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	c := tokenClient(t, &fakeVault{kv: answer(404, `{"errors":[]}`)}, func(cfg *Config) { cfg.QPS, cfg.Burst = 20, 1 })
	ctx := context.Background()
	start := time.Now()
	for range 5 {
		if _, err := c.Read(ctx, "ohmlab/x"); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 190*time.Millisecond {
		t.Fatalf("5 reads at 20 QPS took %v, want at least 200ms", d)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, _ = c.Read(ctx, "ohmlab/x")
	_, err := c.Read(short, "ohmlab/x")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "client-side rate limit") {
		t.Fatalf("read that cannot wait for the limiter: %v", err)
	}
}

func TestTimeoutGivesUnavailable(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	c := tokenClient(t, &fakeVault{kv: func(http.ResponseWriter, *http.Request) { <-release }},
		func(cfg *Config) { cfg.Timeout = 300 * time.Millisecond })
	start := time.Now()
	_, err := c.Read(context.Background(), "ohmlab/x")
	if d := time.Since(start); !errors.Is(err, ErrUnavailable) || d > 2*time.Second {
		t.Fatalf("Read against a hung server: %v after %v", err, d)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	if NewMetrics(reg).requests != m.requests {
		t.Fatal("a second NewMetrics on one registry does not share the collectors")
	}
	fv := &fakeVault{ttl: 900}
	fv.kv = func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/denied") {
			answer(403, `{"errors":["permission denied"]}`)(w, r)
			return
		}
		answer(404, `{"errors":[]}`)(w, r)
	}
	c, _, _ := kubernetesClient(t, fv, func(cfg *Config) { cfg.Metrics, cfg.Target = m, "vault-a" })
	ctx := context.Background()
	_, _ = c.Read(ctx, "ohmlab/x")
	_, _ = c.Read(ctx, "ohmlab/denied")
	_ = c.Mark(ctx, "ohmlab/x", map[string]string{"": "v"})

	got := map[string]float64{}
	for _, l := range [][]string{
		{"vault-a", "read", "ok"}, {"vault-a", "read", "forbidden"}, {"vault-a", "login", "ok"}, {"vault-a", "mark", "invalid"},
	} {
		got[strings.Join(l, "/")] = testutil.ToFloat64(m.requests.WithLabelValues(l...))
	}
	want := map[string]float64{"vault-a/read/ok": 1, "vault-a/read/forbidden": 1, "vault-a/login/ok": 1, "vault-a/mark/invalid": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("requests (-want +got):\n%s", diff)
	}
	if n := testutil.CollectAndCount(reg, "ohmlab_backend_request_duration_seconds"); n != 3 {
		t.Fatalf("%d duration series, want 3 (read, login, mark)", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
