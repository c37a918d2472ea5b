package tenancy_test

import (
	"net/url"
	"path"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// tenants is the configuration of the tests: two tenants, one shared
// source.
func tenants() tenancy.Config {
	c := tenancy.DefaultConfig()
	c.Enabled = true
	c.Namespaces = []string{"team-a", "team-b"}
	c.SharedSources = []string{"ohmlab/shared/public/"}
	return c
}

const (
	pathMessage = "must be a path under ohmlab/tenants/team-a/, this namespace's prefix (" + templating.PathRule + "); a tenant's object cannot choose another"
	refMessage  = "<ref:> must read a path under ohmlab/tenants/team-a/ (this namespace's prefix) or under a shared source (ohmlab/shared/public/); a tenant's object cannot read elsewhere"
)

func TestCheckPath(t *testing.T) {
	tests := []struct {
		name string
		path string
		ok   bool
	}{
		{name: "under its prefix", path: "ohmlab/tenants/team-a/keycloak", ok: true},
		{name: "deeper under its prefix", path: "ohmlab/tenants/team-a/app/db/admin", ok: true},
		{name: "a segment that starts with dots", path: "ohmlab/tenants/team-a/..x", ok: true},

		{name: "another tenant's absolute path", path: "ohmlab/tenants/team-b/keycloak"},
		{name: "a platform path", path: "ohmlab/platforms/production/core/keycloak"},
		{name: "another mount", path: "secret/tenants/team-a/keycloak"},
		{name: "the prefix itself", path: "ohmlab/tenants/team-a"},
		{name: "the prefix with its slash", path: "ohmlab/tenants/team-a/"},
		{name: "a namespace that starts with its name", path: "ohmlab/tenants/team-ab/keycloak"},
		{name: "dot-dot out of its prefix", path: "ohmlab/tenants/team-a/../team-b/keycloak"},
		{name: "dot-dot last", path: "ohmlab/tenants/team-a/x/.."},
		{name: "dot segment", path: "ohmlab/tenants/team-a/./x"},
		{name: "double slash", path: "ohmlab/tenants/team-a//x"},
		{name: "leading slash", path: "/ohmlab/tenants/team-a/x"},
		{name: "trailing slash", path: "ohmlab/tenants/team-a/x/"},
		{name: "percent-encoded slash and dots", path: "ohmlab/tenants/team-a/%2e%2e%2fteam-b%2fx"},
		{name: "percent-encoded prefix", path: "ohmlab/tenants/team%2Da/x"},
		{name: "trailing space", path: "ohmlab/tenants/team-a/x "},
		{name: "trailing newline", path: "ohmlab/tenants/team-a/x\n"},
		{name: "trailing no-break space", path: "ohmlab/tenants/team-a/x\u00a0"},
		{name: "Cyrillic a in the namespace", path: "ohmlab/tenants/team-\u0430/x"},
		{name: "fullwidth solidus", path: "ohmlab/tenants/team-a/x\uff0f..\uff0fteam-b"},
		{name: "division slash", path: "ohmlab/tenants/team-a\u2215..\u2215team-b/x"},
		{name: "zero-width space", path: "ohmlab/tenants/team-a/\u200bx"},
		{name: "upper case", path: "OHMLAB/tenants/team-a/x"},
		{name: "policy glob", path: "ohmlab/tenants/team-a/*"},
		{name: "query", path: "ohmlab/tenants/team-a/x?version=1"},
		{name: "backslash", path: `ohmlab/tenants/team-a\..\team-b\x`},
		{name: "empty", path: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tenancy.Check(tenants(), "team-a", tenancy.Object{Path: tt.path})
			want := tenancy.Verdict{Tenant: true, Prefix: "ohmlab/tenants/team-a/"}
			if !tt.ok {
				want.Problems = []tenancy.Problem{{Key: "spec.path", Message: pathMessage}}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckRefs(t *testing.T) {
	tests := []struct {
		name string
		src  string
		ok   bool
	}{
		{name: "its own prefix", src: "ohmlab/tenants/team-a/db", ok: true},
		{name: "its own path", src: "ohmlab/tenants/team-a/app", ok: true},
		{name: "a shared source", src: "ohmlab/shared/public/ca", ok: true},
		{name: "deep in a shared source", src: "ohmlab/shared/public/pki/root/ca", ok: true},

		{name: "another tenant", src: "ohmlab/tenants/team-b/db"},
		{name: "a platform path", src: "ohmlab/platforms/production/core/keycloak"},
		{name: "an unlisted shared path", src: "ohmlab/shared/private/ca"},
		{name: "the shared source itself", src: "ohmlab/shared/public"},
		{name: "a sibling that starts with the shared source's name", src: "ohmlab/shared/publicity/x"},
		{name: "dot-dot out of the shared source", src: "ohmlab/shared/public/../../tenants/team-b/db"},
		{name: "double slash in the shared source", src: "ohmlab/shared//public/ca"},
		{name: "percent-encoded escape", src: "ohmlab/shared/public/%2e%2e/private/ca"},
		{name: "trailing space", src: "ohmlab/tenants/team-a/db "},
		{name: "look-alike in the shared source", src: "ohmlab/shared/publ\u0456c/ca"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tenancy.Object{Path: "ohmlab/tenants/team-a/app", Refs: []tenancy.Ref{{Key: "db.password", Path: tt.src}}}
			got := tenancy.Check(tenants(), "team-a", o).Problems
			var want []tenancy.Problem
			if !tt.ok {
				want = []tenancy.Problem{{Key: "db.password", Message: refMessage}}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckSemantics(t *testing.T) {
	in := "ohmlab/tenants/team-a/app"
	withAdoption, withDelete, off, noShared := tenants(), tenants(), tenants(), tenants()
	withAdoption.AllowAdoption = true
	withDelete.AllowDelete = true
	off.Enabled = false
	noShared.SharedSources = nil
	deleteMessage := "Delete is not allowed in tenant namespaces (the controller's chart leaves targets.vault.tenants.allowDelete false): use Retain"
	adoptMessage := "the path has no owner marker, and adopting a path is not allowed in tenant namespaces (the controller's chart leaves targets.vault.tenants.allowAdoption false): ask the platform team to remove the path's data or to mark it for this object"
	tests := []struct {
		name      string
		cfg       tenancy.Config
		namespace string
		obj       tenancy.Object
		want      tenancy.Verdict
	}{
		{name: "Retain", cfg: tenants(), namespace: "team-a", obj: tenancy.Object{Path: in, DeletionPolicy: "Retain"},
			want: tenancy.Verdict{Tenant: true, Prefix: "ohmlab/tenants/team-a/"}},
		{name: "Delete without allowDelete", cfg: tenants(), namespace: "team-a", obj: tenancy.Object{Path: in, DeletionPolicy: "Delete"},
			want: tenancy.Verdict{Tenant: true, Prefix: "ohmlab/tenants/team-a/", Problems: []tenancy.Problem{{Key: "spec.deletionPolicy", Message: deleteMessage}}}},
		{name: "Delete with allowDelete", cfg: withDelete, namespace: "team-a", obj: tenancy.Object{Path: in, DeletionPolicy: "Delete"},
			want: tenancy.Verdict{Tenant: true, Prefix: "ohmlab/tenants/team-a/"}},
		{name: "adoption without allowAdoption", cfg: tenants(), namespace: "team-a", obj: tenancy.Object{Path: in, Adopts: true},
			want: tenancy.Verdict{Tenant: true, Prefix: "ohmlab/tenants/team-a/", Problems: []tenancy.Problem{{Key: "spec.path", Message: adoptMessage}}}},
		{name: "adoption with allowAdoption", cfg: withAdoption, namespace: "team-a", obj: tenancy.Object{Path: in, Adopts: true},
			want: tenancy.Verdict{Tenant: true, Prefix: "ohmlab/tenants/team-a/"}},
		{name: "adoption of a path out of scope says only that it is out of scope", cfg: tenants(), namespace: "team-a", obj: tenancy.Object{Path: "ohmlab/tenants/team-b/app", Adopts: true},
			want: tenancy.Verdict{Tenant: true, Prefix: "ohmlab/tenants/team-a/", Problems: []tenancy.Problem{{Key: "spec.path", Message: pathMessage}}}},
		{name: "every problem at once, sorted by key", cfg: tenants(), namespace: "team-a",
			obj: tenancy.Object{Path: "ohmlab/platforms/p/core/x", DeletionPolicy: "Delete", Refs: []tenancy.Ref{{Key: "b", Path: "ohmlab/platforms/p/core/y"}, {Key: "a", Path: "ohmlab/tenants/team-b/y"}}},
			want: tenancy.Verdict{Tenant: true, Prefix: "ohmlab/tenants/team-a/", Problems: []tenancy.Problem{
				{Key: "a", Message: refMessage}, {Key: "b", Message: refMessage},
				{Key: "spec.deletionPolicy", Message: deleteMessage}, {Key: "spec.path", Message: pathMessage}}}},
		{name: "without shared sources the message names only the prefix", cfg: noShared, namespace: "team-a",
			obj: tenancy.Object{Path: in, Refs: []tenancy.Ref{{Key: "k", Path: "ohmlab/shared/public/ca"}}},
			want: tenancy.Verdict{Tenant: true, Prefix: "ohmlab/tenants/team-a/", Problems: []tenancy.Problem{
				{Key: "k", Message: "<ref:> must read a path under ohmlab/tenants/team-a/ (this namespace's prefix); a tenant's object cannot read elsewhere"}}}},
		{name: "the other tenant gets its own prefix", cfg: tenants(), namespace: "team-b", obj: tenancy.Object{Path: "ohmlab/tenants/team-b/app"},
			want: tenancy.Verdict{Tenant: true, Prefix: "ohmlab/tenants/team-b/"}},
		{name: "a platform namespace is not the check's business", cfg: tenants(), namespace: "vault-operator-system",
			obj:  tenancy.Object{Path: "ohmlab/platforms/p/core/x", DeletionPolicy: "Delete", Adopts: true},
			want: tenancy.Verdict{}},
		{name: "tenants off: no namespace is a tenant", cfg: off, namespace: "team-a",
			obj:  tenancy.Object{Path: "ohmlab/platforms/p/core/x"},
			want: tenancy.Verdict{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tenancy.Check(tt.cfg, tt.namespace, tt.obj)); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}

// TestObjectOf: every <ref:> leaf of the analysis, at any depth, and each
// source of a composed value (another tenant's too: Check refuses it),
// with its key; nothing else.
func TestObjectOf(t *testing.T) {
	a := templating.Analyse(templating.Object{Path: "ohmlab/tenants/team-a/app", Data: map[string]any{
		"p":   "<random:8>",
		"own": "<ref:ohmlab/tenants/team-a/app#p>",
		"db":  map[string]any{"password": "<ref:ohmlab/tenants/team-a/db#password>", "plain": "<ref: not a ref>"},
		"bad": "<ref:ohmlab/../x#k>",
		"url": "pg://<ref:ohmlab/tenants/team-a/db#user>:<ref:ohmlab/tenants/team-b/db#password>@<ref:ohmlab/tenants/team-a/db#user>",
	}})
	got := tenancy.ObjectOf("ohmlab/tenants/team-a/app", "Retain", a)
	want := tenancy.Object{Path: "ohmlab/tenants/team-a/app", DeletionPolicy: "Retain", Refs: []tenancy.Ref{
		{Key: "db.password", Path: "ohmlab/tenants/team-a/db"},
		{Key: "own", Path: "ohmlab/tenants/team-a/app"},
		{Key: "url", Path: "ohmlab/tenants/team-a/db"},
		{Key: "url", Path: "ohmlab/tenants/team-b/db"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ObjectOf (-want +got):\n%s", diff)
	}
}

// FuzzCheck: whatever the path and the source of a reference, Check does
// not panic; what it admits is one plain spelling of a path under the
// prefix (or a shared source) that no URL or path cleaning reads as another;
// and what it refuses gets the very message of any other refused path.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"ohmlab/tenants/team-a/x", "ohmlab/tenants/team-b/x", "ohmlab/tenants/team-a/../team-b/x",
		"ohmlab/tenants/team-a//x", "ohmlab/tenants/team-a/%2e%2e/x", "ohmlab/tenants/team-a/x ",
		"ohmlab/tenants/team-\u0430/x", "ohmlab/shared/public/x", "ohmlab/shared/public/../x", "/ohmlab/tenants/team-a/x",
		"ohmlab/tenants/team-a", "ohmlab/tenants/team-a/", "", "ohmlab/tenants/team-a/x\x00",
	} {
		f.Add(s, s)
	}
	c := tenants()
	refused := tenancy.Check(c, "team-a", tenancy.Object{Path: "elsewhere/x", Refs: []tenancy.Ref{{Key: "k", Path: "elsewhere/x"}}}).Problems
	f.Fuzz(func(t *testing.T, p, src string) {
		v := tenancy.Check(c, "team-a", tenancy.Object{Path: p, Refs: []tenancy.Ref{{Key: "k", Path: src}}})
		admitted := map[string]bool{"spec.path": true, "k": true}
		for _, pr := range v.Problems {
			admitted[pr.Key] = false
			if want := refused[0]; pr.Key == "k" && pr != want {
				t.Fatalf("reference %q: problem %+v, not the one of every refused reference %+v", src, pr, want)
			}
			if want := refused[1]; pr.Key == "spec.path" && pr != want {
				t.Fatalf("path %q: problem %+v, not the one of every refused path %+v", p, pr, want)
			}
		}
		if admitted["spec.path"] {
			plain(t, p)
			if !strings.HasPrefix(p, "ohmlab/tenants/team-a/") {
				t.Fatalf("path %q admitted outside the prefix", p)
			}
		}
		if admitted["k"] {
			plain(t, src)
			if !strings.HasPrefix(src, "ohmlab/tenants/team-a/") && !strings.HasPrefix(src, "ohmlab/shared/public/") {
				t.Fatalf("reference %q admitted outside the prefix and the shared sources", src)
			}
		}
	})
}

// plain fails unless p is its own clean, unescaped, printable ASCII
// spelling: what Vault's client and any URL parser read as p itself.
func plain(t *testing.T, p string) {
	t.Helper()
	if path.Clean(p) != p || path.Clean("/"+p) != "/"+p {
		t.Fatalf("admitted %q, which cleans to another path", p)
	}
	if u, err := url.PathUnescape(p); err != nil || u != p {
		t.Fatalf("admitted %q, which unescapes to another path", p)
	}
	for _, r := range p {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			t.Fatalf("admitted %q, with the rune %U", p, r)
		}
	}
}
