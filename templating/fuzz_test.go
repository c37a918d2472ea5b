package templating

import (
	"bytes"
	"encoding/json"
	"errors"
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
	} {
		f.Add(s)
	}
	known := []string{errRandom, errHex, errUUID, errAge, errSSH, errBcrypt, errRef, errRefPath, errUnknown}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLeaf(s)
		if err != nil {
			// Messages are fixed sentences: they cannot carry the input.
			if !slices.Contains(known, err.Error()) {
				t.Fatalf("unexpected message %q", err)
			}
			if l != (Leaf{}) {
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
		case l.Template != s:
			t.Fatalf("template %q of %q", l.Template, s)
		case l.Kind == KindRandom && (l.Length < 1 || l.Length > 4096),
			l.Kind == KindHex && (l.Length < 2 || l.Length > 4096 || l.Length%2 != 0),
			l.Kind == KindBcrypt && !validKeyPath(l.Source),
			l.Kind == KindRef && (!ValidPath(l.Ref.Path) || !validKeyPath(l.Ref.Key)):
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
			v, err := Generator{Rand: constReader(0)}.Generate(l)
			if err != nil || (l.Length > 0 && len(v) != l.Length) {
				t.Fatalf("Generate(%+v) = %q, %v", l, v, err)
			}
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
		refs := map[string]string{}
		for k, l := range a.Leaves {
			if l.Kind == KindRef && l.Ref.Path != path {
				refs[k] = "v"
			}
		}
		g := Generator{Rand: constReader(1), BcryptCost: bcrypt.MinCost}
		res, err := g.Fill(t.Context(), a, FillInput{Refs: refs, Regenerate: a.RotationKeys})
		if err != nil {
			var empty *EmptySourceError
			var invalid *InvalidValueError
			if !errors.As(err, &empty) && !errors.As(err, &invalid) {
				t.Fatalf("Fill: %v", err)
			}
			return
		}
		current := applyFill(map[string]any{}, res)
		again, err := g.Fill(t.Context(), a, FillInput{Current: current, Refs: refs})
		if err != nil || again.Changes != nil {
			var b bytes.Buffer
			json.NewEncoder(&b).Encode(again.Changes)
			t.Fatalf("second Fill: %v, changes %s", err, b.String())
		}
	})
}
