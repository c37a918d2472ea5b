package templating

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPathSize(t *testing.T) {
	many := func(n int, leaf any) map[string]any {
		data := map[string]any{}
		for i := range n {
			data[fmt.Sprintf("k%05d", i)] = leaf
		}
		return data
	}
	const (
		secret  = "a plain value typed by hand"
		warning = "the values of the path come to at least 1.2 MiB of JSON, more than the 1 MiB Vault's integrated storage (raft) keeps in one entry by default (max_entry_size; Consul: 512 KiB): the write fails on such a Vault; split the keys over several objects"
	)
	tests := []struct {
		name         string
		data         map[string]any
		wantProblems []Problem
		wantWarnings []Problem
	}{
		{name: "a usual object", data: map[string]any{"admin": map[string]any{"password": "<random:24>", "hash": "<bcrypt:admin.password>"}, "age": "<age:secret>", "user": secret}},
		{name: "under 1 MiB: 250 keys of <random:4096>", data: many(250, "<random:4096>")},
		{name: "over 1 MiB: 300 keys of <random:4096>", data: many(300, "<random:4096>"),
			wantWarnings: []Problem{{Message: warning}}},
		{name: "plain values count", data: map[string]any{"a": strings.Repeat("x", 600<<10), "b": strings.Repeat("y", 600<<10)},
			wantWarnings: []Problem{{Message: warning}}},
		{name: "references do not: their source's size is not known", data: many(3000, "<ref:m/other#k>")},
		{name: "over 32 MiB is refused: 9,000 keys of <random:4096>", data: many(9000, "<random:4096>"),
			wantProblems: []Problem{{Reason: ReasonInvalidSpec, Message: "the values of the path come to at least 35.3 MiB of JSON, more than the 32 MiB Vault accepts in one request (its listener's max_request_size): split the keys over several objects"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Analyse(Object{Name: "n", Path: "m/p", Data: tt.data})
			if diff := cmp.Diff(tt.wantProblems, a.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			var got []Problem
			for _, w := range a.Warnings {
				if w.Key == "" {
					got = append(got, w)
				}
			}
			if diff := cmp.Diff(tt.wantWarnings, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSetSizes: a reference counts as its source key's declared value when
// an object of the set declares the source's path, so references that fan
// one large value out over a path are refused at admission; a source the
// set does not declare counts nothing.
func TestSetSizes(t *testing.T) {
	obj := func(name, path string, data map[string]any) Object {
		return Object{Namespace: "ns", Name: name, Path: path, Data: data}
	}
	large := obj("large", "m/large", map[string]any{"v": "<random:4096>", "hand": "", "chain": "<ref:m/large#v>", "plain": strings.Repeat("x", 4000)})
	const (
		refused = "the values of the path come to at least 35.3 MiB of JSON, counting the values its references copy from other objects' paths, " +
			"more than the 32 MiB Vault accepts in one request (its listener's max_request_size): split the keys over several objects"
		warned = "the values of the path come to at least 1.2 MiB of JSON, counting the values its references copy from other objects' paths, " +
			"more than the 1 MiB Vault's integrated storage (raft) keeps in one entry by default (max_entry_size; Consul: 512 KiB): " +
			"the write fails on such a Vault; split the keys over several objects"
	)
	tests := []struct {
		name                   string
		objs                   []Object
		wantProblems, wantWarn []Problem
	}{
		{name: "9,000 copies of a <random:4096> are refused",
			objs:         []Object{large, obj("fan", "m/fan", refs(9000, "<ref:m/large#v>"))},
			wantProblems: []Problem{{Reason: ReasonInvalidSpec, Object: "ns/fan", Message: refused}}},
		{name: "300 copies warn", objs: []Object{large, obj("fan", "m/fan", refs(300, "<ref:m/large#v>"))},
			wantWarn: []Problem{{Object: "ns/fan", Message: warned}}},
		{name: "a copy of a copy counts as the value it copies", objs: []Object{large, obj("fan", "m/fan", refs(9000, "<ref:m/large#chain>"))},
			wantProblems: []Problem{{Reason: ReasonInvalidSpec, Object: "ns/fan", Message: refused}}},
		{name: "a plain value counts as itself", objs: []Object{large, obj("fan", "m/fan", refs(300, "<ref:m/large#plain>"))},
			wantWarn: []Problem{{Object: "ns/fan", Message: strings.Replace(warned, "1.2 MiB", "1.1 MiB", 1)}}},
		{name: "a key filled by hand is not known", objs: []Object{large, obj("fan", "m/fan", refs(9000, "<ref:m/large#hand>"))}},
		{name: "a key the source does not declare is not known", objs: []Object{large, obj("fan", "m/fan", refs(9000, "<ref:m/large#other>"))}},
		{name: "a path no object declares is not known", objs: []Object{obj("fan", "m/fan", refs(9000, "<ref:m/large#v>"))}},
		{name: "a path two objects declare is not known",
			objs: []Object{large, obj("twin", "m/large", map[string]any{"v": "<uuid>"}), obj("fan", "m/fan", refs(9000, "<ref:m/large#v>"))}},
		{name: "a ring of references is not known, and ends", objs: []Object{
			obj("a", "m/a", map[string]any{"k": "<ref:m/b#k>"}),
			obj("b", "m/b", map[string]any{"k": "<ref:m/a#k>"}),
			obj("fan", "m/fan", refs(9000, "<ref:m/a#k>")),
		}},
		{name: "an object over the bound alone is Analyse's, not reported twice", objs: []Object{large,
			obj("fan", "m/fan", withKeys(refs(9000, "<random:4096>"), "c", "<ref:m/large#v>"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			problems, warnings := SetSizes(tt.objs)
			if diff := cmp.Diff(tt.wantProblems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWarn, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// A reference to the object's own path counts as the key it copies.
func TestPathSizeOwnReferences(t *testing.T) {
	data := refs(9000, "<ref:m/p#v>")
	data["v"] = "<random:4096>"
	a := Analyse(Object{Name: "n", Path: "m/p", Data: data})
	want := []Problem{{Reason: ReasonInvalidSpec, Message: "the values of the path come to at least 35.3 MiB of JSON, more than the 32 MiB Vault accepts in one request (its listener's max_request_size): split the keys over several objects"}}
	if diff := cmp.Diff(want, a.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// refs declares n keys of the same template.
func refs(n int, template string) map[string]any {
	data := map[string]any{}
	for i := range n {
		data[fmt.Sprintf("k%05d", i)] = template
	}
	return data
}
