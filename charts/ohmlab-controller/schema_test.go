package chart_test

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/reconcilers"
)

// TestVaultAddressScheme: an http:// address sends the controller's Vault token and every value
// in clear, so it renders only with the explicit targets.vault.backend.insecureHTTP; https://
// renders as before.
func TestVaultAddressScheme(t *testing.T) {
	tests := []struct {
		name, backend string
		// want is the error's text; empty: renders, with the address in config.yaml.
		want string
	}{
		{name: "https", backend: "{address: https://vault.example:8200}"},
		{name: "https, insecureHTTP set", backend: "{address: https://vault.example:8200, insecureHTTP: true}"},
		{name: "http with insecureHTTP", backend: "{address: http://127.0.0.1:8200, insecureHTTP: true}"},
		{name: "http", backend: "{address: http://vault.example:8200}", want: "at '/targets/vault/backend/insecureHTTP': value must be true"},
		{name: "http, insecureHTTP false", backend: "{address: http://vault.example:8200, insecureHTTP: false}", want: "at '/targets/vault/backend/insecureHTTP': value must be true"},
		{name: "another scheme", backend: "{address: ftp://vault.example}", want: "at '/targets/vault/backend/address'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := charttest.RenderE(charttest.Values(t, vaultWith("backend: "+tt.backend)), charttest.Options{})
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var backend struct {
				Address string `json:"address"`
			}
			if err := yaml.Unmarshal([]byte(tt.backend), &backend); err != nil {
				t.Fatal(err)
			}
			cfg := charttest.ProcessConfigs(objs)["vault"]
			if !strings.Contains(cfg, "address: "+backend.Address+"\n") {
				t.Errorf("config.yaml does not have the address %s:\n%s", backend.Address, cfg)
			}
		})
	}
}

// TestAPIServerCIDRs: networkPolicy.apiServer.cidrs become ipBlock.cidr, which the API server
// refuses unless it is an address with its prefix length; the schema refuses at render what
// Go's netip.ParsePrefix refuses.
func TestAPIServerCIDRs(t *testing.T) {
	for _, cidr := range []string{
		"10.0.0.1/32", "10.96.0.0/12", "0.0.0.0/0", "192.168.255.255/24", "172.18.0.2/32",
		"fd00::1/128", "2001:db8::/32", "::/0", "fe80::1:2:3:4/64", "::ffff:10.0.0.1/128",
		"10.0.0.1", "10.0.0.0/33", "256.0.0.0/8", "10.0.0/8", "10.0.0.0/", "010.0.0.0/8",
		"fd00::/129", "fd00::1", "kubernetes.default.svc/32", "", " 10.0.0.1/32", "10.0.0.1/32 ",
	} {
		t.Run(cidr, func(t *testing.T) {
			_, perr := netip.ParsePrefix(cidr)
			values := vaultOn + "networkPolicy: {enabled: true, apiServer: {cidrs: [" + strconv.Quote(cidr) + "]}, extraEgress: [{ports: [{port: 8200}]}]}\n"
			_, err := charttest.RenderE(charttest.Values(t, values), charttest.Options{})
			if (err == nil) != (perr == nil) {
				t.Errorf("rendered: %v (%v), netip.ParsePrefix accepts it: %v (%v)", err == nil, err, perr == nil, perr)
			}
			if err != nil && !strings.Contains(err.Error(), "/networkPolicy/apiServer/cidrs/0") {
				t.Errorf("the error does not name the key: %v", err)
			}
		})
	}
}

// vaultWith enables the Vault target as vaultOn does, with more of its keys (flow YAML).
func vaultWith(keys string) string {
	return "targets: {vault: {enabled: true, namespaces: [vault-operator-system, platform-secrets], " + keys + "}}\n"
}

// TestDurationsTheControllerRefuses: the controller refuses to start with a resync period or a
// Lease duration under 1s; the chart refuses to render the same values, naming the key, rather
// than ship a Deployment that crash-loops. The controller's own loader is the reference.
func TestDurationsTheControllerRefuses(t *testing.T) {
	durations := []string{
		"1s", "10m", "15s", "1.5s", "1h", "0.001h", "1000ms", "1000000us", "1000000µs", "1000000000ns",
		"0.5s500ms", "1m0s", "2s500ms",
		"0s", "0m", "500ms", "999ms", "999999999ns", "0.5s", "0.999s", "999999us", "0.01m",
	}
	for _, key := range []string{"resyncPeriod", "leaderElection.leaseDuration"} {
		for _, d := range durations {
			t.Run(key+"="+d, func(t *testing.T) {
				section := "resyncPeriod: " + d
				values := "resyncPeriod: " + d
				if key != "resyncPeriod" {
					section = "leaderElection: {leaseDuration: " + d + "}"
					values = section
				}
				_, loadErr := reconcilers.LoadVaultConfig([]byte("namespaces: [a]\nbackend: {address: https://vault}\n" + section + "\n"))
				_, err := charttest.RenderE(charttest.Values(t, vaultWith(values)), charttest.Options{})
				if (err == nil) != (loadErr == nil) {
					t.Fatalf("rendered: %v (%v); the controller starts with it: %v (%v)", err == nil, err, loadErr == nil, loadErr)
				}
				if want := "targets.vault." + key + ": " + d + " is under 1s: the controller refuses to start with it"; err != nil && !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want %q", err, want)
				}
			})
		}
	}
}

// TestUnhealthyPodEvictionPolicy: by default a drain may evict a controller pod that is not
// Ready (AlwaysAllow), so two crash-looping replicas never block a node's drain; Kubernetes'
// own default stays a value away, and anything else is refused.
func TestUnhealthyPodEvictionPolicy(t *testing.T) {
	tests := []struct {
		values string
		want   policyv1.UnhealthyPodEvictionPolicyType
	}{
		{values: vaultOn, want: policyv1.AlwaysAllow},
		{values: vaultOn + "podDisruptionBudget: {unhealthyPodEvictionPolicy: IfHealthyBudget}\n", want: policyv1.IfHealthyBudget},
		{values: vaultOn + "podDisruptionBudget: {unhealthyPodEvictionPolicy: AlwaysAllow}\n", want: policyv1.AlwaysAllow},
	}
	for _, tt := range tests {
		var pdb policyv1.PodDisruptionBudget
		charttest.Convert(t, mustFind(t, render(t, tt.values), "PodDisruptionBudget", ns, fullname+"-vault"), &pdb)
		if diff := cmp.Diff(&tt.want, pdb.Spec.UnhealthyPodEvictionPolicy); diff != "" {
			t.Errorf("%s: unhealthyPodEvictionPolicy (-want +got):\n%s", tt.values, diff)
		}
	}
	for _, bad := range []string{"Never", "alwaysAllow", `""`} {
		_, err := charttest.RenderE(charttest.Values(t, vaultOn+"podDisruptionBudget: {unhealthyPodEvictionPolicy: "+bad+"}\n"), charttest.Options{})
		if err == nil || !strings.Contains(err.Error(), "/podDisruptionBudget/unhealthyPodEvictionPolicy") {
			t.Errorf("unhealthyPodEvictionPolicy %s: error %v, want one naming the key", bad, err)
		}
	}
}
