package reconcilers

import (
	"context"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

func TestShardSelectorAndLease(t *testing.T) {
	tests := []struct {
		name      string
		shard     string
		wantLease string
		matches   map[string]bool // label value ("-" for no label) -> selected
	}{
		{
			name: "no shard: the objects without the label, the Lease of an unsharded install", shard: "",
			wantLease: "ohmlab-controller-vault",
			matches:   map[string]bool{"-": true, "a": false, "": false},
		},
		{
			name: "shard a: only the objects labelled a", shard: "a",
			wantLease: "ohmlab-controller-vault-a",
			matches:   map[string]bool{"-": false, "a": true, "b": false, "": false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LeaseName("vault", tt.shard); got != tt.wantLease {
				t.Errorf("LeaseName = %q, want %q", got, tt.wantLease)
			}
			sel, err := ShardSelector(tt.shard)
			if err != nil {
				t.Fatal(err)
			}
			for value, want := range tt.matches {
				set := labels.Set{"app": "x"}
				if value != "-" {
					set["ohmlab.fr/shard"] = value
				}
				if got := sel.Matches(set); got != want {
					t.Errorf("selector %q on %v = %v, want %v", sel, set, got, want)
				}
			}
		})
	}
}

func TestLoadVaultConfigShard(t *testing.T) {
	const base = "namespaces: [a]\nbackend: {address: x}\n"
	tests := []struct {
		name    string
		shard   string
		wantErr string
	}{
		{name: "no shard", shard: ""},
		{name: "a DNS label", shard: "team-a1"},
		{name: "upper case is not a Lease name", shard: "A", wantErr: `targets.vault.shard: "A" is not a valid shard name (the value of the label ohmlab.fr/shard and part of the Lease name ohmlab-controller-vault-A): a lowercase RFC 1123 label`},
		{name: "a dot", shard: "a.b", wantErr: `targets.vault.shard: "a.b" is not a valid shard name`},
		{name: "a slash", shard: "a/b", wantErr: `targets.vault.shard: "a/b" is not a valid shard name`},
		{name: "too long", shard: "a123456789012345678901234567890123456789012345678901234567890123", wantErr: "must be no more than 63 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			section := base
			if tt.shard != "" {
				section += "shard: " + `"` + tt.shard + `"` + "\n"
			}
			got, err := LoadVaultConfig([]byte(section))
			if !wantError(t, err, tt.wantErr) {
				return
			}
			if got.Shard != tt.shard {
				t.Errorf("Shard = %q, want %q", got.Shard, tt.shard)
			}
		})
	}
}

// TestLoadVaultConfigShards: the list of the shards that run keeps the
// difference between absent (an older chart: nil, the webhook gives no
// warning of an unrun shard) and empty (no shard runs), and names a bad
// entry by its index.
func TestLoadVaultConfigShards(t *testing.T) {
	const base = "namespaces: [a]\nbackend: {address: x}\n"
	tests := []struct {
		name    string
		section string
		want    []string
		wantErr string
	}{
		{name: "absent", section: base, want: nil},
		{name: "empty", section: base + "shards: []\n", want: []string{}},
		{name: "two shards", section: base + "shards: [a, b]\n", want: []string{"a", "b"}},
		{name: "not a shard name", section: base + "shards: [a, B]\n", wantErr: `targets.vault.shards[1]: "B" is not a valid shard name`},
		{name: "an empty name", section: base + `shards: [""]` + "\n", wantErr: "targets.vault.shards[0]: empty: a shard needs a name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadVaultConfig([]byte(tt.section))
			if !wantError(t, err, tt.wantErr) {
				return
			}
			if diff := cmp.Diff(tt.want, got.Shards); diff != "" {
				t.Errorf("Shards = %#v, want %#v", got.Shards, tt.want)
			}
		})
	}
}

