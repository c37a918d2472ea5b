// Package e2e runs the whole product on loopback, through the built
// binaries, as the chart deploys it: the chart's rendered objects (CRD,
// ServiceAccount, RBAC, ConfigMap, Service, webhook configuration) are
// installed into a real control plane, Vault gets the chart's policy and a
// Kubernetes-auth role for the chart's ServiceAccount, and the
// ohmlab-controller process runs as that ServiceAccount (a TokenRequest
// token, never the admin), with the ConfigMap's config.yaml, the projected
// Vault token at the path the Deployment mounts, and the webhook's serving
// certificate from the Secret the chart's Certificate names. The API server
// reaches the webhook through the rendered Service (see
// docs/maintainers/webhook-routing.md). `make demo` (test/demo) and the end-to-end tests
// share it.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// Names the environment uses, as the chart and vault-operator would.
const (
	SeedNamespace       = "vault-operator-system"
	ControllerNamespace = "ohmlab-system"
	VaultRole           = "ohmlab-controller"
	VaultPolicy         = "ohmlab-controller"
	// LeaseName is the Vault target's Lease, in ControllerNamespace.
	LeaseName = "ohmlab-controller-vault"
	// LeaseDuration is the Lease duration the environment installs the
	// chart with (targets.vault.leaderElection.leaseDuration).
	LeaseDuration = 4 * time.Second
)

// Options configure an environment.
type Options struct {
	// Dir holds the files the environment writes (kubeconfig, tokens,
	// configuration, certificates). Required.
	Dir string
	// Resync is the controller's resync period.
	Resync time.Duration
	// ControllerBin is the ohmlab-controller binary to run.
	ControllerBin string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// ControllerLog, when set, also receives what the controllers print.
	ControllerLog io.Writer
	// Values are chart values merged over the environment's own (a nested
	// map, as a values file).
	Values map[string]any
	// ControllerEnv are extra environment variables of every controller
	// process (KEY=value).
	ControllerEnv []string
	// ControllerArgs are extra arguments of every controller process, after
	// the Deployment's.
	ControllerArgs []string
	// CRDDirectories are installed with the ohmlab CRD (cert-manager's).
	CRDDirectories []string
	// CertManager, when set, is started once the control plane runs, before
	// the chart's objects are installed; then every rendered object is
	// installed (Issuers and Certificates too) and the webhook's serving
	// certificate and caBundle are left to it. Unset, the environment plays
	// cert-manager itself: a CA made for the run signs a serving certificate
	// for the Certificate's dnsNames into its Secret, and the CA is written
	// into the webhook configuration's caBundle, as cainjector would.
	CertManager func(ctx context.Context, cp *harness.ControlPlane) error
	// OwnCertificate brings the webhook's serving certificate as a user
	// without cert-manager does: before the chart is installed, a CA of the
	// run signs a certificate for the webhook Service's name into the
	// kubernetes.io/tls Secret OwnCertificateSecret, and the chart is
	// rendered without cert-manager's API, with
	// webhook.certificate.secretName and caBundle. Not with CertManager.
	OwnCertificate bool
	// Vault, when set, is configured and used instead of a dev server (for
	// example the Vault of a harness.FileVault); Stop stops it. The
	// controller's address stays Vault.Addr unless Values set
	// targets.vault.backend.address (for example a proxy).
	Vault *harness.Vault
}

// Env is a running environment.
type Env struct {
	opts    Options
	CP      *harness.ControlPlane
	Vault   *harness.Vault
	Network *harness.ServiceNetwork
	// Objects are the chart's rendered objects, in install order.
	Objects []Object
	// Chart is what the environment took from the rendered objects.
	Chart ChartFacts
	// WebhookService is the webhook Service's address (ClusterIP:port).
	WebhookService string
	// TokenFile is the projected Vault token file, on the host; the
	// controller sees it at Chart.VaultTokenMount.
	TokenFile string
	// Kubeconfig authenticates as the chart's ServiceAccount.
	Kubeconfig string
	// Config is the ConfigMap's config.yaml, written to a file.
	Config string
	// ShardConfigs are the config.yaml of each shard's ConfigMap, written
	// to a file, by shard.
	ShardConfigs map[string]string
	// CertDir holds the webhook Secret's tls.crt and tls.key, kept in step
	// with the Secret as the kubelet does for a secret volume.
	CertDir string

	// ownCA and ownDNSNames issue the certificate of Options.OwnCertificate.
	ownCA       *certAuthority
	ownDNSNames []string

	cancel  context.CancelFunc
	bg      sync.WaitGroup
	mu      sync.Mutex
	started int // controllers started
}

