package templating

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func FuzzParseLeaf(f *testing.F) {
	for _, s := range []string{
		"", "x", "<", ">", "<>", "<<>>", "<random:24>", "<random:0>", "<random:4097>", "<random:x>",
		"<hex:64>", "<hex:7>", "<uuid>", "<uuid:4>", "<age:secret>", "<age:public>", "<age:private>",
		"<ssh:private>", "<ssh:public>", "<ssh:secret>", "<ssh:public:me@host>", "<ssh>",
		"<bcrypt:admin.password>", "<bcrypt:>", "<bcrypt:a..b>", "<ref:m/p#k.l>", "<ref:path-without-key>",
		"<ref:onlymount#k>", "<foo:1>", "<Random:8>", "a<random:8>", "<random:8><hex:2>", "<ref:m/p#k#x>",
		"<random:99999999999999999999>", "<\x00:1>", "<ünïcode:1>",
		"<ref:m/../p#k>", "<ref:m/p q#k>", "<ref:m/p%2F#k>", " <random:8>", "<uuid>\n", "< random:8 >",
		"pre-<random:8>", "<random:8", "<uuid<hex:2>", "<RANDOM:12>", "<Hex:3>", "<ref:noslash>", "<AGE:x>",
		"<password:24>", "<password:2>", "<password:4:upper,lower,digit,symbol>", "<password:8:symbol=!#,:>",
		"<password:8:symbol=>", "<password:8:symbol=aa>", "<password:8:symbol=>>", "<password:8:symbol=<>", "<password:8:upper,upper>", "<password:8:>", "<Password:8>",
		"<password:4096:digit>", "<password:3:symbol,symbol=!>", "<vault-password:app>", "<vault-password:a/b>",
		"<vault-password:>", "<vault-password>", "<Vault-Password:x>",
	} {
		f.Add(s)
	}
	known := []string{errRandom, errHex, errUUID, errAge, errSSH, errBcrypt, errRef, errRefPath, errUnknown,
		errPasswordLength, errPasswordClasses, errPasswordShort, errPasswordEmpty, errPasswordSymbols, errVaultPassword}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLeaf(s)
		if err != nil {
			// Messages are fixed sentences: they cannot carry the input.
			if !slices.Contains(known, err.Error()) && !composedMessage(err.Error(), s) {
				t.Fatalf("unexpected message %q", err)
			}
			if !reflect.ValueOf(l).IsZero() {
				t.Fatalf("leaf %+v with an error", l)
			}
			// Analyse's message shows s only when its kind is a
			// template's, in any case; never the text of an unknown kind.
			msg := malformedMessage(s, err)
			name, _, _, _ := templateShape(s)
			if known := knownKind(strings.ToLower(name)); !known && msg != err.Error() || known && !strings.Contains(msg, ", found \"") {
				t.Fatalf("message %q of %q", msg, s)
			}
			return
		}
		switch {
		case l.Kind == KindPlain:
			if l.Value != s || l.Template != "" {
				t.Fatalf("plain leaf %+v of %q", l, s)
			}
		case l.Kind == KindCompose:
			if got := recompose(l); got != s || l.Template != "" || l.Value != nil {
				t.Fatalf("composed leaf %+v of %q reads back as %q", l, s, got)
			}
		case l.Template != s:
			t.Fatalf("template %q of %q", l.Template, s)
		case l.Kind == KindRandom && (l.Length < 1 || l.Length > 4096),
			l.Kind == KindHex && (l.Length < 2 || l.Length > 4096 || l.Length%2 != 0),
			l.Kind == KindBcrypt && !validKeyPath(l.Source),
			l.Kind == KindRef && (!ValidPath(l.Ref.Path) || !validKeyPath(l.Ref.Key)),
			l.Kind == KindPassword && (l.Length < 1 || l.Length > 4096 || l.Length < l.Classes.count() || l.Classes == 0 ||
				(l.Classes&ClassSymbol != 0) != (l.Symbols != "") || l.Symbols != "" && !validSymbols(l.Symbols)),
			l.Kind == KindVaultPassword && !validPolicyName(l.Policy):
			t.Fatalf("invalid leaf %+v accepted", l)
		}
		if tmpl, ok := LooksLikeTemplate(s); ok {
			if l.Kind != KindPlain {
				t.Fatalf("LooksLikeTemplate(%q) of a template", s)
			}
			if t2, err := ParseLeaf(tmpl); tmpl != "" && (err != nil || t2.Kind == KindPlain) {
				t.Fatalf("LooksLikeTemplate(%q) = %q, which is not a template", s, tmpl)
			}
		}
		if tmpl, ok := EmbeddedTemplate(s); ok {
			// It names a template found in s, or the start of one, and
			// nothing else of s.
			if l.Kind != KindPlain {
				t.Fatalf("EmbeddedTemplate(%q) of a template", s)
			}
			if t2, err := ParseLeaf(tmpl); !strings.HasSuffix(tmpl, "…") && (err != nil || t2.Kind == KindPlain || !strings.Contains(s, tmpl)) {
				t.Fatalf("EmbeddedTemplate(%q) = %q, which is not a template of it", s, tmpl)
			}
		}
		if l.Generated() {
			v, err := Generator{Rand: constReader(0), Dry: l.Kind == KindVaultPassword}.Generate(l)
			if err != nil || (l.Length > 0 && len(v) != l.Length) {
				t.Fatalf("Generate(%+v) = %q, %v", l, v, err)
			}
		}
	})
}

