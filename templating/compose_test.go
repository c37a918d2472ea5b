package templating

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recompose writes a composed leaf back as typed: "<<" for each '<' of
// its text, each reference as its template.
func recompose(l Leaf) string {
	var b strings.Builder
	for _, p := range l.Parts {
		if p.IsRef() {
			b.WriteString(p.Ref.Template())
			continue
		}
		b.WriteString(strings.ReplaceAll(p.Text, "<", "<<"))
	}
	return b.String()
}

// composedMessage says whether msg is one of the refusals of a composed
// value s: a fixed sentence, or one followed by a reference or template
// found in s as typed, never other text of s.
func composedMessage(msg, s string) bool {
	switch msg {
	case errComposeUnclosed, errComposeLone:
		return true
	}
	for n := MaxComposedRefs + 1; n <= len(s); n++ {
		if msg == errComposeMany(n) {
			return true
		}
	}
	head, typed, ok := strings.Cut(msg, ", found ")
	if !ok {
		return false
	}
	t, err := strconv.Unquote(strings.TrimSuffix(typed, "..."))
	if err != nil || !strings.HasPrefix(t, "<") || strings.Count(t, "<") != 1 || !strings.Contains(s, t) {
		return false
	}
	if head == errComposeOther {
		return true
	}
	rule, ok := strings.CutPrefix(head, errComposeRef)
	return ok && (rule == errRef || rule == errRefPath)
}

