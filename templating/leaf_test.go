package templating

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	errRandom  = "<random:N> needs a decimal length N from 1 to 4096"
	errHex     = "<hex:N> needs an even decimal length N from 2 to 4096"
	errUUID    = "<uuid> takes no argument"
	errAge     = "an age template must be <age:secret> or <age:public>"
	errSSH     = "an ssh template must be <ssh:private> or <ssh:public>"
	errBcrypt  = "<bcrypt:key.path> needs the dotted key path of another key of the same object (no empty segment)"
	errRef     = "<ref:mount/path#key.path> needs a path, then '#', then a dotted key path (no empty segment)"
	errPath    = "spec.path must be <mount>/<path>: two or more segments of letters, digits, '.', '_' and '-', separated by '/' (no segment '.' or '..', at most 512 characters)"
	errRefPath = "the path of <ref:mount/path#key.path> must be <mount>/<path>: two or more segments of letters, digits, '.', '_' and '-', separated by '/' (no segment '.' or '..', at most 512 characters)"
	errUnknown = "unknown template kind (templates are lowercase: <random:N>, <hex:N>, <password:N>, <password:N:classes>, <vault-password:policy>, <uuid>, <age:secret>, <age:public>, <ssh:private>, <ssh:public>, <bcrypt:key.path>, <ref:mount/path#key.path>); a plain value cannot have the shape <name> or <name:args>"
)

