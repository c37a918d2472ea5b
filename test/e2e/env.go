// Package e2e runs the whole product on loopback, through the built
// binaries: a control plane with the CRD and the admission webhook, a Vault
// dev server with the chart's policy and a Kubernetes-auth role, and the
// ohmlab-controller process logging in with a projected-like token. `make
// demo` (test/demo) and the end-to-end tests share it.
package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// Names the environment uses, as the chart and vault-operator would.
const (
	SeedNamespace       = "vault-operator-system"
	ControllerNamespace = "ohmlab-system"
	ServiceAccount      = "ohmlab-controller-vault"
	VaultRole           = "ohmlab-controller"
	VaultPolicy         = "ohmlab-controller"
	Audience            = "vault"
	// tokenTTL and tokenRefresh mimic the kubelet's projected token: ten
	// minutes, replaced at 80 % of its life.
	tokenTTL     = 10 * time.Minute
	tokenRefresh = 8 * time.Minute
)

// Options configure an environment.
type Options struct {
	// Dir holds the files the environment writes (kubeconfig copy, token,
	// controller config). Required.
	Dir string
	// Resync is the controller's resync period.
	Resync time.Duration
	// ControllerBin is the ohmlab-controller binary to run.
	ControllerBin string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// ControllerLog, when set, also receives what the controller prints.
	ControllerLog io.Writer
	// Vault, when set, is configured and used instead of a dev server (for
	// example the Vault of a harness.FileVault); Stop stops it.
	Vault *harness.Vault
	// VaultAddress, when set, is the backend address the controller is
	// configured with instead of Vault.Addr (for example a proxy).
	VaultAddress string
}

// Env is a running environment.
type Env struct {
	opts      Options
	CP        *harness.ControlPlane
	Vault     *harness.Vault
	webhooks  *envtest.WebhookInstallOptions
	TokenFile string
	Config    string
	cancel    context.CancelFunc
	refresher sync.WaitGroup
	started   int // controllers started
}

// Start brings up the control plane (CRD, webhook configuration, the seed
// and controller namespaces, the controller's ServiceAccount), Vault (KV v2
// mount ohmlab, the chart's policy, Kubernetes auth with the controller's
// role, audience vault) and keeps a token of the ServiceAccount fresh in a
// file, like a projected volume. It does not start the controller.
func Start(ctx context.Context, opts Options) (*Env, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	e := &Env{opts: opts, webhooks: &envtest.WebhookInstallOptions{
		Paths: []string{filepath.Join(harness.RepoRoot(), "config", "webhook")},
	}}
	var err error
	e.logf("starting the control plane (kube-apiserver, etcd) with the VaultSeed CRD and webhook")
	if e.CP, err = harness.StartControlPlane(harness.Options{Webhooks: e.webhooks}); err != nil {
		return nil, err
	}
	if err := e.setup(ctx); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Env) setup(ctx context.Context) error {
	var err error
	if e.Vault = e.opts.Vault; e.Vault == nil {
		e.logf("starting vault server -dev (KV v2 mounts secret and ohmlab)")
		if e.Vault, err = harness.StartVault(); err != nil {
			return err
		}
	}
	for _, ns := range []string{SeedNamespace, ControllerNamespace} {
		if err := e.CP.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	if err := e.CP.EnsureServiceAccount(ctx, ControllerNamespace, ServiceAccount); err != nil {
		return err
	}
	e.logf("configuring Vault: policy %s, Kubernetes auth role %s (ServiceAccount %s/%s, audience %s)", VaultPolicy, VaultRole, ControllerNamespace, ServiceAccount, Audience)
	policy, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "charts", "ohmlab-controller", "vault", "policy.hcl"))
	if err != nil {
		return err
	}
	if err := e.Vault.Client.Sys().PutPolicyWithContext(ctx, VaultPolicy, string(policy)); err != nil {
		return fmt.Errorf("writing the policy: %w", err)
	}
	if err := e.Vault.EnableKubernetesAuth(ctx, e.CP); err != nil {
		return err
	}
	if err := e.Vault.WriteKubernetesRole(ctx, harness.KubernetesRole{
		Name: VaultRole, ServiceAccount: ServiceAccount, Namespace: ControllerNamespace,
		Audience: Audience, Policies: []string{VaultPolicy}, TTL: 15 * time.Minute,
	}); err != nil {
		return err
	}
	e.TokenFile = filepath.Join(e.opts.Dir, "vault-token", "token")
	if err := e.refreshToken(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.refresher.Add(1)
	go func() {
		defer e.refresher.Done()
		t := time.NewTicker(tokenRefresh)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				if err := e.refreshToken(rctx); err != nil && rctx.Err() == nil {
					e.logf("refreshing the ServiceAccount token: %v", err)
				}
			}
		}
	}()
	return e.writeConfig()
}

