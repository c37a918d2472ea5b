package chart_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/reconcilers"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// renderings are value sets whose objects must reach a real API server and
// whose process configurations must load into the controller.
var renderings = []struct {
	name   string
	values string
}{
	{name: "vault split", values: "targets:\n  vault:\n    enabled: true\n    namespaces: [vault-operator-system]\n"},
	{name: "vault observe-only with network policy", values: "targets:\n  vault:\n    enabled: true\n    observeOnly: true\n    namespaces: [vault-operator-system, tenant-a]\nnetworkPolicy:\n  enabled: true\n  apiServer: {cidrs: [10.0.0.1/32]}\n  extraEgress: [{to: [{ipBlock: {cidr: 10.0.0.5/32}}], ports: [{port: 8200}]}]\n"},
	{name: "grouped process", values: "targets:\n  vault:\n    enabled: true\n    allowDelete: true\n    namespaces: [vault-operator-system]\ndeployments:\n  all: [vault, harbor, sonarqube]\n"},
	{name: "vault with tenants", values: "targets:\n  vault:\n    enabled: true\n    namespaces: [vault-operator-system]\n    tenants:\n      enabled: true\n      namespaces: [team-a, team-b]\n      sharedSources: [ohmlab/shared/public/]\n"},
	{name: "vault with shards and network policy", values: "targets:\n  vault:\n    enabled: true\n    shards: [a, b]\n    namespaces: [vault-operator-system]\nnetworkPolicy:\n  enabled: true\n  apiServer: {cidrs: [10.0.0.1/32]}\n  extraEgress: [{to: [{ipBlock: {cidr: 10.0.0.5/32}}], ports: [{port: 8200}]}]\n"},
}

// TestControllerLoadsEveryRenderedConfig runs each rendered process
// configuration through the controller's own loader.
func TestControllerLoadsEveryRenderedConfig(t *testing.T) {
	for _, r := range renderings {
		t.Run(r.name, func(t *testing.T) {
			configs := charttest.ProcessConfigs(charttest.Render(t, charttest.Values(t, r.values)))
			if len(configs) == 0 {
				t.Fatal("no process configuration rendered")
			}
			for process, cfg := range configs {
				targets, err := reconcilers.Load([]byte(cfg))
				if err != nil {
					t.Errorf("process %s: the controller refuses its configuration: %v\n%s", process, err, cfg)
				}
				if _, ok := targets["vault"]; !ok {
					t.Errorf("process %s: no vault target in %s", process, cfg)
				}
			}
		})
	}
}

// TestAPIServerAcceptsRenderedObjects server-side dry-runs the rendered core
// objects (all but cert-manager's and the Prometheus Operator's) against a
// real kube-apiserver.
func TestAPIServerAcceptsRenderedObjects(t *testing.T) {
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	ctx := context.Background()
	for _, r := range renderings {
		t.Run(r.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := charttest.Core(charttest.Render(t, charttest.Values(t, r.values)))
			for _, ns := range charttest.Namespaces(objs) {
				g.Expect(cp.EnsureNamespace(ctx, ns)).To(Succeed())
			}
			for i := range objs {
				o := &objs[i]
				err := cp.Client.Patch(ctx, o, client.Apply, client.DryRunAll, client.ForceOwnership, client.FieldOwner("chart-test"))
				g.Expect(err).NotTo(HaveOccurred(), "%s", charttest.Key(*o))
			}
		})
	}
}
