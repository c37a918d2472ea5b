package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// The kube-apiserver of a control plane can be stopped and started again
// on the same etcd, flags, certificates and ServiceAccount signing key, as
// a rolling restart of a real control plane does. envtest's own
// APIServer.Stop/Start cannot do that: Stop removes its generated
// certificate directory, so Start serves a new CA and signs ServiceAccount
// tokens with a new key, and every client and issued token breaks. So the
// harness stops the process itself and runs its command line again.

// apiserverProcess is the kube-apiserver the harness runs after a
// StopAPIServer; envtest no longer tracks it.
type apiserverProcess struct {
	args   []string // the command line, taken from envtest's process
	cmd    *exec.Cmd
	exited chan struct{}
}

// StopAPIServer kills the kube-apiserver (SIGKILL, as a crash or an OOM
// kill: what is in flight fails) and waits until it has exited; etcd keeps
// running. StartAPIServer starts it again.
func (cp *ControlPlane) StopAPIServer() error {
	if cp.apiserver == nil {
		bin, err := Bin(filepath.Join("k8s", "kube-apiserver"))
		if err != nil {
			return err
		}
		if bin, err = filepath.EvalSymlinks(bin); err != nil {
			return err
		}
		pid, err := childPid(bin)
		if err != nil {
			return err
		}
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			return err
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return err
		}
		// envtest waits for its own child: poll until it is reaped.
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(10 * time.Millisecond)
		}
		cp.apiserver = &apiserverProcess{args: args}
		return nil
	}
	a := cp.apiserver
	if a.cmd == nil {
		return errors.New("the kube-apiserver is already stopped")
	}
	if err := a.cmd.Process.Kill(); err != nil {
		return err
	}
	<-a.exited
	a.cmd = nil
	return nil
}

// StartAPIServer starts the kube-apiserver stopped by StopAPIServer again,
// with the same command line, and waits until it is ready.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	a := cp.apiserver
	if a == nil || a.cmd != nil {
		return errors.New("the kube-apiserver was not stopped by StopAPIServer")
	}
	cmd := exec.Command(a.args[0], a.args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the kube-apiserver again: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	a.cmd, a.exited = cmd, exited
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("the kube-apiserver exited while starting again")
		case <-ctx.Done():
			return fmt.Errorf("the kube-apiserver is not ready again: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopRestartedAPIServer kills the kube-apiserver the harness started, if
// any, before envtest stops etcd.
func (cp *ControlPlane) stopRestartedAPIServer() {
	if cp.apiserver != nil && cp.apiserver.cmd != nil {
		_ = cp.StopAPIServer()
	}
}

// childPid returns the pid of this process's child that runs exe.
func childPid(exe string) (int, error) {
	for _, c := range children() {
		if c.exe == exe {
			return c.pid, nil
		}
	}
	return 0, fmt.Errorf("no child process runs %s", exe)
}