// refreshToken writes a new TokenRequest token (audience vault) to the
// token file, atomically, as the kubelet does for a projected token.
func (e *Env) refreshToken(ctx context.Context) error {
	jwt, err := e.CP.ServiceAccountToken(ctx, ControllerNamespace, ServiceAccount, Audience, tokenTTL)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(e.TokenFile), 0o700); err != nil {
		return err
	}
	tmp := e.TokenFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(jwt), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, e.TokenFile)
}

// writeConfig writes the controller's configuration file, as the chart's
// ConfigMap would hold it.
func (e *Env) writeConfig() error {
	cfg := map[string]any{"targets": map[string]any{"vault": map[string]any{
		"namespaces":     []string{SeedNamespace},
		"resyncPeriod":   e.opts.Resync.String(),
		"leaderElection": map[string]any{"namespace": ControllerNamespace, "leaseDuration": "4s"},
		"backend": map[string]any{
			"address": cmp.Or(e.opts.VaultAddress, e.Vault.Addr),
			"timeout": "2s",
			"auth": map[string]any{
				"method": "kubernetes", "mount": harness.KubernetesAuthMount, "role": VaultRole,
				"audience": Audience, "tokenFile": e.TokenFile,
			},
		},
	}}}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	e.Config = filepath.Join(e.opts.Dir, "config.yaml")
	return os.WriteFile(e.Config, data, 0o600)
}

// Stop stops everything Start started.
func (e *Env) Stop() {
	if e.cancel != nil {
		e.cancel()
		e.refresher.Wait()
	}
	if e.Vault != nil {
		e.Vault.Stop()
	}
	if e.CP != nil {
		_ = e.CP.Stop()
	}
}

func (e *Env) logf(format string, args ...any) {
	fmt.Fprintf(e.opts.Log, "==> "+format+"\n", args...)
}

// Controller is a running ohmlab-controller process.
type Controller struct {
	cmd         *exec.Cmd
	done        chan struct{}
	logs        *lockedBuffer
	MetricsAddr string
	ProbeAddr   string
}

// StartController runs the controller binary with the environment's
// configuration and webhook serving certificate, and waits until /readyz
// answers 200. The webhook configuration calls the first controller
// started; later ones serve the webhook on ports of their own.
func (e *Env) StartController(ctx context.Context) (*Controller, error) {
	webhookPort := e.webhooks.LocalServingPort
	if e.started > 0 {
		p, err := harness.FreePort()
		if err != nil {
			return nil, err
		}
		webhookPort = p
	}
	e.started++
	metricsPort, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	probePort, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	c := &Controller{
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", metricsPort),
		ProbeAddr:   fmt.Sprintf("127.0.0.1:%d", probePort),
		logs:        &lockedBuffer{},
		done:        make(chan struct{}),
	}
	c.cmd = exec.Command(e.opts.ControllerBin,
		"--config="+e.Config,
		"--metrics-bind-address="+c.MetricsAddr,
		"--health-probe-bind-address="+c.ProbeAddr,
		fmt.Sprintf("--webhook-port=%d", webhookPort),
		"--webhook-cert-dir="+e.webhooks.LocalServingCertDir,
		"--graceful-shutdown-timeout=10s",
	)
	c.cmd.Env = append(os.Environ(), "KUBECONFIG="+e.CP.Kubeconfig, "POD_NAMESPACE="+ControllerNamespace)
	var out io.Writer = c.logs
	if e.opts.ControllerLog != nil {
		out = io.MultiWriter(c.logs, e.opts.ControllerLog)
	}
	c.cmd.Stdout, c.cmd.Stderr = out, out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", e.opts.ControllerBin, err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	e.logf("started ohmlab-controller (pid %d), metrics on %s, probes on %s", c.cmd.Process.Pid, c.MetricsAddr, c.ProbeAddr)
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		c.Kill()
		return nil, fmt.Errorf("%w\ncontroller logs:\n%s", err, c.Logs())
	}
	return c, nil
}

func (c *Controller) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		code, body := httpGet(ctx, "http://"+c.ProbeAddr+"/readyz?verbose=1")
		if code == 200 {
			return nil
		}
		select {
		case <-c.done:
			return errors.New("ohmlab-controller exited before it was ready")
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ohmlab-controller not ready after %s: /readyz answers %d %s", timeout, code, body)
		}
	}
}

// Logs returns what the process printed.
func (c *Controller) Logs() string { return c.logs.String() }

// Stop sends SIGTERM and waits for the process to exit (killing it after
// 30 s).
func (c *Controller) Stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.Kill()
	}
}

// Kill kills the process at once, as a crash or an OOM kill would.
func (c *Controller) Kill() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
}

// Done is closed when the process has exited.
func (c *Controller) Done() <-chan struct{} { return c.done }

// Exited says whether the process has exited.
func (c *Controller) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Kubectl runs the built kubectl against the control plane.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	bin, err := harness.Bin("k8s/kubectl")
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", e.CP.Kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
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

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
