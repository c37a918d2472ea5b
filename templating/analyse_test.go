package templating

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const own = "m/own"

func spec(key, msg string) Problem { return Problem{Reason: ReasonInvalidSpec, Key: key, Message: msg} }
func rot(key, msg string) Problem {
	return Problem{Reason: ReasonInvalidRotation, Key: key, Message: msg}
}

// The example of the product document, "VaultSeed".
func keycloak() Object {
	return Object{
		Namespace: "vault-operator-system",
		Name:      "production-core-keycloak",
		Path:      "ohmlab/platforms/production/core/keycloak",
		Data: map[string]any{
			"admin": map[string]any{
				"username":       "admin",
				"password":       "<random:24>",
				"passwordHashed": "<bcrypt:admin.password>",
			},
			"clients": map[string]any{
				"grafana-core": map[string]any{"clientSecret": "<random:32>"},
			},
			"webhook": "",
		},
		Rotate: &Rotate{Token: "2026-10-12", Keys: []string{"admin.password"}},
	}
}

func TestAnalyseFull(t *testing.T) {
	tests := []struct {
		name string
		in   Object
		want Analysis
	}{
		{
			name: "product document example",
			in:   keycloak(),
			want: Analysis{
				Path: "ohmlab/platforms/production/core/keycloak",
				Leaves: map[string]Leaf{
					"admin.username":                    {Kind: KindPlain, Value: "admin"},
					"admin.password":                    {Kind: KindRandom, Template: "<random:24>", Length: 24},
					"admin.passwordHashed":              {Kind: KindBcrypt, Template: "<bcrypt:admin.password>", Source: "admin.password"},
					"clients.grafana-core.clientSecret": {Kind: KindRandom, Template: "<random:32>", Length: 32},
					"webhook":                           {Kind: KindPlain, Value: ""},
				},
				Keys:         []string{"admin.password", "admin.passwordHashed", "admin.username", "clients.grafana-core.clientSecret", "webhook"},
				RotationKeys: []string{"admin.password"},
			},
		},
		{
			name: "every kind, rotate every generated key, refs",
			in: Object{Path: own, Data: map[string]any{
				"s": "text", "b": true, "f": 1.5, "i": int64(3), "n": json.Number("4"), "int": 5,
				"r": "<random:8>", "h": "<hex:8>", "u": "<uuid>", "as": "<age:secret>", "ap": "<age:public>",
				"bc": "<bcrypt:r>", "x1": "<ref:m/b#k>", "x2": "<ref:m/a#k>", "x3": "<ref:m/b#j>", "self": "<ref:m/own#r>",
			}, Rotate: &Rotate{Token: "t"}},
			want: Analysis{
				Path: own,
				Leaves: map[string]Leaf{
					"s": {Kind: KindPlain, Value: "text"}, "b": {Kind: KindPlain, Value: true}, "f": {Kind: KindPlain, Value: 1.5},
					"i": {Kind: KindPlain, Value: int64(3)}, "n": {Kind: KindPlain, Value: json.Number("4")}, "int": {Kind: KindPlain, Value: 5},
					"r": {Kind: KindRandom, Template: "<random:8>", Length: 8}, "h": {Kind: KindHex, Template: "<hex:8>", Length: 8},
					"u": {Kind: KindUUID, Template: "<uuid>"}, "as": {Kind: KindAgeSecret, Template: "<age:secret>"},
					"ap": {Kind: KindAgePublic, Template: "<age:public>"}, "bc": {Kind: KindBcrypt, Template: "<bcrypt:r>", Source: "r"},
					"x1":   {Kind: KindRef, Template: "<ref:m/b#k>", Ref: Ref{Path: "m/b", Key: "k"}},
					"x2":   {Kind: KindRef, Template: "<ref:m/a#k>", Ref: Ref{Path: "m/a", Key: "k"}},
					"x3":   {Kind: KindRef, Template: "<ref:m/b#j>", Ref: Ref{Path: "m/b", Key: "j"}},
					"self": {Kind: KindRef, Template: "<ref:m/own#r>", Ref: Ref{Path: own, Key: "r"}},
				},
				Keys:         []string{"ap", "as", "b", "bc", "f", "h", "i", "int", "n", "r", "s", "self", "u", "x1", "x2", "x3"},
				RotationKeys: []string{"as", "h", "r", "u"},
				RefPaths:     []string{"m/a", "m/b"},
			},
		},
		{
			name: "no data",
			in:   Object{Path: own},
			want: Analysis{Path: own, Leaves: map[string]Leaf{}},
		},
		{
			name: "rotation without generated keys",
			in:   Object{Path: own, Data: map[string]any{"a": "x"}, Rotate: &Rotate{Token: "t"}},
			want: Analysis{Path: own, Leaves: map[string]Leaf{"a": {Kind: KindPlain, Value: "x"}}, Keys: []string{"a"}},
		},
		{
			name: "problems leave the rest analysed",
			in: Object{Path: own, Data: map[string]any{
				"bad": "<random:0>", "list": []any{"x"}, "ok": "<hex:4>", "a.b": map[string]any{"c": "<random:1>"},
			}, Rotate: &Rotate{Token: "t", Keys: []string{"ok", "bad"}}},
			want: Analysis{
				Path:   own,
				Leaves: map[string]Leaf{"ok": {Kind: KindHex, Template: "<hex:4>", Length: 4}},
				Keys:   []string{"ok"},
				Problems: []Problem{
					spec("a.b", `key name "a.b" contains a dot: nest maps instead`),
					spec("bad", errRandom+`, found "<random:0>"`),
					spec("list", "lists are not supported: leaves are strings, numbers or booleans, nodes are maps"),
				},
				RotationKeys: []string{"ok"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Analyse(tt.in)); diff != "" {
				t.Errorf("Analyse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnalyseProblems(t *testing.T) {
	type m = map[string]any
	long := strings.Repeat("x", 73)
	tests := []struct {
		name   string
		path   string // own when empty
		data   m
		rotate *Rotate
		want   []Problem
	}{
		// spec.path
		{name: "path empty", path: "-", want: []Problem{spec("", errPath)}},
		{name: "path one segment", path: "mount", want: []Problem{spec("", errPath)}},
		{name: "path empty segment", path: "m//p", want: []Problem{spec("", errPath)}},
		{name: "path with #", path: "m/p#k", want: []Problem{spec("", errPath)}},
		{name: "path with a dot segment", path: "m/./p", want: []Problem{spec("", errPath)}},
		{name: "path with a space", path: "m/p ", want: []Problem{spec("", errPath)}},
		{name: "a ref's bad path is the ref's problem", data: m{"a": "<ref:m/../p#k>"}, want: []Problem{spec("a", errRefPath+`, found "<ref:m/../p#k>"`)}},

		// Key names.
		{name: "empty key at top", data: m{"": "x"}, want: []Problem{spec("", "a key name at the top level of data is empty")}},
		{name: "empty key nested", data: m{"a": m{"": "x"}}, want: []Problem{spec("a", "a key name in this map is empty")}},
		{name: "dotted key at top", data: m{"a.b": "x"}, want: []Problem{spec("a.b", `key name "a.b" contains a dot: nest maps instead`)}},
		{name: "dotted key nested", data: m{"a": m{"b.c": "x"}}, want: []Problem{spec("a.b.c", `key name "b.c" contains a dot: nest maps instead`)}},
		{name: "a key name of 1024 characters is accepted", data: m{strings.Repeat("k", 1024): "x"}},
		{name: "a longer key name is refused, shown cut", data: m{"a": m{strings.Repeat("k", 1025): "x"}},
			want: []Problem{spec("a."+strings.Repeat("k", 32)+"...", "key name is 1025 characters long, more than 1024: kubectl get -o yaml cannot print a longer key")}},
		{name: "a control character in a key name", data: m{"pass\x1bword": "x"},
			want: []Problem{spec(`pass\x1bword`, `key name "pass\x1bword" contains the control or invisible character U+001B: a key that looks like another is refused`)}},
		{name: "a zero-width space in a key name", data: m{"pass\u200bword": "x", "password": "y"},
			want: []Problem{spec(`pass\u200bword`, `key name "pass\u200bword" contains the control or invisible character U+200B: a key that looks like another is refused`)}},
		{name: "a bidirectional override in a key name", data: m{"a\u202eb": "x"},
			want: []Problem{spec(`a\u202eb`, `key name "a\u202eb" contains the control or invisible character U+202E: a key that looks like another is refused`)}},
		{name: "a letter outside ASCII is a letter", data: m{"café": "x"}},
		{name: "two problems on one key, by message", data: m{"a.b": "<hex:3>"}, want: []Problem{
			spec("a.b", errHex+`, found "<hex:3>"`),
			spec("a.b", `key name "a.b" contains a dot: nest maps instead`),
		}},
		{name: "problems under a dotted key still reported", data: m{"a.b": m{"c": "<hex:3>", "d": nil}}, want: []Problem{
			spec("a.b", `key name "a.b" contains a dot: nest maps instead`),
			spec("a.b.c", errHex+`, found "<hex:3>"`),
			spec("a.b.d", `null is not a value: leaves are strings, numbers or booleans ("" for a value filled by hand)`),
		}},

		// Leaf types.
		{name: "null", data: m{"a": nil}, want: []Problem{spec("a", `null is not a value: leaves are strings, numbers or booleans ("" for a value filled by hand)`)}},
		{name: "list", data: m{"a": []any{"x"}}, want: []Problem{spec("a", "lists are not supported: leaves are strings, numbers or booleans, nodes are maps")}},
		{name: "typed list", data: m{"a": []string{"x"}}, want: []Problem{spec("a", "lists are not supported: leaves are strings, numbers or booleans, nodes are maps")}},
		{name: "empty list", data: m{"a": []any{}}, want: []Problem{spec("a", "lists are not supported: leaves are strings, numbers or booleans, nodes are maps")}},
		{name: "other type", data: m{"a": map[string]string{"b": "c"}}, want: []Problem{spec("a", "unsupported value type: leaves are strings, numbers or booleans, nodes are maps")}},
		{name: "empty map is fine", data: m{"a": m{}}},

		// Malformed templates (every error of ParseLeaf is one row of TestParseLeaf).
		{name: "malformed random", data: m{"a": "<random:x>"}, want: []Problem{spec("a", errRandom+`, found "<random:x>"`)}},
		{name: "malformed hex", data: m{"a": m{"b": "<hex:7>"}}, want: []Problem{spec("a.b", errHex+`, found "<hex:7>"`)}},
		{name: "malformed uuid", data: m{"a": "<uuid:4>"}, want: []Problem{spec("a", errUUID+`, found "<uuid:4>"`)}},
		{name: "malformed bcrypt", data: m{"a": "<bcrypt:>"}, want: []Problem{spec("a", errBcrypt+`, found "<bcrypt:>"`)}},
		{name: "malformed ref", data: m{"a": "<ref:m/p#>"}, want: []Problem{spec("a", errRef+`, found "<ref:m/p#>"`)}},
		{name: "unknown kind: not echoed, it may be a password", data: m{"a": "<foo:1>"}, want: []Problem{spec("a", errUnknown)}},

		// The template is named as typed, with what is expected (a
		// template is not a secret; a value of another shape is never
		// echoed).
		{name: "random 0, as typed", data: m{"a": "<random:0>"}, want: []Problem{spec("a", errRandom+`, found "<random:0>"`)}},
		{name: "a ref without a mount, as typed", data: m{"a": m{"b": "<ref:noslash>"}}, want: []Problem{spec("a.b", errRef+`, found "<ref:noslash>"`)}},
		{name: "age private, as typed", data: m{"a": "<age:private>"}, want: []Problem{spec("a", errAge+`, found "<age:private>"`)}},
		{name: "upper case: the lowercase template", data: m{"a": "<RANDOM:12>"}, want: []Problem{spec("a", `template kinds are lowercase: write "<random:12>", found "<RANDOM:12>"`)}},
		{name: "upper case and a bad argument", data: m{"a": "<Hex:3>"}, want: []Problem{spec("a", "template kinds are lowercase, and "+errHex+`, found "<Hex:3>"`)}},
		{name: "a control character is shown escaped", data: m{"a": "<random:8\x1b>"}, want: []Problem{spec("a", errRandom+`, found "<random:8\x1b>"`)}},
		{name: "a long template is shown cut", data: m{"a": "<bcrypt:a." + strings.Repeat("b", 200) + "..c>"}, want: []Problem{
			spec("a", errBcrypt+`, found "<bcrypt:a.`+strings.Repeat("b", 118)+`"...`)}},
		{name: "a password of a template's shape is not echoed", data: m{"a": "<Hunter2>"}, want: []Problem{spec("a", errUnknown)}},

		// bcrypt targets.
		{name: "bcrypt of a missing key", data: m{"h": "<bcrypt:pw>"}, want: []Problem{spec("h", `<bcrypt:pw> hashes pw, which data does not declare (a key filled by hand is declared as "")`)}},
		{name: "bcrypt of a map", data: m{"h": "<bcrypt:admin>", "admin": m{"pw": "x"}}, want: []Problem{spec("h", "<bcrypt:admin> hashes admin, which is a map, not a leaf")}},
		{name: "bcrypt of a bcrypt", data: m{"pw": "x", "h1": "<bcrypt:pw>", "h2": "<bcrypt:h1>"}, want: []Problem{spec("h2", "<bcrypt:h1> hashes h1, which is itself derived (<bcrypt:pw>): hash the key it derives from")}},
		{name: "bcrypt of itself", data: m{"h": "<bcrypt:h>"}, want: []Problem{spec("h", "<bcrypt:h> hashes h, which is itself derived (<bcrypt:h>): hash the key it derives from")}},
		{name: "bcrypt of random:73", data: m{"pw": "<random:73>", "h": "<bcrypt:pw>"}, want: []Problem{spec("h", "<bcrypt:pw> hashes pw, which is longer than 72 bytes, the most bcrypt accepts")}},
		{name: "bcrypt of hex:74", data: m{"pw": "<hex:74>", "h": "<bcrypt:pw>"}, want: []Problem{spec("h", "<bcrypt:pw> hashes pw, which is longer than 72 bytes, the most bcrypt accepts")}},
		{name: "bcrypt of a long plain value", data: m{"pw": long, "h": "<bcrypt:pw>"}, want: []Problem{spec("h", "<bcrypt:pw> hashes pw, which is longer than 72 bytes, the most bcrypt accepts")}},
		{name: "bcrypt of a copy of random:100", data: m{"pw": "<random:100>", "c": "<ref:m/own#pw>", "h": "<bcrypt:c>"}, want: []Problem{spec("h", "<bcrypt:c> hashes c, which is longer than 72 bytes, the most bcrypt accepts")}},
		{name: "bcrypt of a copy of a malformed key: one problem", data: m{"b": "<random:0>", "c": "<ref:m/own#b>", "h": "<bcrypt:c>"}, want: []Problem{spec("b", errRandom+`, found "<random:0>"`)}},
		{name: "bcrypt of a key copying itself: the cycle only", data: m{"c": "<ref:m/own#c>", "h": "<bcrypt:c>"}, want: []Problem{spec("c", "cycle of keys within this path: c -> c")}},
		{name: "bcrypt of a malformed key: one problem", data: m{"pw": "<random:0>", "h": "<bcrypt:pw>"}, want: []Problem{spec("pw", errRandom+`, found "<random:0>"`)}},
		{name: "bcrypt of random:72, hex:72, uuid, refs, numbers: fine", data: m{
			"r": "<random:72>", "x": "<hex:72>", "u": "<uuid>", "ref": "<ref:m/o#k>", "n": 1.0, "p": strings.Repeat("x", 72),
			"h1": "<bcrypt:r>", "h2": "<bcrypt:x>", "h3": "<bcrypt:u>", "h4": "<bcrypt:ref>", "h5": "<bcrypt:n>", "h6": "<bcrypt:p>"}},
		{name: "bcrypt of a placeholder: fine (Fill waits for it)", data: m{"pw": "", "h": "<bcrypt:pw>"}},

		// Key pairs: TestKeyPairAnalyse.

		// References to the own path.
		{name: "self ref to a missing key", data: m{"a": "<ref:m/own#b>"}, want: []Problem{spec("a", `<ref:m/own#b> copies b, which data does not declare (a key filled by hand is declared as "")`)}},
		{name: "self ref to a map", data: m{"a": "<ref:m/own#b>", "b": m{"c": "x"}}, want: []Problem{spec("a", "<ref:m/own#b> copies b, which is a map, not a leaf")}},
		{name: "self ref to itself", data: m{"a": "<ref:m/own#a>"}, want: []Problem{spec("a", "cycle of keys within this path: a -> a")}},
		{name: "self ref two-key cycle", data: m{"a": "<ref:m/own#b>", "b": "<ref:m/own#a>"}, want: []Problem{
			spec("a", "cycle of keys within this path: a -> b -> a"),
			spec("b", "cycle of keys within this path: a -> b -> a"),
		}},
		{name: "self ref through a bcrypt", data: m{"c": "<ref:m/own#h>", "h": "<bcrypt:c>"}, want: []Problem{
			spec("c", "cycle of keys within this path: c -> h -> c"),
			spec("h", "cycle of keys within this path: c -> h -> c"),
		}},
		{name: "self ref to a malformed key: one problem", data: m{"a": "<ref:m/own#b>", "b": "<uuid:1>"}, want: []Problem{spec("b", errUUID+`, found "<uuid:1>"`)}},
		{name: "self ref chain, to a ref and a derived key: fine", data: m{
			"a": "<ref:m/own#b>", "b": "<ref:m/own#c>", "c": "<random:8>", "d": "<ref:m/own#x>", "x": "<ref:m/other#k>",
			"h": "<bcrypt:c>", "e": "<ref:m/own#h>", "s": "<age:secret>", "p": "<age:public>", "q": "<ref:m/own#p>", "ph": "<ref:m/own#webhook>", "webhook": ""}},
		{name: "ref to another path's missing key: fine", data: m{"a": "<ref:m/other#nothing>"}},

		// Rotation.
		{name: "rotation token empty", data: m{"a": "<uuid>"}, rotate: &Rotate{}, want: []Problem{rot("", "spec.rotate "+RotateMessage)}},
		{name: "rotation token with a tab", data: m{"a": "<uuid>"}, rotate: &Rotate{Token: "2026\t11"}, want: []Problem{rot("", "spec.rotate.token "+TokenPrintableMessage)}},
		{name: "rotation token with a newline", data: m{"a": "<uuid>"}, rotate: &Rotate{Token: "2026-11\n"}, want: []Problem{rot("", "spec.rotate.token "+TokenPrintableMessage)}},
		{name: "rotation token with a zero-width space", data: m{"a": "<uuid>"}, rotate: &Rotate{Token: "a\u200bb"}, want: []Problem{rot("", "spec.rotate.token "+TokenPrintableMessage)}},
		{name: "rotation token of 512 bytes", data: m{"a": "<uuid>"}, rotate: &Rotate{Token: strings.Repeat("é", 256)}},
		{name: "rotation token of 513 bytes", data: m{"a": "<uuid>"}, rotate: &Rotate{Token: strings.Repeat("€", 171)}, want: []Problem{rot("", "spec.rotate.token "+TokenLengthMessage)}},
		{name: "rotation token of 513 bytes with a newline", data: m{"a": "<uuid>"}, rotate: &Rotate{Token: strings.Repeat("x", 512) + "\n"}, want: []Problem{
			rot("", "spec.rotate.token "+TokenLengthMessage), rot("", "spec.rotate.token "+TokenPrintableMessage)}},
		{name: "rotation of a missing key", data: m{"a": "<uuid>"}, rotate: &Rotate{Token: "t", Keys: []string{"b"}}, want: []Problem{rot("b", `rotate.keys names "b", which data does not declare`)}},
		{name: "rotation of an empty key name", data: m{"a": "<uuid>"}, rotate: &Rotate{Token: "t", Keys: []string{""}}, want: []Problem{rot("", `rotate.keys names "", which data does not declare`)}},
		{name: "rotation of a map", data: m{"a": m{"b": "<uuid>"}}, rotate: &Rotate{Token: "t", Keys: []string{"a"}}, want: []Problem{rot("a", "rotate.keys names a, which is a map: list its generated keys")}},
		{name: "rotation of a plain value", data: m{"a": "x"}, rotate: &Rotate{Token: "t", Keys: []string{"a"}}, want: []Problem{rot("a", "rotate.keys names a, which is a plain value, not generated: only <random:N>, <hex:N>, <password:N>, <vault-password:policy>, <uuid>, <age:secret>, <ssh:private> rotate")}},
		{name: "rotation of a placeholder", data: m{"a": ""}, rotate: &Rotate{Token: "t", Keys: []string{"a"}}, want: []Problem{rot("a", "rotate.keys names a, which is a plain value, not generated: only <random:N>, <hex:N>, <password:N>, <vault-password:policy>, <uuid>, <age:secret>, <ssh:private> rotate")}},
		{name: "rotation of a ref", data: m{"a": "<ref:m/o#k>"}, rotate: &Rotate{Token: "t", Keys: []string{"a"}}, want: []Problem{rot("a", "rotate.keys names a, which is <ref:m/o#k>, not generated: only <random:N>, <hex:N>, <password:N>, <vault-password:policy>, <uuid>, <age:secret>, <ssh:private> rotate")}},
		{name: "rotation of a bcrypt", data: m{"p": "x", "a": "<bcrypt:p>"}, rotate: &Rotate{Token: "t", Keys: []string{"a"}}, want: []Problem{rot("a", "rotate.keys names a, which is <bcrypt:p>, not generated: only <random:N>, <hex:N>, <password:N>, <vault-password:policy>, <uuid>, <age:secret>, <ssh:private> rotate")}},
		{name: "rotation of a malformed key: one problem", data: m{"a": "<random:0>"}, rotate: &Rotate{Token: "t", Keys: []string{"a"}}, want: []Problem{spec("a", errRandom+`, found "<random:0>"`)}},

		// Everything at once, sorted by key.
		{name: "all at once", path: "bad", data: m{"z": nil, "a.b": "x", "h": "<bcrypt:nope>", "p": "<age:public>"}, rotate: &Rotate{Keys: []string{"q"}}, want: []Problem{
			rot("", "spec.rotate "+RotateMessage),
			spec("", errPath),
			spec("a.b", `key name "a.b" contains a dot: nest maps instead`),
			spec("h", `<bcrypt:nope> hashes nope, which data does not declare (a key filled by hand is declared as "")`),
			spec("p", "<age:public> needs an <age:secret> in the same object"),
			rot("q", `rotate.keys names "q", which data does not declare`),
			spec("z", `null is not a value: leaves are strings, numbers or booleans ("" for a value filled by hand)`),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := own
			switch tt.path {
			case "":
			case "-":
				path = ""
			default:
				path = tt.path
			}
			got := Analyse(Object{Path: path, Data: tt.data, Rotate: tt.rotate})
			if diff := cmp.Diff(tt.want, got.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnalyseWarnings(t *testing.T) {
	type m = map[string]any
	warn := func(key, msg string) Problem { return Problem{Key: key, Message: msg} }
	const spaced = "is plain text, not the template <random:8>: with the white space around it the controller writes the text as it is; remove the white space to generate the value"
	tests := []struct {
		name string
		data map[string]any
		want []Problem
	}{
		{name: "templates and plain values", data: m{"a": "<random:8>", "c": "", "d": " ", "e": "<pass word>", "f": "a < b", "g": "mail <admin@example.org>"}},
		{name: "an empty map", data: m{"a": m{}, "b": m{"c": m{}}}, want: []Problem{
			warn("a", `is an empty map: it declares no key, so nothing is written for it; give it keys, or "" for a value filled by hand`),
			warn("b.c", `is an empty map: it declares no key, so nothing is written for it; give it keys, or "" for a value filled by hand`)}},
		{name: "a template inside other text", data: m{"b": "x <random:8>"}, want: []Problem{
			warn("b", "is plain text holding <random:8>: a template is a key's whole value, so the controller writes the text as it is; give the template a key of its own")}},
		{name: "a reference after '<<' in plain text", data: m{"b": "x <<ref:m/p#k>"}, want: []Problem{
			warn("b", "is plain text holding <ref:m/p#k> after '<<', which is a literal '<' only in a composed value: the controller writes the text as it is; write a single '<' before it to compose the reference's value into the text")}},
		{name: "a composed value: no warning", data: m{"b": "postgres://app:<ref:m/p#k>@db:5432/app", "c": "<<<ref:m/p#k>>"}},
		{name: "two templates in one value", data: m{"b": "<uuid><uuid>"}, want: []Problem{
			warn("b", "is plain text holding <uuid>: a template is a key's whole value, so the controller writes the text as it is; give the template a key of its own")}},
		{name: "a template never closed: the template to write", data: m{"b": "<random:8", "c": m{"d": "<ref:m/p#k"}}, want: []Problem{
			warn("b", "is plain text, the template <random:8> without its closing '>': it is stored in Vault literally, as typed, not generated; write <random:8> to generate the value"),
			warn("c.d", "is plain text, the template <ref:m/p#k> without its closing '>': it is stored in Vault literally, as typed, not generated; write <ref:m/p#k> to generate the value")}},
		{name: "the start of a template in other text: never the text", data: m{"b": "pre-<random:8", "c": "<random:x"}, want: []Problem{
			warn("b", "is plain text holding the start of a template, <random…, never closed: it is stored in Vault literally, as typed, not generated; to generate a value, make the template the key's whole value and close it with '>'"),
			warn("c", "is plain text holding the start of a template, <random…, never closed: it is stored in Vault literally, as typed, not generated; to generate a value, make the template the key's whole value and close it with '>'")}},
		{name: "a reference in other text never closed: the start of a template, named without the text", data: m{"b": "pre-<ref:m/p#k"}, want: []Problem{
			warn("b", "is plain text holding the start of a template, <ref…, never closed: it is stored in Vault literally, as typed, not generated; to generate a value, make the template the key's whole value and close it with '>'")}},
		{name: "a malformed reference in other text", data: m{"b": "postgres://app:<ref:m/x//p#k>@db/app", "c": "x<ref:m/\u0445/y#k>y"}, want: []Problem{
			warn("b", "is plain text holding a <ref: that is no reference (<ref:mount/path#key.path>, the path "+PathRule+"): the controller writes the text as it is; fix the reference to compose its source's value into the text"),
			warn("c", "is plain text holding a <ref: that is no reference (<ref:mount/path#key.path>, the path "+PathRule+"): the controller writes the text as it is; fix the reference to compose its source's value into the text")}},
		{name: "space before", data: m{"a": " <random:8>"}, want: []Problem{warn("a", spaced)}},
		{name: "space after", data: m{"a": "<random:8> "}, want: []Problem{warn("a", spaced)}},
		{name: "newline after", data: m{"a": "<random:8>\n"}, want: []Problem{warn("a", spaced)}},
		{name: "no-break space", data: m{"a": "\u00a0<random:8>"}, want: []Problem{warn("a", spaced)}},
		{name: "space inside the brackets", data: m{"a": "< random:8 >"}, want: []Problem{warn("a", spaced)}},
		{name: "nested, sorted by key", data: m{"z": " <uuid>", "a": m{"b": "<age:secret> "}}, want: []Problem{
			warn("a.b", "is plain text, not the template <age:secret>: with the white space around it the controller writes the text as it is; remove the white space to generate the value"),
			warn("z", "is plain text, not the template <uuid>: with the white space around it the controller writes the text as it is; remove the white space to generate the value"),
		}},
		{name: "a key YAML 1.1 made a boolean", data: m{"true": "x", "a": m{"false": "<uuid>"}, "yes": "y"}, want: []Problem{
			warn("a.false", `key name "false" is what YAML 1.1 makes of an unquoted on, off, yes, no, y or n: quote the key in the YAML if you meant that name`),
			warn("true", `key name "true" is what YAML 1.1 makes of an unquoted on, off, yes, no, y or n: quote the key in the YAML if you meant that name`),
		}},
		{name: "a plain value that looks like a secret: the key, never the value", data: m{"a": m{"token": "q7RzK2mX9vLp4TnW8bYc"}, "user": "admin", "url": "https://x.example/Ab1Cd2Ef3Gh4Ij5Kl6Mn7"},
			want: []Problem{warn("a.token", secretWarning)}},
		{name: "a malformed template is not named", data: m{"a": " <random:0>"}, want: []Problem{warn("a",
			"is plain text that looks like a template with white space around it: the controller writes the text as it is; remove the white space to make it a template")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Analyse(Object{Path: own, Data: tt.data})
			if got.Problems != nil {
				t.Fatalf("problems: %v", got.Problems)
			}
			if diff := cmp.Diff(tt.want, got.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnalyseRotationKeys(t *testing.T) {
	data := map[string]any{"r": "<random:8>", "a": map[string]any{"h": "<hex:2>"}, "s": "<age:secret>", "p": "<age:public>", "u": "<uuid>", "x": "plain"}
	tests := []struct {
		name   string
		rotate *Rotate
		want   []string
	}{
		{name: "no rotate", rotate: nil, want: nil},
		{name: "every generated key", rotate: &Rotate{Token: "t"}, want: []string{"a.h", "r", "s", "u"}},
		{name: "listed keys, sorted", rotate: &Rotate{Token: "t", Keys: []string{"u", "a.h"}}, want: []string{"a.h", "u"}},
		{name: "duplicates once", rotate: &Rotate{Token: "t", Keys: []string{"r", "r"}}, want: []string{"r"}},
		{name: "invalid keys left out", rotate: &Rotate{Token: "t", Keys: []string{"x", "r", "nope"}}, want: []string{"r"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Analyse(Object{Path: own, Data: data, Rotate: tt.rotate})
			if diff := cmp.Diff(tt.want, got.RotationKeys); diff != "" {
				t.Errorf("RotationKeys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		name string
		in   Problem
		want string
	}{
		{name: "with key", in: spec("a.b", "broken"), want: "a.b: broken"},
		{name: "without key", in: spec("", "broken"), want: "broken"},
		{name: "object is not part of it", in: Problem{Reason: ReasonRefCycle, Object: "ns/n", Message: "cycle"}, want: "cycle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPrintableKey(t *testing.T) {
	for _, tt := range []struct {
		name, key, want string
	}{
		{"ASCII kept", "smtp.password", "smtp.password"},
		{"printable non-ASCII kept", "café.日本", "café.日本"},
		{"bidirectional override escaped", "a\u202eb", `a\u202eb`},
		{"zero-width space escaped", "\u200bx", `\u200bx`},
		{"control character escaped", "a\x1bb", `a\x1bb`},
		{"an escape already written stays as written", `\u202e`, `\u202e`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := PrintableKey(tt.key); got != tt.want {
				t.Errorf("PrintableKey(%q) = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
}
