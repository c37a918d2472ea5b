package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// FileVault is a `vault server -config` on 127.0.0.1 whose storage lives in
// files of a directory (Vault's integrated storage, Raft, one node): unlike
// the dev server it keeps its data, tokens and auth configuration across
// Stop and Start, and starts sealed, as a production server does. It is initialised with one unseal key, unsealed, and has the
// KV v2 mount VaultMount. Its embedded Vault's Client holds the root token;
// Seal and Unseal work as for the dev server.
type FileVault struct {
	*Vault
	dir string
}

// StartFileVault initialises and unseals a server whose
// storage and configuration live under dir (t.TempDir() in a test). Call
// Stop when done; the directory is left to its owner.
func StartFileVault(dir string) (*FileVault, error) {
	port, err := freePortPair()
	if err != nil {
		return nil, err
	}
	f := &FileVault{Vault: &Vault{Addr: fmt.Sprintf("http://127.0.0.1:%d", port), port: port}, dir: dir}
	f.Vault.restart = f.restart
	plugins, err := VaultPluginDir()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	config := fmt.Sprintf(`storage "raft" {
  path    = %q
  node_id = "vault-0"
  # Raft's production timings: the one node leads a moment after unseal.
  performance_multiplier = 1
}
cluster_addr     = "http://127.0.0.1:%d"
listener "tcp" {
  address     = "127.0.0.1:%d"
  tls_disable = true
}
api_addr         = %q
disable_mlock    = true
ui               = false
plugin_directory = %q
`, data, port+1, port, f.Addr, plugins)
	if err := os.WriteFile(f.configFile(), []byte(config), 0o600); err != nil {
		return nil, err
	}
	cfg := vaultapi.DefaultConfig()
	cfg.Address = f.Addr
	cfg.MaxRetries = 0
	cfg.Timeout = 5 * time.Second
	if f.Client, err = vaultapi.NewClient(cfg); err != nil {
		return nil, err
	}
	if err := f.Start(); err != nil {
		return nil, err
	}
	// Initialising bootstraps the Raft cluster: longer than a request's timeout on a loaded machine.
	f.Client.SetClientTimeout(time.Minute)
	init, err := f.Client.Sys().Init(&vaultapi.InitRequest{SecretShares: 1, SecretThreshold: 1})
	f.Client.SetClientTimeout(cfg.Timeout)
	if err != nil {
		f.Stop()
		return nil, fmt.Errorf("initialising vault: %w", err)
	}
	f.unsealKey = init.Keys[0]
	f.Client.SetToken(init.RootToken)
	if err := f.Unseal(); err != nil {
		f.Stop()
		return nil, err
	}
	if err := f.Client.Sys().Mount(VaultMount, &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		f.Stop()
		return nil, fmt.Errorf("enabling the %s KV v2 mount: %w", VaultMount, err)
	}
	return f, nil
}

// FileVaultForTest starts an on-disk server in a temporary directory
// of the test and stops it when the test ends. It fails the test (never
// skips) when the binary is missing.
func FileVaultForTest(tb testing.TB) *FileVault {
	tb.Helper()
	f, err := StartFileVault(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(f.Stop)
	return f
}

func (f *FileVault) configFile() string { return filepath.Join(f.dir, "vault.hcl") }

// Start starts the server process on its storage and address, and waits
// until it answers; it is sealed until Unseal. Stop (a SIGKILL, as a crash)
// and Start make a restart.
func (f *FileVault) Start() error {
	bin, err := Bin("vault")
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "server", "-config="+f.configFile())
	cmd.Env = append(os.Environ(), "VAULT_ADDR="+f.Addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	f.log = &LockedBuffer{}
	cmd.Stdout, cmd.Stderr = f.log, f.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	f.mu.Lock()
	f.cmd, f.exited = cmd, exited
	f.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := f.Client.Sys().SealStatus()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("vault server exited: %s", f.Logs())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			f.Stop()
			return fmt.Errorf("vault server not answering after 30s: %v", err)
		}
	}
}

// Unseal unseals the server and waits until it serves requests (the one
// Raft node becomes leader, and so active, a moment after the last key).
func (f *FileVault) Unseal() error {
	if err := f.Vault.Unseal(); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := f.Client.Logical().Read("sys/mounts")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vault not active 30s after unseal: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart kills the server, starts it again on the same storage and
// unseals it.
func (f *FileVault) Restart() error {
	f.Stop()
	return f.restart()
}

func (f *FileVault) restart() error {
	if err := f.Start(); err != nil {
		return err
	}
	return f.Unseal()
}
