package reconcilers

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"github.com/ohmlab/ohmlab-controller/reconcilers/vaultseed"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    []string
		wantErr string
	}{
		{name: "one vault section", file: "targets:\n  vault:\n    namespaces: [a]\n    backend: {address: http://vault}\n", want: []string{"vault"}},
		{name: "a bad vault section", file: "targets:\n  vault:\n    namespaces: [a]\n", wantErr: "config: targets.vault.backend.address: required"},
		{name: "unknown top-level field", file: "targets:\n  vault: {}\nextra: 1\n", wantErr: `unknown field "extra"`},
		{name: "no target", file: "targets: {}\n", wantErr: "targets: no target configured (known: vault)"},
		{name: "empty file", file: "", wantErr: "no target configured"},
		{name: "reserved harbor", file: "targets:\n  harbor: {}\n", wantErr: "config: targets.harbor: reserved, not implemented yet"},
		{name: "grouped with a reserved target", file: "targets:\n  vault:\n    namespaces: [a]\n    backend: {address: http://vault}\n  sonarqube: {}\n", wantErr: "config: targets.sonarqube: reserved, not implemented yet"},
		{name: "unknown target", file: "targets:\n  gitlab: {}\n", wantErr: "config: targets.gitlab: unknown target (known: vault)"},
		{name: "not YAML", file: "targets: [", wantErr: "config:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Load([]byte(tt.file))
			if !wantError(t, err, tt.wantErr) {
				return
			}
			var names []string
			for n := range got {
				names = append(names, n)
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("sections (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadVaultConfig(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "ohmlab-system")
	full := DefaultVaultConfig()
	full.Namespaces = []string{"vault-operator-system"}
	full.Backend.Address = "https://vault:8200"
	full.ResyncPeriod.Duration = 15 * time.Second
	withTenants := full
	withTenants.Tenants.Enabled = true
	withTenants.Tenants.Namespaces = []string{"team-a", "team-b"}
	withTenants.Tenants.SharedSources = []string{"ohmlab/shared/public/"}
	released := full
	released.Brake.ReleasedAt = "2026-03-01T12:00:00Z"
	tests := []struct {
		name    string
		section string
		want    *VaultConfig
		wantErr string
	}{
		{
			name:    "defaults fill what is not said",
			section: "namespaces: [vault-operator-system]\nresyncPeriod: 15s\nbackend:\n  address: https://vault:8200\n",
			want:    &full,
		},
		{
			name:    "tenants: the defaults fill what is not said",
			section: "namespaces: [vault-operator-system]\nresyncPeriod: 15s\nbackend:\n  address: https://vault:8200\ntenants:\n  enabled: true\n  namespaces: [team-a, team-b]\n  sharedSources: [ohmlab/shared/public/]\n",
			want:    &withTenants,
		},
		{
			name:    "brake: a release, the defaults for the rest",
			section: "namespaces: [vault-operator-system]\nresyncPeriod: 15s\nbackend:\n  address: https://vault:8200\nbrake:\n  releasedAt: \"2026-03-01T12:00:00Z\"\n",
			want:    &released,
		},
		{name: "tenants: a namespace also a platform one", section: "namespaces: [a]\nbackend: {address: x}\ntenants: {enabled: true, namespaces: [a]}\n",
			wantErr: `targets.vault.tenants.namespaces[0]: "a" is also in targets.vault.namespaces`},
		{name: "tenants: a bad prefix", section: "namespaces: [a]\nbackend: {address: x}\ntenants: {enabled: true, namespaces: [b], prefix: \"ohmlab/tenants/\"}\n",
			wantErr: `targets.vault.tenants.prefix: "ohmlab/tenants/" must be <mount>/.../{namespace}/`},
		{name: "tenants: unknown field", section: "namespaces: [a]\nbackend: {address: x}\ntenants: {enabled: true, namespaces: [b], vaultRole: x}\n",
			wantErr: `unknown field "vaultRole"`},
		{name: "namespaces are required", section: "backend: {address: x}\n", wantErr: "targets.vault.namespaces: required"},
		{name: "address is required", section: "namespaces: [a]\n", wantErr: "targets.vault.backend.address: required"},
		{name: "unknown field", section: "namespaces: [a]\nbackend: {address: x}\nwatchAll: true\n", wantErr: `unknown field "watchAll"`},
		{name: "unknown nested field", section: "namespaces: [a]\nbackend: {address: x, auth: {password: y}}\n", wantErr: `unknown field "password"`},
		{name: "bad duration", section: "namespaces: [a]\nbackend: {address: x}\nresyncPeriod: soon\n", wantErr: "targets.vault"},
		{name: "bad auth method", section: "namespaces: [a]\nbackend: {address: x, auth: {method: userpass}}\n", wantErr: `backend.auth.method: "userpass" is not kubernetes or token`},
		{name: "token method needs a file", section: "namespaces: [a]\nbackend: {address: x, auth: {method: token, tokenFile: \"\"}}\n", wantErr: "backend.auth.tokenFile: required with method token"},
		{name: "zero concurrency", section: "namespaces: [a]\nbackend: {address: x}\nconcurrency: 0\n", wantErr: "concurrency: must be at least 1"},
		{name: "brake: a share of none", section: "namespaces: [a]\nbackend: {address: x}\nbrake: {vanishedShare: 0}\n", wantErr: "targets.vault.brake.vanishedShare: 0: must be more than 0 and at most 1"},
		{name: "brake: a share above all", section: "namespaces: [a]\nbackend: {address: x}\nbrake: {vanishedShare: 1.5}\n", wantErr: "targets.vault.brake.vanishedShare: 1.5: must be more than 0 and at most 1"},
		{name: "brake: no minimum", section: "namespaces: [a]\nbackend: {address: x}\nbrake: {minVanished: 0}\n", wantErr: "targets.vault.brake.minVanished: 0: must be at least 1"},
		{name: "brake: a release that is not a time", section: "namespaces: [a]\nbackend: {address: x}\nbrake: {releasedAt: yesterday}\n", wantErr: `targets.vault.brake.releasedAt: "yesterday": not an RFC 3339 time`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadVaultConfig([]byte(tt.section))
			if !wantError(t, err, tt.wantErr) {
				return
			}
			if diff := cmp.Diff(*tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// wantError checks err against want, a substring of the expected error ("" for
// none), and says whether the test goes on to check the result.
func wantError(t *testing.T, err error, want string) bool {
	t.Helper()
	switch {
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("error = %v, want it to contain %q", err, want)
	case want == "" && err != nil:
		t.Fatal(err)
	}
	return want == ""
}

// TestVaultBrake: the reconciler's brake is the section's, the release a
// time.
func TestVaultBrake(t *testing.T) {
	cfg, err := LoadVaultConfig([]byte("namespaces: [a]\nbackend: {address: x}\nbrake: {vanishedShare: 0.25, minVanished: 3, releasedAt: \"2026-03-01T12:00:00+01:00\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := vaultseed.Brake{Share: 0.25, Min: 3, ReleasedAt: time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)}
	if got := cfg.Brake.brake(); got.Share != want.Share || got.Min != want.Min || !got.ReleasedAt.Equal(want.ReleasedAt) {
		t.Errorf("brake = %+v, want %+v", got, want)
	}
}

// targetPackages are, per implemented target, the packages that hold its
// reconciler and its backend client (and so its credentials).
var targetPackages = map[string][]string{
	"vault": {"reconcilers/vaultseed", "vaultkv"},
}

// TestTargetPackagesAreIsolated checks that a target's packages import
// neither another target's packages nor this package, which links every
// target (product document, "Topologies": the packages cannot import each
// other).
func TestTargetPackagesAreIsolated(t *testing.T) {
	const module = "github.com/ohmlab/ohmlab-controller/"
	owner := map[string]string{}
	for target, pkgs := range targetPackages {
		for _, p := range pkgs {
			owner[module+p] = target
		}
	}
	for target, pkgs := range targetPackages {
		for _, p := range pkgs {
			out, err := exec.Command("go", "list", "-deps", module+p).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", p, err)
			}
			for _, dep := range strings.Fields(string(out)) {
				if dep == module+"reconcilers" {
					t.Errorf("%s (target %s) imports %s, which links every target", p, target, dep)
				}
				if other, ok := owner[dep]; ok && other != target {
					t.Errorf("%s (target %s) imports %s (target %s)", p, target, dep, other)
				}
			}
		}
	}
}

// TestLeaseNamespaceRequired: outside a pod, leader election without a
// namespace stops the process naming the config key, not controller-runtime's
// option.
func TestLeaseNamespaceRequired(t *testing.T) {
	if inPod() {
		t.Skip("runs in a pod: controller-runtime finds the namespace")
	}
	cfg := DefaultVaultConfig()
	cfg.Namespaces, cfg.Backend.Address, cfg.LeaderElection.Namespace = []string{"a"}, "http://127.0.0.1:1", ""
	_, err := cfg.NewManager(context.Background(), Process{Logger: logr.Discard(), LeaderElection: true})
	wantError(t, err, "vault: the Lease ohmlab-controller-vault needs a namespace: set targets.vault.leaderElection.namespace in the config (or POD_NAMESPACE), or run with --leader-elect=false")
}
