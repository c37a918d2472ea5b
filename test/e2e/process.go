package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// Controller is a running ohmlab-controller process: one replica of the
// chart's Deployment.
type Controller struct {
	Name        string // as a pod name
	cmd         *exec.Cmd
	done        chan struct{}
	logs        *lockedBuffer
	MetricsAddr string
	ProbeAddr   string
	// WebhookAddr is where this replica serves the webhook; "" for a
	// shard's replica, which serves none.
	WebhookAddr string
	// Shard is the shard whose Deployment this replica belongs to, or "".
	Shard   string
	args    []string // the Deployment's container arguments
	environ []string // its literal environment variables (KEY=value)
	config  string   // its config.yaml, on the host
	env     *Env
	once    sync.Once
}

// podArgs are the Deployment's container arguments with the loopback
// listeners and the files of this run in place of the pod's. A shard's
// replica keeps the Deployment's --webhook-port=0.
func (e *Env) podArgs(c *Controller, webhookPort int) []string {
	override := map[string]string{
		"--config":                    c.config,
		"--metrics-bind-address":      c.MetricsAddr,
		"--health-probe-bind-address": c.ProbeAddr,
		"--graceful-shutdown-timeout": "10s",
	}
	if c.Shard == "" {
		override["--webhook-port"] = fmt.Sprint(webhookPort)
		override["--webhook-cert-dir"] = e.CertDir
	}
	var args []string
	for _, a := range c.args {
		k, _, _ := strings.Cut(a, "=")
		if v, ok := override[k]; ok {
			a = k + "=" + v
			delete(override, k)
		}
		args = append(args, a)
	}
	for k, v := range override {
		args = append(args, k+"="+v)
	}
	return append(args, e.opts.ControllerArgs...)
}

// podCommand runs bin in a mount namespace of its own where the projected
// Vault token directory is bind-mounted at the path the Deployment mounts
// it (on a tmpfs over /run, which /var/run points to): the configuration's
// tokenFile is the chart's, unchanged.
func (e *Env) podCommand(bin string, args []string) (*exec.Cmd, error) {
	mount := e.Chart.VaultTokenMount
	if !strings.HasPrefix(mount, "/var/run/") && !strings.HasPrefix(mount, "/run/") {
		return nil, fmt.Errorf("the Deployment mounts the Vault token at %s: the environment can mount only under /run", mount)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("the controller runs in a mount namespace of its own: %w", err)
	}
	flags := []string{"--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		flags = append(flags, "--map-root-user")
	}
	script := `set -e; mount -t tmpfs ohmlab-pod-run /run; mkdir -p "$1"; mount --bind "$2" "$1"; shift 2; exec "$@"`
	all := append(flags, "--", "sh", "-c", script, "sh", mount, filepath.Dir(e.TokenFile), bin)
	return exec.Command(unshare, append(all, args...)...), nil
}

// StartController runs one replica of the chart's Deployment: the
// controller binary as the chart's ServiceAccount, with the ConfigMap's
// configuration, the projected Vault token and the webhook Secret's files.
// Once /readyz answers 200 it becomes an endpoint of the webhook Service,
// and stops being one when it exits.
func (e *Env) StartController(ctx context.Context) (*Controller, error) {
	return e.StartControllerWithin(ctx, 60*time.Second)
}

// StartControllerWithin is StartController giving up (and killing the
// process) when it is not ready within timeout.
func (e *Env) StartControllerWithin(ctx context.Context, timeout time.Duration) (*Controller, error) {
	return e.startReplica(ctx, "", timeout)
}

// StartShard runs one replica of the Deployment of a shard of the Vault
// target (targets.vault.shards): as StartController, with that
// Deployment's arguments and ConfigMap; it serves no webhook, so it never
// becomes an endpoint of the webhook Service.
func (e *Env) StartShard(ctx context.Context, shard string) (*Controller, error) {
	if _, ok := e.Chart.Shards[shard]; !ok {
		return nil, fmt.Errorf("the chart renders no Deployment for shard %q", shard)
	}
	return e.startReplica(ctx, shard, 60*time.Second)
}

func (e *Env) startReplica(ctx context.Context, shard string, timeout time.Duration) (*Controller, error) {
	e.mu.Lock()
	e.started++
	n := e.started
	e.mu.Unlock()
	var ports [3]int
	for i := range ports {
		p, err := harness.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	c := &Controller{
		Name:        fmt.Sprintf("%s-%d", e.Chart.Deployment, n),
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		ProbeAddr:   fmt.Sprintf("127.0.0.1:%d", ports[1]),
		WebhookAddr: fmt.Sprintf("127.0.0.1:%d", ports[2]),
		args:        e.Chart.Args,
		environ:     e.Chart.Env,
		config:      e.Config,
		logs:        &lockedBuffer{},
		done:        make(chan struct{}),
		env:         e,
	}
	if shard != "" {
		sf := e.Chart.Shards[shard]
		c.Name, c.Shard, c.WebhookAddr = fmt.Sprintf("%s-%d", sf.Deployment, n), shard, ""
		c.args, c.environ, c.config = sf.Args, sf.Env, e.ShardConfigs[shard]
	}
	cmd, err := e.podCommand(e.opts.ControllerBin, e.podArgs(c, ports[2]))
	if err != nil {
		return nil, err
	}
	c.cmd = cmd
	// The Deployment's environment: its Downward API variables, then its
	// literal ones (GOGC), then the caller's.
	c.cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig, "POD_NAMESPACE="+ControllerNamespace, "POD_NAME="+c.Name)
	c.cmd.Env = append(c.cmd.Env, c.environ...)
	c.cmd.Env = append(c.cmd.Env, e.opts.ControllerEnv...)
	var out io.Writer = c.logs
	if e.opts.ControllerLog != nil {
		out = io.MultiWriter(c.logs, e.opts.ControllerLog)
	}
	c.cmd.Stdout, c.cmd.Stderr = out, out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", e.opts.ControllerBin, err)
	}
	go func() {
		_ = c.cmd.Wait()
		c.leaveService()
		close(c.done)
	}()
	e.logf("started ohmlab-controller %s (pid %d) as ServiceAccount %s/%s, metrics on %s, probes on %s, webhook on %q",
		c.Name, c.cmd.Process.Pid, ControllerNamespace, e.Chart.ServiceAccount, c.MetricsAddr, c.ProbeAddr, c.WebhookAddr)
	if err := c.waitReady(ctx, timeout); err != nil {
		c.Kill()
		return nil, fmt.Errorf("%w\ncontroller logs:\n%s", err, c.Logs())
	}
	if c.WebhookAddr != "" {
		e.Network.AddBackend(e.WebhookService, c.WebhookAddr)
	}
	return c, nil
}

// leaveService removes the replica from the webhook Service's endpoints.
func (c *Controller) leaveService() {
	if c.WebhookAddr == "" {
		return
	}
	c.once.Do(func() { c.env.Network.RemoveBackend(c.env.WebhookService, c.WebhookAddr) })
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

// Stop stops the replica as a pod deletion does: it leaves the Service's
// endpoints, gets SIGTERM, and is killed after 30 s.
func (c *Controller) Stop() {
	c.leaveService()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.Kill()
	}
}

// Kill kills the process at once, as a crash or an OOM kill would; it
// leaves the Service's endpoints once it is gone.
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

// kubectl runs the built kubectl with a kubeconfig.
func (e *Env) kubectl(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	bin, err := harness.Bin("k8s/kubectl")
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
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
