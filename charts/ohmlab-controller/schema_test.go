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

// TestPodSpecValuesAreTyped: resources, affinity, tolerations and topologySpreadConstraints are
// written into the pod spec as they are, so values.schema.json types them by Kubernetes' own
// schemas (TestValuesSchemaTypesKubernetesObjects): a misspelt key or a wrong shape fails the
// render, naming the key, instead of being dropped by the API server or refusing the Deployment.
func TestPodSpecValuesAreTyped(t *testing.T) {
	tests := []struct {
		name, values string
		// want is the error's text; empty: renders.
		want string
	}{
		{name: "resources", values: "resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: 1Gi, cpu: 2}}\n"},
		{name: "resources with a fractional CPU", values: "resources: {requests: {cpu: 0.5}}\n"},
		{name: "resources, a misspelt key", values: "resources: {limit: {memory: 1Gi}}\n", want: "at '/resources': additional properties 'limit' not allowed"},
		{name: "resources, a unit Kubernetes does not know", values: "resources: {limits: {memory: 256MB}}\n", want: "at '/resources/limits/memory'"},
		{name: "resources, a list for a quantity", values: "resources: {limits: {memory: [1Gi]}}\n", want: "at '/resources/limits/memory'"},
		{name: "affinity", values: "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]}]}}, podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: x}}}}]}}\n"},
		{name: "affinity, a misspelt key", values: "affinity: {nodeAfinity: {}}\n", want: "at '/affinity': additional properties 'nodeAfinity' not allowed"},
		{name: "affinity, an unknown operator", values: "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Equals, values: [b]}]}]}}}\n", want: "operator"},
		{name: "affinity, a term without its topologyKey", values: "affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {app: x}}}]}}\n", want: "topologyKey"},
		{name: "tolerations", values: "tolerations: [{key: dedicated, operator: Equal, value: platform, effect: NoSchedule}]\n"},
		{name: "tolerations, a misspelt key", values: "tolerations: [{key: dedicated, effects: NoSchedule}]\n", want: "at '/tolerations/0': additional properties 'effects' not allowed"},
		{name: "topologySpreadConstraints", values: "topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: x}}}]\n"},
		{name: "topologySpreadConstraints, none", values: "topologySpreadConstraints: []\n"},
		{name: "topologySpreadConstraints, without maxSkew", values: "topologySpreadConstraints: [{topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]\n", want: "maxSkew"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := charttest.RenderE(charttest.Values(t, vaultOn+tt.values), charttest.Options{})
			switch {
			case tt.want == "" && err != nil:
				t.Fatal(err)
			case tt.want != "" && err == nil:
				t.Fatalf("rendered, want an error with %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