// Start brings up the control plane, Vault and the service network,
// installs the chart's objects, configures Vault for the chart's
// ServiceAccount, and keeps the ServiceAccount's tokens and the webhook's
// certificate files fresh. It does not start the controller.
func Start(ctx context.Context, opts Options) (e *Env, err error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	e = &Env{opts: opts}
	defer func() {
		if err != nil {
			e.Stop()
			e = nil
		}
	}()
	if e.Network, err = harness.NewServiceNetwork(); err != nil {
		return e, err
	}
	e.logf("starting the control plane (kube-apiserver, etcd), its Service traffic routed to local processes")
	if e.CP, err = harness.StartControlPlane(harness.Options{Network: e.Network, CRDDirectories: opts.CRDDirectories}); err != nil {
		return e, err
	}
	bg, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	if opts.CertManager != nil {
		e.logf("starting cert-manager")
		if err := opts.CertManager(bg, e.CP); err != nil {
			return e, err
		}
	}
	if e.Vault = opts.Vault; e.Vault == nil {
		e.logf("starting vault server -dev (KV v2 mounts secret and ohmlab)")
		if e.Vault, err = harness.StartVault(); err != nil {
			return e, err
		}
	}
	if err := e.installChart(ctx); err != nil {
		return e, err
	}
	if err := e.setupVault(ctx); err != nil {
		return e, err
	}
	if err := e.startVolumes(ctx, bg); err != nil {
		return e, err
	}
	return e, nil
}

// values are the chart values of the environment: the Vault target on
// loopback, quick hand-overs and resyncs.
func (e *Env) values() map[string]any {
	v := map[string]any{"targets": map[string]any{"vault": map[string]any{
		"enabled":        true,
		"namespaces":     []any{SeedNamespace},
		"resyncPeriod":   e.opts.Resync.String(),
		"leaderElection": map[string]any{"leaseDuration": LeaseDuration.String()},
		// vault server -dev and the fault proxies listen on loopback in plain HTTP.
		"backend": map[string]any{"address": e.Vault.Addr, "insecureHTTP": true, "timeout": "2s"},
	}}}
	return mergeValues(v, e.opts.Values)
}

// mergeValues merges over into base, recursively for maps.
func mergeValues(base, over map[string]any) map[string]any {
	for k, v := range over {
		if bm, ok := base[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				base[k] = mergeValues(bm, om)
				continue
			}
		}
		base[k] = v
	}
	return base
}

// setupVault writes the chart's Vault policy and a Kubernetes-auth role
// bound to the chart's ServiceAccount, as vault-operator does.
func (e *Env) setupVault(ctx context.Context) error {
	e.logf("configuring Vault: policy %s (the chart's vault/policy.hcl), Kubernetes auth role %s (ServiceAccount %s/%s, audience %s)",
		VaultPolicy, VaultRole, ControllerNamespace, e.Chart.ServiceAccount, e.Chart.VaultAudience)
	policy, err := os.ReadFile(filepath.Join(charttest.ChartDir(), "vault", "policy.hcl"))
	if err != nil {
		return err
	}
	if err := e.Vault.Client.Sys().PutPolicyWithContext(ctx, VaultPolicy, string(policy)); err != nil {
		return fmt.Errorf("writing the policy: %w", err)
	}
	if err := e.Vault.EnableKubernetesAuth(ctx, e.CP); err != nil {
		return err
	}
	return e.Vault.WriteKubernetesRole(ctx, harness.KubernetesRole{
		Name: VaultRole, ServiceAccount: e.Chart.ServiceAccount, Namespace: ControllerNamespace,
		Audience: e.Chart.VaultAudience, Policies: []string{VaultPolicy}, TTL: 15 * time.Minute,
	})
}

// Stop stops everything Start started.
func (e *Env) Stop() {
	if e.cancel != nil {
		e.cancel()
		e.bg.Wait()
	}
	if e.Vault != nil {
		e.Vault.Stop()
	}
	if e.CP != nil {
		_ = e.CP.Stop()
	}
	if e.Network != nil {
		e.Network.Close()
	}
}

func (e *Env) logf(format string, args ...any) {
	fmt.Fprintf(e.opts.Log, "==> "+format+"\n", args...)
}

// every runs f every period until ctx ends, logging its errors.
func (e *Env) every(ctx context.Context, period time.Duration, what string, f func(context.Context) error) {
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := f(ctx); err != nil && ctx.Err() == nil {
					e.logf("%s: %v", what, err)
				}
			}
		}
	}()
}

// writeAtomic writes a file as the kubelet updates a volume: readers see
// the old or the new content, never a partial one.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Kubectl runs the built kubectl against the control plane, as the admin.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	return e.kubectl(ctx, e.CP.Kubeconfig, args...)
}

// DescribePath returns the key names, KV version and owner marker of a
// path; every value is masked.
func (e *Env) DescribePath(ctx context.Context, path string) (string, error) {
	mount, rest, _ := strings.Cut(path, "/")
	s, err := e.Vault.Client.KVv2(mount).Get(ctx, rest)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	keys := make([]string, 0)
	for k := range templating.Flatten(s.Data) {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s (KV version %d, owner %v)\n", path, s.VersionMetadata.Version, s.CustomMetadata["ohmlab.fr/owner"])
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-40s ********\n", k)
	}
	return b.String(), nil
}

var errNotFound = errors.New("not found")
