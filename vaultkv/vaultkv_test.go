package vaultkv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	vaultapi "github.com/hashicorp/vault/api"
)

func TestSplitPath(t *testing.T) {
	tests := []struct {
		path, mount, rest string
		ok                bool
	}{
		{"ohmlab/platforms/core/keycloak/admin", "ohmlab", "platforms/core/keycloak/admin", true},
		{"secret/x", "secret", "x", true},
		{"secret", "", "", false},
		{"secret/", "", "", false},
		{"/x", "", "", false},
		{"", "", "", false},
		{"secret/x/", "", "", false},
		{"secret//x", "", "", false},
		{"secret/./x", "", "", false},
		{"secret/a/../x", "", "", false},
		{"./x", "", "", false},
		{"secret/.x/..y/...", "secret", ".x/..y/...", true},
	}
	for _, tt := range tests {
		mount, rest, err := SplitPath(tt.path)
		if mount != tt.mount || rest != tt.rest || (err == nil) != tt.ok {
			t.Errorf("SplitPath(%q) = %q, %q, %v; want %q, %q, ok=%v", tt.path, mount, rest, err, tt.mount, tt.rest, tt.ok)
		}
	}
}

func TestValidateMetadata(t *testing.T) {
	many := map[string]string{}
	for i := range MaxMetadataKeys + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	secretish := strings.Repeat("s3cr3t", 100) // 600 bytes
	tests := []struct {
		name string
		md   map[string]string
		want string // substring of the error; "" for none
	}{
		{name: "nil", md: nil},
		{name: "at the limits", md: map[string]string{strings.Repeat("k", 128): strings.Repeat("v", 512)}},
		{name: "too many keys", md: many, want: "65 keys, Vault allows at most 64"},
		{name: "empty key", md: map[string]string{"": "v"}, want: "empty key"},
		{name: "long key", md: map[string]string{strings.Repeat("k", 129): "v"}, want: "is 129 bytes, Vault allows at most 128"},
		{name: "empty value", md: map[string]string{"owner": ""}, want: `value of key "owner" is empty`},
		{name: "long value", md: map[string]string{"a": "ok", "token": secretish}, want: `value of key "token" is 600 bytes, Vault allows at most 512`},
		{name: "multi-byte value at the limit", md: map[string]string{"token": strings.Repeat("é", 256)}},
		{name: "multi-byte value past the limit", md: map[string]string{"token": strings.Repeat("é", 256) + "s3cr3t"}, want: `value of key "token" is 518 bytes, Vault allows at most 512`},
		{name: "tab in a value", md: map[string]string{"token": "s3cr3t\t1"}, want: `value of key "token" has a character that is not printable`},
		{name: "newline in a value", md: map[string]string{"token": "s3cr3t\n"}, want: `value of key "token" has a character that is not printable`},
		{name: "no-break space in a value", md: map[string]string{"token": "s3cr3t\u00a0x"}, want: `value of key "token" has a character that is not printable`},
		{name: "tab in a key", md: map[string]string{"a\tb": "v"}, want: `key "a\tb" has a character that is not printable`},
		{name: "ASCII space and symbols", md: map[string]string{"token": "2026-11-29 rotate 🔑"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateMetadata(tt.md)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("error carries the value: %v", err)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	respErr := func(status int, raw bool, msgs ...string) error {
		return fmt.Errorf("error writing secret to ohmlab/data/x: %w", &vaultapi.ResponseError{
			HTTPMethod: "PUT", URL: "http://127.0.0.1/v1/ohmlab/data/x", StatusCode: status, RawError: raw, Errors: msgs,
		})
	}
	tests := []struct {
		name string
		err  error
		want Error
	}{
		{"cas", respErr(400, false, "check-and-set parameter did not match the current version"),
			Error{Class: ClassCASMismatch, Status: 400, Reason: "check-and-set parameter did not match the current version"}},
		{"cas required", respErr(400, false, "check-and-set parameter required for this call"),
			Error{Class: ClassInvalid, Status: 400, Reason: "check-and-set parameter required for this call"}},
		{"policy", respErr(403, false, "1 error occurred:\n\t* permission denied\n\n"),
			Error{Class: ClassForbidden, Status: 403, Reason: "permission denied"}},
		{"bad token", respErr(403, false, "permission denied", "invalid token"),
			Error{Class: ClassForbidden, Status: 403, Reason: "permission denied; invalid token"}},
		{"no route", respErr(404, false, `no handler for route "nope/data/x"`),
			Error{Class: ClassNotFound, Status: 404, Reason: `no handler for route "nope/data/x"`}},
		{"sealed", respErr(503, false, "Vault is sealed"), Error{Class: ClassUnavailable, Status: 503, Reason: "Vault is sealed"}},
		{"quota", respErr(429, false, "request path: rate limit quota exceeded"),
			Error{Class: ClassUnavailable, Status: 429, Reason: "request path: rate limit quota exceeded"}},
		{"internal", respErr(500, false, "internal error"), Error{Class: ClassUnavailable, Status: 500, Reason: "internal error"}},
		{"raw body is not repeated", respErr(502, true, "<html>password=hunter2</html>"),
			Error{Class: ClassUnavailable, Status: 502, Reason: "bad gateway"}},
		{"other 4xx", respErr(405, false), Error{Class: ClassInvalid, Status: 405, Reason: "method not allowed"}},
		{"refused", &url.Error{Op: "Put", URL: "http://127.0.0.1:1/v1/ohmlab/data/x",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}},
			Error{Class: ClassUnavailable, Reason: "dial tcp: connect: connection refused"}},
		{"deadline", fmt.Errorf("x: %w", &url.Error{Op: "Get", URL: "u", Err: context.DeadlineExceeded}),
			Error{Class: ClassUnavailable, Reason: "timed out: context deadline exceeded", TimedOut: true}},
		{"canceled", context.Canceled, Error{Class: ClassUnavailable, Reason: "canceled"}},
		{"no secret", fmt.Errorf("%w: after writing", vaultapi.ErrSecretNotFound),
			Error{Class: ClassNotFound, Reason: "no secret in Vault's response"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			want.Op, want.Path = OpWrite, "ohmlab/x"
			got := classify(OpWrite, "ohmlab/x", tt.err)
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}

	// A login carries only a role and a JWT: Vault's 400 refuses one of them.
	logins := []struct {
		name string
		err  error
		want Error
	}{
		{"missing role", respErr(400, false, `invalid role name "nope"`),
			Error{Class: ClassForbidden, Status: 400, Reason: `invalid role name "nope"`}},
		{"service account not bound", respErr(403, false, "service account name not authorized"),
			Error{Class: ClassForbidden, Status: 403, Reason: "service account name not authorized"}},
		{"sealed", respErr(503, false, "Vault is sealed"), Error{Class: ClassUnavailable, Status: 503, Reason: "Vault is sealed"}},
		{"quota", respErr(429, false, "rate limit quota exceeded"),
			Error{Class: ClassUnavailable, Status: 429, Reason: "rate limit quota exceeded"}},
	}
	for _, tt := range logins {
		t.Run("login "+tt.name, func(t *testing.T) {
			want := tt.want
			want.Op, want.Path = OpLogin, "auth/kubernetes/login"
			got := classify(OpLogin, "auth/kubernetes/login", tt.err)
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorIsAndClassOf(t *testing.T) {
	forbidden := &Error{Op: OpRead, Path: "ohmlab/x", Class: ClassForbidden, Status: 403, Reason: "permission denied"}
	if got, want := forbidden.Error(), "vaultkv: read ohmlab/x: forbidden (403): permission denied"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("reading ohmlab/x: %w", forbidden)
	if !errors.Is(wrapped, ErrForbidden) || errors.Is(wrapped, ErrUnavailable) {
		t.Errorf("errors.Is does not follow the class")
	}
	tests := []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{wrapped, "forbidden"},
		{&Error{Class: ClassCASMismatch}, "cas_mismatch"},
		{fmt.Errorf("x: %w", ErrNotFound), "not_found"},
		{ErrInvalid, "invalid"},
		{context.DeadlineExceeded, "unavailable"},
		{errors.New("something else"), "unavailable"},
	}
	for _, tt := range tests {
		if got := ClassOf(tt.err); got != tt.want {
			t.Errorf("ClassOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	tok := AuthConfig{Method: MethodToken, Token: "t"}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no address", Config{Auth: tok}, "no Vault address"},
		{"no method", Config{Address: "http://x"}, `auth method ""`},
		{"kubernetes without role", Config{Address: "http://x", Auth: AuthConfig{Method: MethodKubernetes, TokenFile: "/f"}}, "needs a role"},
		{"token and file", Config{Address: "http://x", Auth: AuthConfig{Method: MethodToken, Token: "t", TokenFile: "/f"}}, "exactly one"},
		{"kubernetes with a file and a source", Config{Address: "http://x", Auth: AuthConfig{Method: MethodKubernetes, Role: "r", TokenFile: "/f",
			TokenSource: func(context.Context) (string, error) { return "", nil }}}, "exactly one of a token file and a token source"},
		{"negative timeout", Config{Address: "http://x", Auth: tok, Timeout: -1}, "must not be negative"},
		{"missing CA", Config{Address: "http://x", Auth: tok, CAFile: "/nonexistent/ca.pem"}, "reading the CA bundle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want invalid containing %q", err, tt.want)
			}
		})
	}
}
