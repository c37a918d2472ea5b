package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// Names of the Vault side, as vault-operator sets it up (the chart's
// defaults: role ohmlab-controller, auth mount kubernetes).
const (
	VaultPort   = 8200
	VaultPolicy = "ohmlab-controller"
	VaultRole   = "ohmlab-controller"
	// VaultMount is the KV v2 mount of the keycloak example's path.
	VaultMount = "ohmlab"
)

// Vault is a `vault server -dev` run on the node's network (a process, not
// a pod: Vault is not under test, and the dev server needs no image): the
// pods and the host reach it at the node's address.
type Vault struct {
	Addr   string
	Client *vaultapi.Client
	cmd    *exec.Cmd
	exited chan struct{}
	log    *harness.LockedBuffer
	once   sync.Once
}

// StartVault starts the dev server with nodeExec on ip:VaultPort (its
// cluster listener takes the next port) and enables the KV v2 mount
// VaultMount.
func StartVault(ctx context.Context, nodeExec []string, ip string) (*Vault, error) {
	bin, err := harness.Bin("vault")
	if err != nil {
		return nil, err
	}
	plugins, err := harness.VaultPluginDir()
	if err != nil {
		return nil, err
	}
	listen := net.JoinHostPort(ip, strconv.Itoa(VaultPort))
	args := append(append([]string{}, nodeExec[1:]...), bin, "server", "-dev",
		"-dev-root-token-id="+harness.VaultRootToken, "-dev-listen-address="+listen, "-dev-no-store-token", "-dev-plugin-dir="+plugins)
	cmd := exec.Command(nodeExec[0], args...)
	// Its own process group, killed with the test binary if that dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	v := &Vault{Addr: "http://" + listen, cmd: cmd, exited: make(chan struct{}), log: &harness.LockedBuffer{}}
	// Its stdout is the dev-mode banner, with the unseal key: not kept.
	cmd.Stdout, cmd.Stderr = io.Discard, v.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting vault on the node's network (%v): %w", cmd.Args, err)
	}
	go func() { _ = cmd.Wait(); close(v.exited) }()

	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.Addr
	cfg.MaxRetries = 0
	cfg.Timeout = 10 * time.Second
	if v.Client, err = vaultapi.NewClient(cfg); err != nil {
		v.Stop()
		return nil, err
	}
	v.Client.SetToken(harness.VaultRootToken)
	err = WaitFor(ctx, "the Vault dev server at "+v.Addr+" to serve sys/mounts/secret", 100*time.Millisecond, time.Minute,
		func(ctx context.Context) (bool, string, error) {
			select {
			case <-v.exited:
				return false, "", fmt.Errorf("vault exited: %s", v.log.String())
			default:
			}
			if _, err := v.Client.Logical().ReadWithContext(ctx, "sys/mounts/secret"); err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
	if err == nil {
		err = v.Client.Sys().MountWithContext(ctx, VaultMount, &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "2"}})
	}
	if err != nil {
		v.Stop()
		return nil, err
	}
	return v, nil
}

// ConfigureForChart does vault-operator's part: the chart's policy
// (vault/policy.hcl) and a Kubernetes-auth role for the chart's
// ServiceAccount, the auth method checking tokens against the cluster's
// API server (TokenReview, as a reviewer bound to system:auth-delegator).
func (v *Vault) ConfigureForChart(ctx context.Context, c *Cluster, namespace, serviceAccount, audience string) error {
	policy, err := os.ReadFile(filepath.Join(charttest.ChartDir(), "vault", "policy.hcl"))
	if err != nil {
		return err
	}
	if err := v.Client.Sys().PutPolicyWithContext(ctx, VaultPolicy, string(policy)); err != nil {
		return fmt.Errorf("writing the policy: %w", err)
	}
	hv := &harness.Vault{Addr: v.Addr, Client: v.Client}
	if err := hv.EnableKubernetesAuth(ctx, c.ControlPlane()); err != nil {
		return err
	}
	return hv.WriteKubernetesRole(ctx, harness.KubernetesRole{
		Name: VaultRole, ServiceAccount: serviceAccount, Namespace: namespace,
		Audience: audience, Policies: []string{VaultPolicy}, TTL: 15 * time.Minute,
	})
}

// Logs returns what the server printed.
func (v *Vault) Logs() string { return v.log.String() }

// Stop kills the server's process group and waits for it.
func (v *Vault) Stop() {
	v.once.Do(func() {
		_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
		<-v.exited
	})
}

// KubernetesLogins returns the metadata of every live token that Vault's
// Kubernetes auth method issued (role, service_account_name,
// service_account_namespace...), read through the token accessors: proof
// that a pod presented a valid projected token.
func (v *Vault) KubernetesLogins(ctx context.Context) ([]map[string]any, error) {
	list, err := v.Client.Logical().ListWithContext(ctx, "auth/token/accessors")
	if err != nil {
		return nil, fmt.Errorf("listing token accessors: %w", err)
	}
	if list == nil {
		return nil, nil
	}
	accessors, _ := list.Data["keys"].([]any)
	var out []map[string]any
	for _, a := range accessors {
		s, err := v.Client.Logical().WriteWithContext(ctx, "auth/token/lookup-accessor", map[string]any{"accessor": a})
		if err != nil {
			return nil, fmt.Errorf("looking up a token accessor: %w", err)
		}
		if p, _ := s.Data["path"].(string); !strings.HasPrefix(p, "auth/"+harness.KubernetesAuthMount+"/login") {
			continue
		}
		meta, _ := s.Data["meta"].(map[string]any)
		out = append(out, meta)
	}
	return out, nil
}
