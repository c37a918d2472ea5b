package templating

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFlatten(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]any
		want map[string]any
	}{
		{name: "nil", in: nil, want: map[string]any{}},
		{name: "flat", in: map[string]any{"a": "1", "b": true}, want: map[string]any{"a": "1", "b": true}},
		{name: "nested", in: map[string]any{"admin": map[string]any{"username": "admin", "password": "x"}, "n": json.Number("3")},
			want: map[string]any{"admin.username": "admin", "admin.password": "x", "n": json.Number("3")}},
		{name: "deep", in: map[string]any{"a": map[string]any{"b": map[string]any{"c": "d"}}}, want: map[string]any{"a.b.c": "d"}},
		{name: "empty map vanishes", in: map[string]any{"a": map[string]any{}, "b": "x"}, want: map[string]any{"b": "x"}},
		{name: "non-leaf values kept", in: map[string]any{"l": []any{"x"}, "n": nil}, want: map[string]any{"l": []any{"x"}, "n": nil}},
		{name: "a dotted hand-made key is left out, the nested path read", in: map[string]any{"a.b": 1.0, "a": map[string]any{"b": 2.0}}, want: map[string]any{"a.b": 2.0}},
		{name: "a dotted key inside a map is left out", in: map[string]any{"a": map[string]any{"b.c": 1.0, "d": 2.0}}, want: map[string]any{"a.d": 2.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Flatten(tt.in)); diff != "" {
				t.Errorf("Flatten (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHidden(t *testing.T) {
	type m = map[string]any
	tests := []struct {
		name string
		in   m
		want []HiddenKey
	}{
		{name: "nothing hidden", in: m{"a": m{"b": "x"}, "c": "y"}},
		{name: "a map of dotted keys only", in: m{"app": m{"spring.datasource.password": "typed"}},
			want: []HiddenKey{{Path: "app.spring.datasource.password", Name: `app."spring.datasource.password"`}}},
		{name: "a dotted key at the top, with a map under it", in: m{"a.b": m{"c": "x"}, "d": "y"},
			want: []HiddenKey{{Path: "a.b", Name: `"a.b"`}}},
		{name: "a mixed map: only the dotted key", in: m{"app": m{"name": "n", "spring.x": "t"}},
			want: []HiddenKey{{Path: "app.spring.x", Name: `app."spring.x"`}}},
		{name: "empty maps, at the top and inside a map", in: m{"e": m{}, "a": m{"x": m{}}},
			want: []HiddenKey{{Path: "a.x", Name: "a.x", EmptyMap: true}, {Path: "e", Name: "e", EmptyMap: true}}},
		{name: "sorted by path", in: m{"z.z": "1", "a": m{"b.c": "2", "d": m{"e.f": "3"}}},
			want: []HiddenKey{{Path: "a.b.c", Name: `a."b.c"`}, {Path: "a.d.e.f", Name: `a.d."e.f"`}, {Path: "z.z", Name: `"z.z"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Hidden(tt.in)); diff != "" {
				t.Errorf("Hidden (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAt(t *testing.T) {
	type m = map[string]any
	tree := m{"a": m{"b": "x", "e": m{}}, "s": "y", "d.e": "z"}
	tests := []struct {
		key    string
		want   any
		wantOK bool
	}{
		{key: "a.b", want: "x", wantOK: true},
		{key: "a", want: m{"b": "x", "e": m{}}, wantOK: true},
		{key: "a.e", want: m{}, wantOK: true},
		{key: "s", want: "y", wantOK: true},
		{key: "a.c"},
		{key: "s.t"},
		{key: "d.e"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, ok := At(tree, tt.key)
			if ok != tt.wantOK {
				t.Fatalf("At(%q) found %v, want %v", tt.key, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("At(%q) (-want +got):\n%s", tt.key, diff)
			}
		})
	}
}

func TestSetPath(t *testing.T) {
	tests := []struct {
		name string
		tree map[string]any
		key  string
		v    any
		want map[string]any
	}{
		{name: "top", tree: map[string]any{}, key: "a", v: "x", want: map[string]any{"a": "x"}},
		{name: "creates maps", tree: map[string]any{}, key: "a.b.c", v: "x", want: map[string]any{"a": map[string]any{"b": map[string]any{"c": "x"}}}},
		{name: "keeps siblings", tree: map[string]any{"a": map[string]any{"k": "1"}}, key: "a.b", v: true, want: map[string]any{"a": map[string]any{"k": "1", "b": true}}},
		{name: "overwrites a leaf", tree: map[string]any{"a": "old"}, key: "a", v: "new", want: map[string]any{"a": "new"}},
		{name: "replaces a value in the way", tree: map[string]any{"a": "old"}, key: "a.b", v: "x", want: map[string]any{"a": map[string]any{"b": "x"}}},
		{name: "keeps a dotted sibling", tree: map[string]any{"a": map[string]any{"b.c": "typed"}}, key: "a.b", v: "x",
			want: map[string]any{"a": map[string]any{"b.c": "typed", "b": "x"}}},
		{name: "keeps a dotted key that spells the key", tree: map[string]any{"a.b": "typed"}, key: "a.b", v: "x",
			want: map[string]any{"a.b": "typed", "a": map[string]any{"b": "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetPath(tt.tree, tt.key, tt.v)
			if diff := cmp.Diff(tt.want, tt.tree); diff != "" {
				t.Errorf("tree (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeletePath(t *testing.T) {
	tests := []struct {
		name string
		tree map[string]any
		key  string
		want map[string]any
	}{
		{name: "top", tree: map[string]any{"a": "x", "b": "y"}, key: "a", want: map[string]any{"b": "y"}},
		{name: "removes emptied parents", tree: map[string]any{"a": map[string]any{"b": map[string]any{"c": "x"}}, "d": "y"}, key: "a.b.c", want: map[string]any{"d": "y"}},
		{name: "keeps non-empty parents", tree: map[string]any{"a": map[string]any{"b": "x", "c": "y"}}, key: "a.b", want: map[string]any{"a": map[string]any{"c": "y"}}},
		{name: "missing key", tree: map[string]any{"a": map[string]any{"c": "y"}}, key: "a.b", want: map[string]any{"a": map[string]any{"c": "y"}}},
		{name: "missing parent", tree: map[string]any{"a": "x"}, key: "b.c", want: map[string]any{"a": "x"}},
		{name: "leaf in the way", tree: map[string]any{"a": "x"}, key: "a.b", want: map[string]any{"a": "x"}},
		{name: "a whole map", tree: map[string]any{"a": map[string]any{"b": "x"}}, key: "a", want: map[string]any{}},
		{name: "keeps a parent that holds only a dotted key", tree: map[string]any{"a": map[string]any{"b": "x", "c.d": "typed"}}, key: "a.b",
			want: map[string]any{"a": map[string]any{"c.d": "typed"}}},
		{name: "keeps a parent that holds only an empty map", tree: map[string]any{"a": map[string]any{"b": "x", "e": map[string]any{}}}, key: "a.b",
			want: map[string]any{"a": map[string]any{"e": map[string]any{}}}},
		{name: "keeps a dotted key that spells the key", tree: map[string]any{"a.b": "typed", "a": map[string]any{"b": "x"}}, key: "a.b",
			want: map[string]any{"a.b": "typed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			DeletePath(tt.tree, tt.key)
			if diff := cmp.Diff(tt.want, tt.tree); diff != "" {
				t.Errorf("tree (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFlattenSetPathRoundTrip(t *testing.T) {
	tree := map[string]any{"a": map[string]any{"b": "1", "c": map[string]any{"d": true}}, "e": json.Number("2")}
	rebuilt := map[string]any{}
	for k, v := range Flatten(tree) {
		SetPath(rebuilt, k, v)
	}
	if diff := cmp.Diff(tree, rebuilt); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestStringify(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{name: "string", in: "s", want: "s"},
		{name: "empty", in: "", want: ""},
		{name: "json number", in: json.Number("1.50"), want: "1.50"},
		{name: "true", in: true, want: "true"},
		{name: "false", in: false, want: "false"},
		{name: "int", in: 42, want: "42"},
		{name: "int64", in: int64(-7), want: "-7"},
		{name: "whole float", in: 3.0, want: "3"},
		{name: "float", in: 0.5, want: "0.5"},
		{name: "big float", in: 1e21, want: "1e+21"},
		{name: "NaN", in: math.NaN(), want: "NaN"},
		{name: "nil", in: nil, want: ""},
		{name: "other", in: []any{"x"}, want: "[x]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Stringify(tt.in); got != tt.want {
				t.Errorf("Stringify(%#v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
