package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestCostAndSizeVerdicts: an object that costs more to fill than one
// reconcile allows (bcrypt hashes and key pairs over the limit), or whose
// references copy more than Vault takes in one write from the values of
// the objects they name, gets the same refusal, naming the count and the
// limit, from the admission handler and from `ohmlab validate`.
func TestCostAndSizeVerdicts(t *testing.T) {
	seedDoc := func(name, data string) string {
		return "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata:\n  name: " + name + "\n  namespace: vo\nspec:\n  path: ohmlab/" + name + "\n  data:\n" + data
	}
	// hashed declares n passwords, each with its bcrypt hash.
	hashed := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "    p%04d: \"<random:16>\"\n    h%04d: \"<bcrypt:p%04d>\"\n", i, i, i)
		}
		return b.String()
	}
	copies := func(n int, ref string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "    k%05d: \"<ref:%s>\"\n", i, ref)
		}
		return b.String()
	}
	tooCostly := func(n int) string {
		return fmt.Sprintf("spec.data: declares %d bcrypt hashes and key pairs, more than the 100 one object may: bcrypt is slow by design, "+
			"and each reconcile computes or checks every one of them within its time; split the keys over several objects", n)
	}
	source := seedDoc("source", "    large: \"<random:4096>\"\n    byhand: \"\"\n")
	tests := []struct {
		name     string
		existing []string
		obj      string
		want     []string
	}{
		{name: "100 bcrypt hashes", obj: seedDoc("x", hashed(100))},
		{name: "101 bcrypt hashes", obj: seedDoc("x", hashed(101)), want: []string{tooCostly(101)}},
		{name: "5,000 bcrypt hashes", obj: seedDoc("x", hashed(5000)), want: []string{tooCostly(5000)}},
		{name: "99 bcrypt hashes and two key pairs", obj: seedDoc("x", hashed(99)+
			"    age:\n      s: \"<age:secret>\"\n      p: \"<age:public>\"\n    ssh:\n      s: \"<ssh:private>\"\n      p: \"<ssh:public>\"\n"),
			want: []string{tooCostly(101)}},
		{name: "9,000 copies of another object's <random:4096>", existing: []string{source}, obj: seedDoc("x", copies(9000, "ohmlab/source#large")),
			want: []string{"spec.data: the values of the path come to at least 35.3 MiB of JSON, counting the values its references copy from other objects' paths, " +
				"more than the 32 MiB Vault accepts in one request (its listener's max_request_size): split the keys over several objects"}},
		{name: "9,000 copies of a key filled by hand", existing: []string{source}, obj: seedDoc("x", copies(9000, "ohmlab/source#byhand"))},
		{name: "9,000 copies of a path no object declares", obj: seedDoc("x", copies(9000, "ohmlab/by-hand#large"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh := webhookVerdict(t, tt.existing, tt.obj)
			cli, _ := cliVerdict(t, tt.existing, tt.obj, "x")
			// Warnings differ on purpose for objects this large (the CLI
			// also warns of their YAML text's size): only the refusals are
			// compared.
			if diff := cmp.Diff(wh.Problems, cli.Problems, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("refusals differ (-webhook +cli):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, wh.Problems, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
			if wh.Allowed != (len(tt.want) == 0) || cli.Allowed != wh.Allowed {
				t.Errorf("admitted by the webhook: %v, by the CLI: %v; want %v", wh.Allowed, cli.Allowed, len(tt.want) == 0)
			}
		})
	}
}
