package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// VaultRootToken is the root token of every dev server the harness starts.
const VaultRootToken = "root"

// VaultMount is the KV v2 mount the harness enables besides the dev
// server's default "secret/".
const VaultMount = "ohmlab"

// Vault is a running `vault server -dev` on 127.0.0.1: in-memory storage,
// root token VaultRootToken, KV v2 mounts "secret" and VaultMount.
type Vault struct {
	// Addr is the server's URL, http://127.0.0.1:<port>.
	Addr string
	// Client is authenticated with the root token.
	Client *vaultapi.Client

	port      int
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
	unsealKey string
	log       *LockedBuffer
	// restart, when set, replaces the dev server's start in Restart (a
	// FileVault starts again on its storage).
	restart func() error
}

// StartVault starts a dev server on a free loopback port pair (the server
// also binds port+1 for its cluster listener). Call Stop when done.
func StartVault() (*Vault, error) {
	port, err := freePortPair()
	if err != nil {
		return nil, err
	}
	v := &Vault{Addr: fmt.Sprintf("http://127.0.0.1:%d", port), port: port}
	if err := v.start(); err != nil {
		return nil, err
	}
	return v, nil
}

// VaultForTest starts a dev server for one test and stops it when the test
// ends. It fails the test (never skips) when the binary is missing.
func VaultForTest(tb testing.TB) *Vault {
	tb.Helper()
	v, err := StartVault()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(v.Stop)
	return v
}

var unsealKeyLine = regexp.MustCompile(`Unseal Key: (\S+)`)

func (v *Vault) start() error {
	bin, err := Bin("vault")
	if err != nil {
		return err
	}
	plugins, err := VaultPluginDir()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "server", "-dev",
		"-dev-root-token-id="+VaultRootToken, "-dev-plugin-dir="+plugins,
		"-dev-listen-address=127.0.0.1:"+strconv.Itoa(v.port),
		"-dev-no-store-token")
	// Its own process group, killed with the test binary if that dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	v.log = &LockedBuffer{}
	cmd.Stderr = v.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	exited := make(chan struct{})
	keyc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := unsealKeyLine.FindStringSubmatch(sc.Text()); m != nil {
				keyc <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() { _ = cmd.Wait(); close(exited) }()
	v.mu.Lock()
	v.cmd, v.exited = cmd, exited
	v.mu.Unlock()

	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.Addr
	cfg.MaxRetries = 0
	cfg.Timeout = 5 * time.Second
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		v.Stop()
		return err
	}
	c.SetToken(VaultRootToken)
	v.Client = c
	if err := v.waitReady(exited); err != nil {
		v.Stop()
		return err
	}
	select {
	case v.unsealKey = <-keyc:
	case <-time.After(5 * time.Second):
		v.Stop()
		return errors.New("vault dev server printed no unseal key")
	}
	if err := c.Sys().Mount(VaultMount, &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		v.Stop()
		return fmt.Errorf("enabling the %s KV v2 mount: %w", VaultMount, err)
	}
	return nil
}

func (v *Vault) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := v.Client.Logical().Read("sys/mounts/secret")
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("vault dev server exited: %s", v.log.String())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vault dev server not ready after 30s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (and its process group) and waits for it to exit.
// Its data is gone: the dev server stores everything in memory.
func (v *Vault) Stop() {
	v.mu.Lock()
	cmd, exited := v.cmd, v.exited
	v.cmd = nil
	v.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// Restart stops the server and starts a fresh one on the same address,
// with the same mounts and no data (a FileVault keeps its data and comes
// back unsealed, see FileVault.Restart).
func (v *Vault) Restart() error {
	v.Stop()
	if v.restart != nil {
		return v.restart()
	}
	return v.start()
}

// Pause stops the server process (SIGSTOP) without losing its data:
// connections are accepted by the kernel but never answered, as with a
// hung server. It returns once every thread is stopped, so that no request
// sent after it is answered. Resume continues it.
func (v *Vault) Pause() error {
	if err := v.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	v.mu.Lock()
	pid := v.cmd.Process.Pid
	v.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if stopped(pid) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vault (pid %d) did not stop within 5s of SIGSTOP", pid)
		}
	}
}

// stopped says whether every thread of the process is in the stopped state
// ("T" in /proc/<pid>/task/<tid>/stat).
func stopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		// The state follows the command name, which is in parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// Resume continues a paused server.
func (v *Vault) Resume() error { return v.signal(syscall.SIGCONT) }

func (v *Vault) signal(sig syscall.Signal) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cmd == nil {
		return errors.New("vault is not running")
	}
	return syscall.Kill(-v.cmd.Process.Pid, sig)
}

// Seal seals the server: every request gets 503 "Vault is sealed" until
// Unseal. Data is kept.
func (v *Vault) Seal() error { return v.Client.Sys().Seal() }

// Unseal unseals a sealed server with the dev server's unseal key.
func (v *Vault) Unseal() error {
	st, err := v.Client.Sys().Unseal(v.unsealKey)
	if err != nil {
		return err
	}
	if st.Sealed {
		return errors.New("vault is still sealed after unseal")
	}
	return nil
}

// UnsealKey returns the dev server's unseal key (for `vault operator unseal`
// after a seal).
func (v *Vault) UnsealKey() string { return v.unsealKey }

// Logs returns what the server wrote on stderr.
func (v *Vault) Logs() string { return v.log.String() }

// WithToken returns a copy of the root client that uses another token.
func (v *Vault) WithToken(token string) (*vaultapi.Client, error) {
	c, err := v.Client.Clone()
	if err != nil {
		return nil, err
	}
	c.SetToken(token)
	return c, nil
}

// freePortPair returns a loopback port p such that p and p+1 are free.
func freePortPair() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
		_ = l.Close()
		if err == nil {
			_ = l2.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free loopback port pair")
}

// LockedBuffer collects a process's output, written by its pipe's
// goroutine and read by a test.
type LockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