// TestShardRefusesTheWebhook checks that a shard's process does not start
// with the webhook on: its cache would miss the other shards' objects.
func TestShardRefusesTheWebhook(t *testing.T) {
	cfg := DefaultVaultConfig()
	cfg.Namespaces, cfg.Backend.Address, cfg.Shard = []string{"a"}, "http://127.0.0.1:1", "a"
	_, err := cfg.NewManager(context.Background(), Process{Logger: logr.Discard(), Webhook: &webhook.Options{Port: 9443}})
	wantError(t, err, `vault: shard "a": a shard's process cannot serve the admission webhook`)
}

// TestCacheOptions checks that a process without the webhook caches only
// its shard's VaultSeeds, and that the webhook's process caches them all.
func TestCacheOptions(t *testing.T) {
	cfg := DefaultVaultConfig()
	cfg.Namespaces = []string{"ns1", "ns2"}
	for _, tt := range []struct {
		name         string
		shard        string
		webhook      bool
		wantSelector string // "" for no selector
	}{
		{name: "shard a", shard: "a", wantSelector: "ohmlab.fr/shard=a"},
		{name: "no shard, no webhook", wantSelector: "!ohmlab.fr/shard"},
		{name: "no shard, webhook: every object", webhook: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := ShardSelector(tt.shard)
			if err != nil {
				t.Fatal(err)
			}
			opts := cfg.cacheOptions(sel, tt.webhook)
			if len(opts.DefaultNamespaces) != 2 {
				t.Errorf("DefaultNamespaces = %v, want ns1 and ns2", opts.DefaultNamespaces)
			}
			got := ""
			for _, by := range opts.ByObject {
				got = by.Label.String()
			}
			if got != tt.wantSelector {
				t.Errorf("VaultSeed cache selector = %q, want %q", got, tt.wantSelector)
			}
		})
	}
}

// TestShardFlag checks --shard (Process.Shard): it makes the target a shard
// as its section's shard: would, and contradicting the section or naming no
// valid shard stops the process.
func TestShardFlag(t *testing.T) {
	for _, tt := range []struct {
		name, flag, section, want string
	}{
		{name: "the flag makes the target a shard", flag: "a", want: `vault: shard "a": a shard's process cannot serve the admission webhook`},
		{name: "the same shard in both", flag: "a", section: "a", want: `vault: shard "a": a shard's process cannot serve the admission webhook`},
		{name: "another shard in the section", flag: "a", section: "b", want: `vault: --shard "a" contradicts targets.vault.shard "b" of the config: set one of the two`},
		{name: "not a DNS label", flag: "Shard_A", want: `--shard: "Shard_A" is not a valid shard name`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultVaultConfig()
			cfg.Namespaces, cfg.Backend.Address, cfg.Shard = []string{"a"}, "http://127.0.0.1:1", tt.section
			_, err := cfg.NewManager(context.Background(), Process{Logger: logr.Discard(), Webhook: &webhook.Options{Port: 9443}, Shard: tt.flag})
			wantError(t, err, tt.want)
		})
	}
}

// TestLeaseName: the Lease of a target and of its shards, named by
// leaderElection.name or by default; a name that makes no valid Lease is
// refused at start, naming the Lease.
func TestLeaseName(t *testing.T) {
	const base = "namespaces: [a]\nbackend: {address: x}\nshards: [s1]\n"
	tests := []struct {
		name, section string
		want          []string // the target's Lease, then shard s1's
		wantErr       string
	}{
		{name: "by default", section: base, want: []string{"ohmlab-controller-vault", "ohmlab-controller-vault-s1"}},
		{name: "named", section: base + "leaderElection: {name: team-b-ohmlab}\n", want: []string{"team-b-ohmlab", "team-b-ohmlab-s1"}},
		{name: "not a Lease name", section: base + "leaderElection: {name: Team_B}\n", wantErr: `targets.vault.leaderElection.name: the Lease "Team_B" is not a valid name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadVaultConfig([]byte(tt.section))
			if !wantError(t, err, tt.wantErr) {
				return
			}
			if got := []string{cfg.leaseName(""), cfg.leaseName("s1")}; !slices.Equal(got, tt.want) {
				t.Errorf("Leases %q, want %q", got, tt.want)
			}
		})
	}
}