// FuzzPasswordTemplate: a password template, as any other leaf, is refused
// with a message that names its key and shows the template as typed; one
// accepted generates its length from its classes, each present.
func FuzzPasswordTemplate(f *testing.F) {
	for _, s := range []string{
		"24", "2", "3", "4097", "0", "8:upper", "8:upper,lower,digit,symbol", "3:upper,lower,digit,symbol",
		"8:symbol=!#,:", "8:symbol=", "8:symbol=!!", "8:symbol=a", "8:lower,symbol=~", "8:,", "8:digit,", "8:upper,upper",
		"8:symbol,symbol=-", "8:symbol=-,upper", "x:upper", "8:UPPER", "8:symbol=\"'`$",
	} {
		f.Add("password", s)
	}
	for _, s := range []string{"app", "a/b", "", ".", "..", "a b", "p.q_r-s"} {
		f.Add("vault-password", s)
	}
	f.Fuzz(func(t *testing.T, kind, args string) {
		if kind != "password" && kind != "vault-password" {
			return
		}
		tmpl := "<" + kind + ":" + args + ">"
		a := Analyse(Object{Path: "m/p", Data: map[string]any{"app": map[string]any{"secret": tmpl}}})
		l, err := ParseLeaf(tmpl)
		if err != nil || l.Kind == KindPlain {
			// Refused, or not template-shaped ('<' or '>' in args): a
			// plain value, never stored as a password silently.
			if err != nil && (len(a.Problems) != 1 || a.Problems[0].Key != "app.secret" || a.Problems[0].Reason != ReasonInvalidSpec ||
				!strings.HasPrefix(a.Problems[0].Message, err.Error()+", found \"<"+kind)) {
				t.Fatalf("%q refused with %v; problems %+v, want one naming app.secret", tmpl, err, a.Problems)
			}
			return
		}
		if a.Problems != nil {
			t.Fatalf("%q accepted by ParseLeaf, refused by Analyse: %+v", tmpl, a.Problems)
		}
		if l.Kind != KindPassword {
			return
		}
		v, err := Generator{Rand: &seqReader{next: byte(len(args))}}.Generate(l)
		if err != nil || len(v) != l.Length {
			t.Fatalf("Generate(%q): %d characters, %v", tmpl, len(v), err)
		}
		sets := l.Classes.sets(l.Symbols)
		for _, set := range sets {
			if !strings.ContainsAny(v, set) {
				t.Fatalf("Generate(%q) lacks a class", tmpl)
			}
		}
		if strings.Trim(v, strings.Join(sets, "")) != "" {
			t.Fatalf("Generate(%q) holds a character outside its classes", tmpl)
		}
	})
}

