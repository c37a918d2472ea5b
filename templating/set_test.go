package templating

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// seed returns an object ns/name on path whose key k<i> refers to each of
// refs ("path#key").
func seed(ns, name, path string, refs ...string) Object {
	data := map[string]any{"own": "<random:8>"}
	for i, r := range refs {
		data[fmt.Sprintf("k%d", i)] = "<ref:" + r + ">"
	}
	return Object{Namespace: ns, Name: name, Path: path, Data: data}
}

func TestAnalyseSet(t *testing.T) {
	// key is the key of obj whose reference leads on along the ring.
	cycle := func(obj, key, msg string) Problem {
		return Problem{Reason: ReasonRefCycle, Object: obj, Key: key, Message: msg}
	}
	tests := []struct {
		name string
		in   []Object
		want []Problem
	}{
		{name: "none", in: nil},
		{name: "independent objects", in: []Object{seed("ns", "a", "m/a"), seed("ns", "b", "m/b", "m/a#own")}},
		{name: "ref to an undeclared path is fine", in: []Object{seed("ns", "a", "m/a", "m/hand-made#k")}},
		{name: "self refs are not cycles", in: []Object{seed("ns", "a", "m/a", "m/a#own")}},
		{name: "chain without cycle", in: []Object{seed("ns", "a", "m/a", "m/b#own"), seed("ns", "b", "m/b", "m/c#own"), seed("ns", "c", "m/c")}},
		{name: "per-object problems are not reported", in: []Object{{Name: "a", Path: "m/a", Data: map[string]any{"x": nil}}}},
		{name: "duplicate path", in: []Object{seed("ns", "a", "m/p"), seed("other", "b", "m/p")}, want: []Problem{
			{Reason: ReasonDuplicatePath, Object: "ns/a", Message: "path m/p is also declared by other/b"},
			{Reason: ReasonDuplicatePath, Object: "other/b", Message: "path m/p is also declared by ns/a"},
		}},
		{name: "path on three objects", in: []Object{seed("ns", "c", "m/p"), seed("ns", "a", "m/p"), seed("ns", "b", "m/p")}, want: []Problem{
			{Reason: ReasonDuplicatePath, Object: "ns/a", Message: "path m/p is also declared by ns/b, ns/c"},
			{Reason: ReasonDuplicatePath, Object: "ns/b", Message: "path m/p is also declared by ns/a, ns/c"},
			{Reason: ReasonDuplicatePath, Object: "ns/c", Message: "path m/p is also declared by ns/a, ns/b"},
		}},
		{name: "invalid paths left to Analyse", in: []Object{seed("ns", "a", ""), seed("ns", "b", "")}},
		{name: "duplicate name", in: []Object{seed("ns", "a", "m/a"), seed("ns", "a", "m/b"), seed("other", "a", "m/c")}, want: []Problem{
			{Reason: ReasonDuplicateName, Object: "ns/a", Message: "ns/a is declared 2 times"},
		}},
		{name: "duplicate name without namespace", in: []Object{seed("", "a", "m/a"), seed("", "a", "m/b"), seed("", "a", "m/c")}, want: []Problem{
			{Reason: ReasonDuplicateName, Object: "a", Message: "a is declared 3 times"},
		}},
		{name: "two-path cycle", in: []Object{seed("ns", "x", "a/x", "a/y#own"), seed("ns", "y", "a/y", "a/x#own")}, want: []Problem{
			cycle("ns/x", "k0", "reference cycle: a/x -> a/y -> a/x"),
			cycle("ns/y", "k0", "reference cycle: a/x -> a/y -> a/x"),
		}},
		{name: "three-path cycle in order from the smallest path", in: []Object{
			seed("ns", "c", "m/c", "m/a#own"), seed("ns", "b", "m/b", "m/c#own"), seed("ns", "a", "m/a", "m/b#own"), seed("ns", "d", "m/d", "m/a#own"),
		}, want: []Problem{
			cycle("ns/a", "k0", "reference cycle: m/a -> m/b -> m/c -> m/a"),
			cycle("ns/b", "k0", "reference cycle: m/a -> m/b -> m/c -> m/a"),
			cycle("ns/c", "k0", "reference cycle: m/a -> m/b -> m/c -> m/a"),
		}},
		{name: "two rings through one path", in: []Object{
			seed("ns", "a", "m/a", "m/b#own", "m/c#own"), seed("ns", "b", "m/b", "m/a#own"), seed("ns", "c", "m/c", "m/a#own"),
		}, want: []Problem{
			cycle("ns/a", "k0", "reference cycle: m/a -> m/b -> m/a"),
			cycle("ns/b", "k0", "reference cycle: m/a -> m/b -> m/a"),
			cycle("ns/c", "k0", "reference cycle: m/a -> m/c -> m/a"),
		}},
		{name: "shortest ring of a component", in: []Object{
			seed("ns", "a", "m/a", "m/b#own"), seed("ns", "b", "m/b", "m/c#own", "m/a#own"), seed("ns", "c", "m/c", "m/a#own"),
		}, want: []Problem{
			cycle("ns/a", "k0", "reference cycle: m/a -> m/b -> m/a"),
			cycle("ns/b", "k1", "reference cycle: m/a -> m/b -> m/a"),
			cycle("ns/c", "k0", "reference cycle: m/a -> m/b -> m/c -> m/a"),
		}},
		{name: "ring with a way out", in: []Object{
			seed("ns", "a", "m/a", "m/b#own", "m/c#own"), seed("ns", "b", "m/b", "m/a#own"), seed("ns", "c", "m/c"),
		}, want: []Problem{
			cycle("ns/a", "k0", "reference cycle: m/a -> m/b -> m/a"),
			cycle("ns/b", "k0", "reference cycle: m/a -> m/b -> m/a"),
		}},
		{name: "two separate cycles", in: []Object{
			seed("ns", "a", "m/a", "m/b#own"), seed("ns", "b", "m/b", "m/a#own"), seed("ns", "c", "m/c", "m/d#own"), seed("ns", "d", "m/d", "m/c#own"),
		}, want: []Problem{
			cycle("ns/a", "k0", "reference cycle: m/a -> m/b -> m/a"),
			cycle("ns/b", "k0", "reference cycle: m/a -> m/b -> m/a"),
			cycle("ns/c", "k0", "reference cycle: m/c -> m/d -> m/c"),
			cycle("ns/d", "k0", "reference cycle: m/c -> m/d -> m/c"),
		}},
		{name: "cycle and duplicate path together", in: []Object{
			seed("ns", "a", "m/a", "m/b#own"), seed("ns", "a2", "m/a"), seed("ns", "b", "m/b", "m/a#own"),
		}, want: []Problem{
			{Reason: ReasonDuplicatePath, Object: "ns/a", Message: "path m/a is also declared by ns/a2"},
			cycle("ns/a", "k0", "reference cycle: m/a -> m/b -> m/a"),
			{Reason: ReasonDuplicatePath, Object: "ns/a2", Message: "path m/a is also declared by ns/a"},
			cycle("ns/a2", "", "reference cycle: m/a -> m/b -> m/a"),
			cycle("ns/b", "k0", "reference cycle: m/a -> m/b -> m/a"),
		}},
		{name: "two keys on to the next path: one problem each", in: []Object{
			seed("ns", "a", "m/a", "m/b#own", "m/b#own"), seed("ns", "b", "m/b", "m/a#own"),
		}, want: []Problem{
			cycle("ns/a", "k0", "reference cycle: m/a -> m/b -> m/a"),
			cycle("ns/a", "k1", "reference cycle: m/a -> m/b -> m/a"),
			cycle("ns/b", "k0", "reference cycle: m/a -> m/b -> m/a"),
		}},
		{name: "malformed refs are ignored", in: []Object{
			{Name: "a", Path: "m/a", Data: map[string]any{"k": "<ref:m/b>"}}, seed("", "b", "m/b", "m/a#own"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, AnalyseSet(tt.in)); diff != "" {
				t.Errorf("AnalyseSet (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRingsLongChain(t *testing.T) {
	// A 100,000-node ring: the iterative search does not grow the stack.
	g := graph{}
	const n = 100000
	for i := range n {
		g.add(fmt.Sprintf("n%06d", i), fmt.Sprintf("n%06d", (i+1)%n))
	}
	rings := g.rings()
	if len(rings) != n {
		t.Fatalf("%d nodes on rings, want %d", len(rings), n)
	}
	if r := rings["n050000"]; len(r) != n || r[0] != "n000000" {
		t.Errorf("ring of %d nodes starting at %s, want %d starting at n000000", len(r), r[0], n)
	}
}

func TestAnalyseSetLongRingMessageIsBounded(t *testing.T) {
	const n = 50
	objs := make([]Object, n)
	for i := range objs {
		objs[i] = Object{Namespace: "ns", Name: fmt.Sprintf("o%02d", i), Path: fmt.Sprintf("m/p%02d", i),
			Data: map[string]any{"k": fmt.Sprintf("<ref:m/p%02d#k>", (i+1)%n)}}
	}
	problems := AnalyseSet(objs)
	if len(problems) != n {
		t.Fatalf("got %d problems, want one per object in the ring", len(problems))
	}
	want := "reference cycle: m/p00 -> m/p01 -> m/p02 -> m/p03 -> m/p04 -> m/p05 -> m/p06 -> m/p07 -> m/p08 -> m/p09 -> (40 more) -> m/p00"
	for _, p := range problems {
		if p.Message != want {
			t.Fatalf("message = %q, want %q", p.Message, want)
		}
	}
}
