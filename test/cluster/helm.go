package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

// Names of the release, as a user following the README installs it.
const (
	ReleaseName = "ohmlab-controller"
	// Namespace is the release namespace, where the pods run.
	Namespace = "ohmlab-system"
	// SeedNamespace is the namespace whose VaultSeeds the Vault target
	// reconciles (vault-operator's).
	SeedNamespace = "vault-operator-system"
	// LeaseName is the Vault target's Lease, in Namespace.
	LeaseName = "ohmlab-controller-vault"
)

// Helm installs and upgrades the chart in charts/ohmlab-controller with
// Helm's library, as `helm install` and `helm upgrade` do (release stored
// in a Secret of the release namespace).
type Helm struct {
	cfg   *action.Configuration
	chart *chart.Chart
}

// NewHelm loads the chart and connects Helm to the cluster; log receives
// Helm's debug lines.
func NewHelm(c *Cluster, log func(format string, args ...any)) (*Helm, error) {
	chrt, err := charttest.Load()
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, ns := c.Kubeconfig, Namespace
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, Namespace, "secret", log); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return &Helm{cfg: cfg, chart: chrt}, nil
}

// Install runs `helm install` of the release with values, without
// --wait: the test waits for what it checks itself, and says what it saw.
func (h *Helm) Install(ctx context.Context, values map[string]any) (*release.Release, error) {
	in := action.NewInstall(h.cfg)
	in.ReleaseName, in.Namespace, in.Timeout = ReleaseName, Namespace, 2*time.Minute
	rel, err := in.RunWithContext(ctx, h.chart, values)
	if err != nil {
		return nil, fmt.Errorf("helm install %s: %w", ReleaseName, err)
	}
	return rel, nil
}

// Upgrade runs `helm upgrade` of the release with values (not reused: the
// whole set, as a values file would give).
func (h *Helm) Upgrade(ctx context.Context, values map[string]any) (*release.Release, error) {
	up := action.NewUpgrade(h.cfg)
	up.Namespace, up.Timeout = Namespace, 2*time.Minute
	rel, err := up.RunWithContext(ctx, ReleaseName, h.chart, values)
	if err != nil {
		return nil, fmt.Errorf("helm upgrade %s: %w", ReleaseName, err)
	}
	return rel, nil
}

// ChartValues are the release's values: the image imported into the node
// (never pulled), the Vault target on SeedNamespace, Vault at vaultAddr.
// Everything else is the chart's default: 2 replicas, a PodDisruptionBudget,
// the 15 s Lease, restricted security contexts.
func ChartValues(image, vaultAddr string) (map[string]any, error) {
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon <= slash {
		return nil, fmt.Errorf("image %q has no tag", image)
	}
	return map[string]any{
		"image": map[string]any{"repository": image[:colon], "tag": image[colon+1:], "pullPolicy": "Never"},
		"targets": map[string]any{"vault": map[string]any{
			"enabled":    true,
			"namespaces": []any{SeedNamespace},
			"backend":    map[string]any{"address": vaultAddr, "timeout": "5s"},
		}},
	}, nil
}