func TestParseComposed(t *testing.T) {
	const db = "ohmlab/platforms/prod/core/db"
	ref := func(path, key string) Part { return Part{Ref: Ref{Path: path, Key: key}} }
	text := func(s string) Part { return Part{Text: s} }
	tests := []struct {
		name    string
		in      string
		want    Leaf
		wantErr string
	}{
		{name: "a connection string", in: "postgres://app:<ref:" + db + "#password>@db:5432/app",
			want: Leaf{Kind: KindCompose, Parts: []Part{text("postgres://app:"), ref(db, "password"), text("@db:5432/app")}}},
		{name: "several references, two to one source, and one to the own path", in: "<ref:m/u#name>:<ref:" + db + "#password>@<ref:m/own#host>/<ref:m/u#name>",
			want: Leaf{Kind: KindCompose, Parts: []Part{ref("m/u", "name"), text(":"), ref(db, "password"), text("@"), ref("m/own", "host"), text("/"), ref("m/u", "name")}}},
		{name: "two references side by side", in: "<ref:m/a#x><ref:m/b#y>",
			want: Leaf{Kind: KindCompose, Parts: []Part{ref("m/a", "x"), ref("m/b", "y")}}},
		{name: "<< is a literal '<', '>' outside a reference is literal", in: "a<<b>c <ref:m/a#x> <<<ref:m/b#y>>",
			want: Leaf{Kind: KindCompose, Parts: []Part{text("a<b>c "), ref("m/a", "x"), text(" <"), ref("m/b", "y"), text(">")}}},
		{name: "white space around one reference", in: "<ref:m/a#x>\n",
			want: Leaf{Kind: KindCompose, Parts: []Part{ref("m/a", "x"), text("\n")}}},
		{name: "MaxComposedRefs references", in: strings.Repeat("<ref:m/a#x>-", MaxComposedRefs),
			want: Leaf{Kind: KindCompose, Parts: func() []Part {
				var ps []Part
				for range MaxComposedRefs {
					ps = append(ps, ref("m/a", "x"), text("-"))
				}
				return ps
			}()}},

		// Not composed: plain as before, with the warnings they had.
		{name: "no reference", in: "a < b > c", want: Leaf{Kind: KindPlain, Value: "a < b > c"}},
		{name: "another template in text", in: "pre-<random:8>", want: Leaf{Kind: KindPlain, Value: "pre-<random:8>"}},
		{name: "a reference written after <<", in: "x<<ref:m/a#x>", want: Leaf{Kind: KindPlain, Value: "x<<ref:m/a#x>"}},
		{name: "a reference never closed alone", in: "pre-<ref:m/a#x", want: Leaf{Kind: KindPlain, Value: "pre-<ref:m/a#x"}},
		{name: "a malformed reference alone", in: "x<ref:noslash>y", want: Leaf{Kind: KindPlain, Value: "x<ref:noslash>y"}},
		{name: "a reference in another case", in: "x<REF:m/a#x>", want: Leaf{Kind: KindPlain, Value: "x<REF:m/a#x>"}},

		// Composed and refused: never stored as text.
		{name: "a lone '<'", in: "a<b<ref:m/a#x>", wantErr: errComposeLone},
		{name: "a lone '<' at the end", in: "<ref:m/a#x><", wantErr: errComposeLone},
		{name: "a template of another kind", in: "<random:8>-<ref:m/a#x>", wantErr: errComposeOther + `, found "<random:8>"`},
		{name: "a reference never closed beside one", in: "<ref:m/a#x>-<ref:m/b#y", wantErr: errComposeUnclosed},
		{name: "a malformed reference beside one", in: "<ref:m/a#x>-<ref:noslash>", wantErr: errComposeRef + errRef + `, found "<ref:noslash>"`},
		{name: "a reference's bad path beside one", in: "<ref:m/a#x>-<ref:m/../p#k>", wantErr: errComposeRef + errRefPath + `, found "<ref:m/../p#k>"`},
		{name: "an upper-case template beside one", in: "<ref:m/a#x>-<Random:8>", wantErr: errComposeLone},
		{name: "more than MaxComposedRefs references", in: strings.Repeat("<ref:m/a#x>", MaxComposedRefs+1), wantErr: errComposeMany(MaxComposedRefs + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLeaf(tt.in)
			if errString(err) != tt.wantErr {
				t.Fatalf("error %q, want %q", errString(err), tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("leaf (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnalyseComposed: a composed value reads its sources as a reference
// does (RefPaths, the own path's keys checked, cycles of keys), is refused
// naming its key, and warns without the old "a template is a key's whole
// value".
func TestAnalyseComposed(t *testing.T) {
	type m = map[string]any
	spec := func(key, msg string) Problem { return Problem{Reason: ReasonInvalidSpec, Key: key, Message: msg} }
	warn := func(key, msg string) Problem { return Problem{Key: key, Message: msg} }
	tests := []struct {
		name      string
		data      m
		rotate    *Rotate
		problems  []Problem
		warnings  []Problem
		refPaths  []string
		fillOrder []string
	}{
		{name: "a connection string reads its source's path, without warning",
			data:     m{"db": m{"url": "postgres://app:<ref:m/pg#password>@db:5432/app"}},
			refPaths: []string{"m/pg"}},
		{name: "its own path's keys come first in the fill",
			data:      m{"a": "<ref:m/own#z>:<ref:m/own#y>", "y": "<random:8>", "z": "user"},
			fillOrder: []string{"z", "y", "a"}},
		{name: "an own key it names must be declared and a leaf",
			data: m{"url": "<ref:m/own#nope>@<ref:m/own#db>", "db": m{"x": "1"}},
			problems: []Problem{
				spec("url", "<ref:m/own#db> copies db, which is a map, not a leaf"),
				spec("url", `<ref:m/own#nope> copies nope, which data does not declare (a key filled by hand is declared as "")`)}},
		{name: "a cycle of keys through a composed value",
			data: m{"a": "x<ref:m/own#b>", "b": "<ref:m/own#a>"},
			problems: []Problem{
				spec("a", "cycle of keys within this path: a -> b -> a"),
				spec("b", "cycle of keys within this path: a -> b -> a")}},
		{name: "a composed value refers to itself",
			data:     m{"a": "x<ref:m/own#a>"},
			problems: []Problem{spec("a", "cycle of keys within this path: a -> a")}},
		{name: "refused, naming the key, never the text",
			data: m{"a": "hunter2<random:8><ref:m/pg#p>", "b": "hunter2<x<ref:m/pg#p>"},
			problems: []Problem{
				spec("a", errComposeOther+`, found "<random:8>"`),
				spec("b", errComposeLone)}},
		{name: "a composed value is not generated: rotate.keys cannot name it",
			data:     m{"a": "x<ref:m/pg#p>", "g": "<random:8>"},
			rotate:   &Rotate{Token: "t", Keys: []string{"a"}},
			problems: []Problem{{Reason: ReasonInvalidRotation, Key: "a", Message: "rotate.keys names a, which is a composed value, not generated: only " + GeneratedTemplates + " rotate"}},
			refPaths: []string{"m/pg"}},
		{name: "white space around one reference: composed, with a warning naming the reference",
			data:     m{"a": "<ref:m/pg#p>\n", "b": " <ref:m/pg#p>"},
			refPaths: []string{"m/pg"},
			warnings: []Problem{
				warn("a", "is <ref:m/pg#p> with white space around it: a composed value, the source's value with that white space; remove the white space to copy the source exactly"),
				warn("b", "is <ref:m/pg#p> with white space around it: a composed value, the source's value with that white space; remove the white space to copy the source exactly")}},
		{name: "text that looks like a secret",
			data:     m{"a": "<ref:m/pg#user>:q7RzK2mX9vLp4TnW8bYc"},
			refPaths: []string{"m/pg"},
			warnings: []Problem{warn("a", composedSecretWarning)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Analyse(Object{Path: "m/own", Data: tt.data, Rotate: tt.rotate})
			if diff := cmp.Diff(tt.problems, a.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.warnings, a.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if tt.problems == nil {
				if diff := cmp.Diff(tt.refPaths, a.RefPaths); diff != "" {
					t.Errorf("RefPaths (-want +got):\n%s", diff)
				}
			}
			if tt.fillOrder != nil {
				order, _ := fillOrder(a)
				if diff := cmp.Diff(tt.fillOrder, order); diff != "" {
					t.Errorf("fill order (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestAnalyseSetComposed: a cycle between paths through a composed key is
// RefCycle on that key.
func TestAnalyseSetComposed(t *testing.T) {
	objs := []Object{
		{Namespace: "ns", Name: "app", Path: "m/app", Data: map[string]any{"url": "postgres://u:<ref:m/db#password>@db", "plain": "x"}},
		{Namespace: "ns", Name: "db", Path: "m/db", Data: map[string]any{"password": "<ref:m/app#plain>"}},
	}
	want := []Problem{
		{Reason: ReasonRefCycle, Object: "ns/app", Key: "url", Message: "reference cycle: m/app -> m/db -> m/app"},
		{Reason: ReasonRefCycle, Object: "ns/db", Key: "password", Message: "reference cycle: m/app -> m/db -> m/app"},
	}
	if diff := cmp.Diff(want, AnalyseSet(objs)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestComposedSize: a composed value counts its text and its sources'
// values, as copies count theirs.
func TestComposedSize(t *testing.T) {
	src := Object{Namespace: "ns", Name: "src", Path: "m/src", Data: map[string]any{"big": "<random:4096>"}}
	// 300 keys, each composing the 4096 characters 16 times: about 19 MiB,
	// more than raft's 1 MiB entry.
	data := map[string]any{}
	for i := range 300 {
		data["k"+strconv.Itoa(i)] = strings.Repeat("<ref:m/src#big>", MaxComposedRefs)
	}
	dst := Object{Namespace: "ns", Name: "dst", Path: "m/dst", Data: data}
	if a := Analyse(dst); a.Problems != nil || a.Warnings != nil {
		t.Fatalf("alone, its sources are unknown: %v %v", a.Problems, a.Warnings)
	}
	_, warnings := SetSizes([]Object{src, dst})
	if len(warnings) != 1 || warnings[0].Object != "ns/dst" || !strings.Contains(warnings[0].Message, "at least 18.8 MiB of JSON, counting the values its references copy") {
		t.Errorf("warnings %+v, want one for ns/dst counting 18.8 MiB", warnings)
	}
	own := Object{Path: "m/own", Data: map[string]any{"pw": "<random:4096>", "url": strings.Repeat("<ref:m/own#pw>", MaxComposedRefs)}}
	for i := range 20 {
		own.Data["u"+strconv.Itoa(i)] = own.Data["url"]
	}
	if a := Analyse(own); len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0].Message, "1.3 MiB") {
		t.Errorf("warnings %+v, want one of 1.3 MiB: the own path's sources counted", a.Warnings)
	}
}

// TestFillComposed: a composed key is created from its sources, follows
// them, is put back after a hand edit, and waits for each source missing
// or empty.
func TestFillComposed(t *testing.T) {
	type m = map[string]any
	pw := Ref{Path: "m/pg", Key: "password"}
	host := Ref{Path: "m/pg", Key: "host"}
	data := m{"url": "postgres://<ref:m/own#user>:<ref:m/pg#password>@<ref:m/pg#host>/app", "user": "app"}
	a := Analyse(Object{Path: "m/own", Data: data})
	if a.Problems != nil {
		t.Fatal(a.Problems)
	}
	type want struct {
		values  m
		changes []Change
		held    []*EmptySourceError
	}
	tests := []struct {
		name    string
		current m
		sources map[Ref]string
		want    want
	}{
		{name: "created, with the own path's user created in the same fill",
			sources: map[Ref]string{pw: "s3cret", host: "db"},
			want: want{values: m{"url": "postgres://app:s3cret@db/app", "user": "app"},
				changes: []Change{{Key: "url", Action: ActionCreateField}, {Key: "user", Action: ActionCreateField}}}},
		{name: "equal to its composition: nothing",
			current: m{"url": "postgres://app:s3cret@db/app", "user": "app"},
			sources: map[Ref]string{pw: "s3cret", host: "db"},
			want:    want{values: m{}}},
		{name: "a source rotated: updated",
			current: m{"url": "postgres://app:s3cret@db/app", "user": "app"},
			sources: map[Ref]string{pw: "rotated", host: "db"},
			want:    want{values: m{"url": "postgres://app:rotated@db/app"}, changes: []Change{{Key: "url", Action: ActionUpdateField}}}},
		{name: "a hand edit put back, and the own path's source as the path holds it",
			current: m{"url": "edited", "user": "someone"},
			sources: map[Ref]string{pw: "s3cret", host: "db"},
			want:    want{values: m{"url": "postgres://someone:s3cret@db/app"}, changes: []Change{{Key: "url", Action: ActionUpdateField}}}},
		{name: "every source missing or empty held, in order",
			current: m{"url": "old", "user": ""},
			sources: map[Ref]string{host: ""},
			want: want{values: m{}, held: []*EmptySourceError{
				{Key: "url", Source: "user"}, {Key: "url", Source: "m/pg#password"}, {Key: "url", Source: "m/pg#host"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Generator{Rand: constReader(0)}.Fill(context.Background(), a, FillInput{Current: tt.current, Sources: tt.sources})
			if err != nil {
				t.Fatal(err)
			}
			var held []*EmptySourceError
			for _, h := range res.Held {
				held = append(held, EmptySources(h.Err)...)
			}
			got := want{values: res.Values, changes: res.Changes, held: held}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("fill (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzComposedLeaf: a key whose value holds <ref: and other text is
// composed, refused with a message naming the key, or plain; never a
// panic. A composed one reads back as typed, fills from its sources as
// the text with each source's value, and is quiet once filled.
func FuzzComposedLeaf(f *testing.F) {
	for _, s := range [][2]string{
		{"postgres://app:", "@db:5432/app"}, {"", ""}, {"a<<b", ">c"}, {"<", ""}, {"", "<"}, {"<random:8>", ""},
		{"<ref:m/p", ""}, {"", "<ref:noslash>"}, {"<<ref:m/p#k>", ""}, {"<ref:m/own#k>", "<ref:m/p#k>"}, {" ", "\n"},
		{strings.Repeat("<ref:m/p#k>", MaxComposedRefs), ""}, {"\x00", "\xff"}, {"<ref:m/p#k", ">"},
	} {
		f.Add(s[0], "m/src#password", s[1])
	}
	f.Fuzz(func(t *testing.T, before, ref, after string) {
		s := before + "<ref:" + ref + ">" + after
		a := Analyse(Object{Path: "m/own", Data: map[string]any{"app": map[string]any{"url": s}, "k": "own"}})
		l, err := ParseLeaf(s)
		if err != nil {
			if len(a.Problems) == 0 {
				t.Fatalf("%q refused by ParseLeaf (%v), accepted by Analyse", s, err)
			}
			for _, p := range a.Problems {
				if p.Key != "app.url" || p.Reason != ReasonInvalidSpec || p.Message == "" {
					t.Fatalf("%q: problem %+v does not name app.url", s, p)
				}
			}
			if !composedMessage(err.Error(), s) && a.Problems[0].Message != malformedMessage(s, err) {
				t.Fatalf("%q: message %q", s, err)
			}
			return
		}
		if l.Kind != KindCompose || a.Problems != nil {
			return
		}
		if recompose(l) != s {
			t.Fatalf("%q reads back as %q", s, recompose(l))
		}
		sources := map[Ref]string{}
		for _, r := range l.Refs() {
			sources[r] = "v(" + r.String() + ")"
		}
		var want strings.Builder
		for _, p := range l.Parts {
			switch {
			case !p.IsRef():
				want.WriteString(p.Text)
			case p.Ref == (Ref{Path: "m/own", Key: "k"}):
				want.WriteString("own")
			case p.Ref.Path == "m/own":
				return // another own key: not declared, refused above
			default:
				want.WriteString(sources[p.Ref])
			}
		}
		g := Generator{Rand: constReader(1)}
		res, err := g.Fill(context.Background(), a, FillInput{Sources: sources})
		if err != nil || res.Held != nil || res.Values["app.url"] != want.String() {
			t.Fatalf("%q filled as %q (held %v, %v), want %q", s, res.Values["app.url"], res.Held, err, want.String())
		}
		again, err := g.Fill(context.Background(), a, FillInput{Current: res.Values, Sources: sources})
		if err != nil || again.Changes != nil {
			t.Fatalf("%q: a second fill changes %v (%v)", s, again.Changes, err)
		}
	})
}