// pathRule is the CRD's validation of spec.path (api/v1alpha1), which
// ValidPath must agree with: the same regular expression and the same
// refusal of "." and ".." segments.
var pathRule = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)+$`)

func FuzzValidPath(f *testing.F) {
	for _, s := range []string{
		"m/p", "ohmlab/platforms/production/core/keycloak", "m/./p", "m/../p", "./p", "m/...", "m/.a", "/m/p", "m/p/",
		"m//p", "m/p q", " m/p", "m/p?x", "m/p%2e", "m/p#k", "m/+/*", "m/caf\u00e9", "m/p\x00", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got := ValidPath(p)
		dots := slices.ContainsFunc(strings.Split(p, "/"), func(s string) bool { return s == "." || s == ".." })
		if want := len(p) <= MaxPathLength && pathRule.MatchString(p) && !dots; got != want {
			t.Fatalf("ValidPath(%q) = %v, the CRD's rule says %v", p, got, want)
		}
		if strings.ContainsAny(p, "#<>") {
			return
		}
		// The path of a reference follows the same rule.
		l, err := ParseLeaf("<ref:" + p + "#k>")
		if (err == nil) != got || (err == nil && l.Ref.Path != p) {
			t.Fatalf("ParseLeaf of a reference to %q: %+v, %v; ValidPath says %v", p, l, err, got)
		}
	})
}

func FuzzAnalyse(f *testing.F) {
	f.Add(`{"admin":{"username":"admin","password":"<random:24>","passwordHashed":"<bcrypt:admin.password>"},"webhook":""}`, "ohmlab/platforms/p/core/keycloak", "admin.password")
	f.Add(`{"s":"<age:secret>","p":"<age:public>","x":"<ref:m/o#k>","c":"<ref:m/own#s>"}`, "m/own", "")
	f.Add(`{"k":{"private":"<ssh:private>","public":"<ssh:public>"},"s":"<age:secret>","p":"<age:public>","c":"<ref:m/own#k.public>"}`, "m/own", "k.private,s")
	f.Add(`{"a":"<ssh:public>","b":"<ssh:private>","c":"<ssh:private>","h":"<bcrypt:b>"}`, "m/own", "a")
	f.Add(`{"a":"<ref:m/own#b>","b":"<ref:m/own#a>","h":"<bcrypt:h>","n":null,"l":[1],"a.b":1,"":true}`, "m/own", "a,b,,n")
	f.Add(`{"pw":"","h":"<bcrypt:pw>","k":{"x":1.5,"y":12345678901234567890}}`, "m", "pw")
	f.Add(`{"a":{"b":{"c":{"d":"<hex:8>"}}},"e":"<uuid>","f":"<foo:1>"}`, "m/own", "a.b.c.d,e")
	f.Add(`{"a":" <random:8>","b":"<ref:m/../p#k>","c":"< uuid >"}`, "m/./own", "")
	f.Add(`{"pw":"<password:16:upper,symbol=!#>","h":"<bcrypt:pw>","v":"<vault-password:app>","w":"<password:2>"}`, "m/own", "pw,v")
	f.Add(`{"url":"pg://<ref:m/own#u>:<ref:m/o#p>@h","u":"<random:8>","h":"<bcrypt:url>","c":"<ref:m/own#url>"}`, "m/own", "u")
	f.Fuzz(func(t *testing.T, data, path, keys string) {
		var tree map[string]any
		dec := json.NewDecoder(strings.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&tree) != nil {
			return
		}
		o := Object{Namespace: "ns", Name: "n", Path: path, Data: tree}
		if keys != "" {
			o.Rotate = &Rotate{Token: "t", Keys: strings.Split(keys, ",")}
		}
		a := Analyse(o)
		warningsSorted := slices.IsSortedFunc(a.Warnings, func(p, q Problem) int { return strings.Compare(p.Key, q.Key) })
		if !slices.IsSorted(a.Keys) || len(a.Keys) != len(a.Leaves) || !slices.IsSorted(a.RefPaths) || !slices.IsSorted(a.RotationKeys) || !warningsSorted {
			t.Fatalf("unsorted or inconsistent analysis: %+v", a)
		}
		for _, k := range a.Keys {
			if _, ok := a.Leaves[k]; !ok {
				t.Fatalf("key %q without leaf", k)
			}
		}
		AnalyseSet([]Object{o, o})
		if a.Problems != nil {
			return
		}
		// A valid object fills without panic, and a filled path is quiet.
		refs, sources := map[string]string{}, map[Ref]string{}
		for k, l := range a.Leaves {
			if l.Kind == KindRef && l.Ref.Path != path {
				refs[k] = "v"
			}
			if l.Kind == KindCompose {
				for _, r := range l.Refs() {
					sources[r] = "v"
				}
			}
		}
		g := Generator{Rand: constReader(1), BcryptCost: bcrypt.MinCost,
			VaultPassword: func(context.Context, string) (string, error) { return "v", nil }}
		res, err := g.Fill(t.Context(), a, FillInput{Refs: refs, Sources: sources, Regenerate: a.RotationKeys})
		if err != nil {
			var empty *EmptySourceError
			var invalid *InvalidValueError
			if !errors.As(err, &empty) && !errors.As(err, &invalid) {
				t.Fatalf("Fill: %v", err)
			}
			return
		}
		current := applyFill(map[string]any{}, res)
		again, err := g.Fill(t.Context(), a, FillInput{Current: current, Refs: refs, Sources: sources})
		if err != nil || again.Changes != nil {
			var b bytes.Buffer
			json.NewEncoder(&b).Encode(again.Changes)
			t.Fatalf("second Fill: %v, changes %s", err, b.String())
		}
	})
}
