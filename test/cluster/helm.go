package cluster

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/cli-runtime/pkg/genericclioptions"
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

// Helm installs and upgrades the chart pulled from an OCI registry with
// Helm's library, as `helm install oci://...` and `helm upgrade` do
// (release stored in a Secret of the release namespace).
type Helm struct {
	cfg *action.Configuration
	// Chart is the chart pulled from the registry, the one installed.
	Chart *chart.Chart
}

// NewHelm connects Helm to the cluster and pulls the chart ref
// (oci://HOST/PATH/NAME@DIGEST) of version over plain HTTP with Helm's
// registry client into cache, as `helm install --plain-http --version
// VERSION ref` locates it; log receives Helm's debug lines.
func NewHelm(c *Cluster, ref, version, cache string, log func(format string, args ...any)) (*Helm, error) {
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, ns := c.Kubeconfig, Namespace
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, Namespace, "secret", log); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard),
		registry.ClientOptCredentialsFile(filepath.Join(cache, "registry.json")))
	if err != nil {
		return nil, err
	}
	cfg.RegistryClient = rc
	// Helm's settings, its files in cache, not the machine's.
	settings := cli.New()
	settings.RepositoryCache = filepath.Join(cache, "repository")
	settings.RepositoryConfig = filepath.Join(cache, "repositories.yaml")
	settings.RegistryConfig = filepath.Join(cache, "registry.json")
	in := action.NewInstall(cfg)
	in.SetRegistryClient(rc)
	in.Version, in.PlainHTTP = version, true
	path, err := in.LocateChart(ref, settings)
	if err != nil {
		return nil, fmt.Errorf("locating the chart %s: %w", ref, err)
	}
	chrt, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("loading the chart %s (%s): %w", ref, path, err)
	}
	return &Helm{cfg: cfg, Chart: chrt}, nil
}

// Install runs `helm install` of the release with values, without
// --wait: the test waits for what it checks itself, and says what it saw.
func (h *Helm) Install(ctx context.Context, values map[string]any) (*release.Release, error) {
	in := action.NewInstall(h.cfg)
	in.ReleaseName, in.Namespace, in.Timeout = ReleaseName, Namespace, 2*time.Minute
	rel, err := in.RunWithContext(ctx, h.Chart, values)
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
	rel, err := up.RunWithContext(ctx, ReleaseName, h.Chart, values)
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
			// The dev server on the node's address speaks plain HTTP.
			"backend": map[string]any{"address": vaultAddr, "insecureHTTP": true, "timeout": "5s"},
		}},
	}, nil
}
