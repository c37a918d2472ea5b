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