func TestParseLeaf(t *testing.T) {
	plain := func(s string) Leaf { return Leaf{Kind: KindPlain, Value: s} }
	tests := []struct {
		name    string
		in      string
		want    Leaf
		wantErr string
	}{
		// Plain values.
		{name: "empty placeholder", in: "", want: plain("")},
		{name: "text", in: "admin", want: plain("admin")},
		{name: "lone <", in: "<", want: plain("<")},
		{name: "lone >", in: ">", want: plain(">")},
		{name: "empty brackets", in: "<>", want: plain("<>")},
		{name: "text before template", in: "x<random:8>", want: plain("x<random:8>")},
		{name: "text after template", in: "<random:8> ", want: plain("<random:8> ")},
		{name: "two templates", in: "<random:8><hex:2>", want: plain("<random:8><hex:2>")},
		{name: "inner bracket", in: "<a>b>", want: plain("<a>b>")},
		{name: "space before name", in: "< random:8>", want: plain("< random:8>")},
		{name: "name starts with digit", in: "<1abc>", want: plain("<1abc>")},
		{name: "name with space", in: "<pass word>", want: plain("<pass word>")},
		{name: "name with symbol", in: "<p@ss:1>", want: plain("<p@ss:1>")},
		{name: "empty name", in: "<:8>", want: plain("<:8>")},

		// Templates, one row per kind and bound.
		{name: "random", in: "<random:24>", want: Leaf{Kind: KindRandom, Template: "<random:24>", Length: 24}},
		{name: "random min", in: "<random:1>", want: Leaf{Kind: KindRandom, Template: "<random:1>", Length: 1}},
		{name: "random max", in: "<random:4096>", want: Leaf{Kind: KindRandom, Template: "<random:4096>", Length: 4096}},
		{name: "random leading zero", in: "<random:08>", want: Leaf{Kind: KindRandom, Template: "<random:08>", Length: 8}},
		{name: "hex min", in: "<hex:2>", want: Leaf{Kind: KindHex, Template: "<hex:2>", Length: 2}},
		{name: "hex max", in: "<hex:4096>", want: Leaf{Kind: KindHex, Template: "<hex:4096>", Length: 4096}},
		{name: "uuid", in: "<uuid>", want: Leaf{Kind: KindUUID, Template: "<uuid>"}},
		{name: "age secret", in: "<age:secret>", want: Leaf{Kind: KindAgeSecret, Template: "<age:secret>"}},
		{name: "age public", in: "<age:public>", want: Leaf{Kind: KindAgePublic, Template: "<age:public>"}},
		{name: "ssh private", in: "<ssh:private>", want: Leaf{Kind: KindSSHPrivate, Template: "<ssh:private>"}},
		{name: "ssh public", in: "<ssh:public>", want: Leaf{Kind: KindSSHPublic, Template: "<ssh:public>"}},
		{name: "bcrypt", in: "<bcrypt:admin.password>", want: Leaf{Kind: KindBcrypt, Template: "<bcrypt:admin.password>", Source: "admin.password"}},
		{name: "bcrypt top key", in: "<bcrypt:pw>", want: Leaf{Kind: KindBcrypt, Template: "<bcrypt:pw>", Source: "pw"}},
		{name: "ref", in: "<ref:ohmlab/platforms/p/core/keycloak#admin.password>", want: Leaf{Kind: KindRef, Template: "<ref:ohmlab/platforms/p/core/keycloak#admin.password>", Ref: Ref{Path: "ohmlab/platforms/p/core/keycloak", Key: "admin.password"}}},
		{name: "ref two segments", in: "<ref:m/p#k>", want: Leaf{Kind: KindRef, Template: "<ref:m/p#k>", Ref: Ref{Path: "m/p", Key: "k"}}},
		{name: "ref key with #", in: "<ref:m/p#k#x>", want: Leaf{Kind: KindRef, Template: "<ref:m/p#k#x>", Ref: Ref{Path: "m/p", Key: "k#x"}}},

		// Malformed: a known kind with bad arguments.
		{name: "random 0", in: "<random:0>", wantErr: errRandom},
		{name: "random 4097", in: "<random:4097>", wantErr: errRandom},
		{name: "random not a number", in: "<random:x>", wantErr: errRandom},
		{name: "random no argument", in: "<random>", wantErr: errRandom},
		{name: "random empty argument", in: "<random:>", wantErr: errRandom},
		{name: "random signed", in: "<random:+8>", wantErr: errRandom},
		{name: "random space", in: "<random: 8>", wantErr: errRandom},
		{name: "random huge", in: "<random:99999999999999999999>", wantErr: errRandom},
		{name: "hex odd", in: "<hex:7>", wantErr: errHex},
		{name: "hex 0", in: "<hex:0>", wantErr: errHex},
		{name: "hex 4098", in: "<hex:4098>", wantErr: errHex},
		{name: "hex no argument", in: "<hex>", wantErr: errHex},
		{name: "uuid with argument", in: "<uuid:4>", wantErr: errUUID},
		{name: "uuid empty argument", in: "<uuid:>", wantErr: errUUID},
		{name: "age private", in: "<age:private>", wantErr: errAge},
		{name: "age no argument", in: "<age>", wantErr: errAge},
		{name: "age empty argument", in: "<age:>", wantErr: errAge},
		{name: "age wrong case", in: "<age:Secret>", wantErr: errAge},
		{name: "ssh secret", in: "<ssh:secret>", wantErr: errSSH},
		{name: "ssh no argument", in: "<ssh>", wantErr: errSSH},
		{name: "ssh empty argument", in: "<ssh:>", wantErr: errSSH},
		{name: "ssh wrong case", in: "<ssh:Private>", wantErr: errSSH},
		{name: "ssh with a comment", in: "<ssh:public:me@host>", wantErr: errSSH},
		{name: "bcrypt empty", in: "<bcrypt:>", wantErr: errBcrypt},
		{name: "bcrypt no argument", in: "<bcrypt>", wantErr: errBcrypt},
		{name: "bcrypt empty segment", in: "<bcrypt:a..b>", wantErr: errBcrypt},
		{name: "bcrypt leading dot", in: "<bcrypt:.a>", wantErr: errBcrypt},
		{name: "ref without key", in: "<ref:path-without-key>", wantErr: errRef},
		{name: "ref empty path", in: "<ref:#k>", wantErr: errRefPath},
		{name: "ref empty key", in: "<ref:m/p#>", wantErr: errRef},
		{name: "ref key empty segment", in: "<ref:m/p#a.>", wantErr: errRef},
		{name: "ref no argument", in: "<ref>", wantErr: errRef},
		{name: "ref only mount", in: "<ref:onlymount#k>", wantErr: errRefPath},
		{name: "ref leading slash", in: "<ref:/m/p#k>", wantErr: errRefPath},
		{name: "ref empty segment", in: "<ref:m//p#k>", wantErr: errRefPath},
		{name: "ref trailing slash", in: "<ref:m/p/#k>", wantErr: errRefPath},
		{name: "ref dot-dot segment", in: "<ref:m/p/../q#k>", wantErr: errRefPath},
		{name: "ref space", in: "<ref:m/p q#k>", wantErr: errRefPath},
		{name: "ref query", in: "<ref:m/p?x=1#k>", wantErr: errRefPath},
		{name: "ref percent", in: "<ref:m/p%2Fq#k>", wantErr: errRefPath},

		// Unknown kinds are errors, not plain values.
		{name: "unknown kind", in: "<foo:1>", wantErr: errUnknown},
		{name: "unknown kind no argument", in: "<changeme>", wantErr: errUnknown},
		{name: "wrong case", in: "<Random:8>", wantErr: errUnknown},
		{name: "upper uuid", in: "<UUID>", wantErr: errUnknown},
		{name: "url-like", in: "<http://example.com>", wantErr: errUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLeaf(tt.in)
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("leaf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeafKinds(t *testing.T) {
	tests := []struct {
		name          string
		in            string
		generated     bool
		derived       bool
		wantKind      Kind
		wantKindValue string
	}{
		{name: "plain", in: "x", wantKind: KindPlain, wantKindValue: "plain"},
		{name: "random", in: "<random:8>", generated: true, wantKind: KindRandom, wantKindValue: "random"},
		{name: "hex", in: "<hex:8>", generated: true, wantKind: KindHex, wantKindValue: "hex"},
		{name: "uuid", in: "<uuid>", generated: true, wantKind: KindUUID, wantKindValue: "uuid"},
		{name: "age secret", in: "<age:secret>", generated: true, wantKind: KindAgeSecret, wantKindValue: "age-secret"},
		{name: "age public", in: "<age:public>", derived: true, wantKind: KindAgePublic, wantKindValue: "age-public"},
		{name: "ssh private", in: "<ssh:private>", generated: true, wantKind: KindSSHPrivate, wantKindValue: "ssh-private"},
		{name: "ssh public", in: "<ssh:public>", derived: true, wantKind: KindSSHPublic, wantKindValue: "ssh-public"},
		{name: "bcrypt", in: "<bcrypt:a>", derived: true, wantKind: KindBcrypt, wantKindValue: "bcrypt"},
		{name: "ref", in: "<ref:a/b#c>", wantKind: KindRef, wantKindValue: "ref"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustParse(t, tt.in)
			if l.Kind != tt.wantKind || string(l.Kind) != tt.wantKindValue {
				t.Errorf("kind = %q, want %q", l.Kind, tt.wantKindValue)
			}
			if got := l.Generated(); got != tt.generated {
				t.Errorf("Generated() = %v, want %v", got, tt.generated)
			}
			if got := l.Derived(); got != tt.derived {
				t.Errorf("Derived() = %v, want %v", got, tt.derived)
			}
		})
	}
}

func TestRefString(t *testing.T) {
	if got, want := (Ref{Path: "m/a/b", Key: "x.y"}).String(), "m/a/b#x.y"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	l := mustParse(t, "<ref:m/a/b#x.y>")
	if got := "<ref:" + l.Ref.String() + ">"; got != l.Template {
		t.Errorf("String() does not round-trip: %q, template %q", got, l.Template)
	}
}

func TestValidPath(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{name: "two segments", in: "m/p", want: true},
		{name: "many segments", in: "ohmlab/platforms/production/core/keycloak", want: true},
		{name: "every allowed byte", in: "Az09._-/.a/..b/a./...", want: true},
		{name: "512 bytes", in: "m/" + strings.Repeat("p", 510), want: true},
		{name: "513 bytes", in: "m/" + strings.Repeat("p", 511)},
		{name: "empty", in: ""},
		{name: "one segment", in: "mount"},
		{name: "leading slash", in: "/m/p"},
		{name: "trailing slash", in: "m/p/"},
		{name: "empty segment", in: "m//p"},
		{name: "dot segment", in: "m/./p"},
		{name: "dot-dot segment", in: "m/a/../p"},
		{name: "dot mount", in: "./p"},
		{name: "hash", in: "m/p#k"},
		{name: "question mark", in: "m/p?x"},
		{name: "percent", in: "m/p%2e"},
		{name: "space", in: "m/p q"},
		{name: "leading space", in: " m/p"},
		{name: "trailing newline", in: "m/p\n"},
		{name: "tab", in: "m/\tp"},
		{name: "policy glob +", in: "m/+/p"},
		{name: "policy glob *", in: "m/p*"},
		{name: "backslash", in: "m\\p/q"},
		{name: "non-ASCII letter", in: "m/caf\u00e9"},
		{name: "NUL", in: "m/p\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidPath(tt.in); got != tt.want {
				t.Errorf("ValidPath(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestEmbeddedTemplate(t *testing.T) {
	tests := []struct {
		in, want string
		wantOK   bool
	}{
		{in: "<random:8>"},
		{in: "<foo:1>"},
		{in: "plain"},
		{in: ""},
		{in: "<"},
		{in: "a < b > c"},
		{in: "<pass word>"},
		{in: "mail <admin@example.org>"},
		{in: "<hexagon"},
		{in: "x <Random:8>"},
		{in: " <random:8>", want: "<random:8>", wantOK: true},
		{in: "prefix-<random:8>", want: "<random:8>", wantOK: true},
		{in: "<uuid><uuid>", want: "<uuid>", wantOK: true},
		{in: "<random:8><random:8>", want: "<random:8>", wantOK: true},
		// A composed value (refused here for its lone '<') holds no
		// template: ParseLeaf takes it.
		{in: "a<b <ref:kv/app#k> c"},
		{in: "a <ref:kv/app#k> c"},
		{in: "x<<ref:kv/app#k>", want: "<ref:kv/app#k>", wantOK: true},
		{in: "<random:8", want: "<random…", wantOK: true},
		{in: "<uuid", want: "<uuid…", wantOK: true},
		{in: "<ref:kv/app#k<uuid>", want: "<ref…", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := EmbeddedTemplate(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("EmbeddedTemplate(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestLooksLikeTemplate(t *testing.T) {
	tests := []struct {
		in           string
		wantTemplate string
		wantOK       bool
	}{
		{in: "<random:8>"},
		{in: "<random:0>"},
		{in: "plain"},
		{in: ""},
		{in: "  "},
		{in: "x <random:8>"},
		{in: "<random:8> x"},
		{in: "<pass word>"},
		{in: " <pass word> "},
		{in: "< >"},
		{in: "<ref:m/p# >"},
		{in: " <random:8>", wantTemplate: "<random:8>", wantOK: true},
		{in: "<random:8> ", wantTemplate: "<random:8>", wantOK: true},
		{in: "\t<uuid>\n", wantTemplate: "<uuid>", wantOK: true},
		{in: "< ref:m/p#k >", wantTemplate: "<ref:m/p#k>", wantOK: true},
		{in: " <random:0>", wantOK: true},
		{in: " <foo:1>", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := LooksLikeTemplate(tt.in)
			if got != tt.wantTemplate || ok != tt.wantOK {
				t.Errorf("LooksLikeTemplate(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.wantTemplate, tt.wantOK)
			}
		})
	}
}
