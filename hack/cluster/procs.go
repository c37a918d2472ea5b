package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Daemon is one of the node's long-running processes.
type Daemon struct {
	Name string
	Path string
	Args []string
}

// Start starts d on the node's network, detached from the caller (its own
// session, stdin from /dev/null, output to logs/NAME.log). The process
// outlives up; down stops it.
func (d Daemon) Start(l Layout) (*os.Process, error) {
	log, err := os.OpenFile(filepath.Join(l.Logs(), d.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := InNode(d.Path, d.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", d.Name, err)
	}
	// nsenter execs the daemon in place: the PID is the daemon's.
	// Reap it if it dies while up still runs, so that Alive sees it gone.
	go func() { _ = cmd.Wait() }()
	return cmd.Process, nil
}

// Alive reports whether the daemon's process still runs (not a zombie).
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// LogTail returns the last lines of a daemon's log, for an error message.
func LogTail(l Layout, name string, lines int) string {
	b, err := os.ReadFile(filepath.Join(l.Logs(), name+".log"))
	if err != nil {
		return ""
	}
	b = bytes.TrimRight(b, "\n")
	parts := bytes.Split(b, []byte("\n"))
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return string(bytes.Join(parts, []byte("\n")))
}

// KillCgroup signals every process of name's cgroup tree, and waits until
// the tree is empty: SIGTERM first (grace), then SIGKILL until timeout.
func KillCgroup(name string, grace, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	sig := syscall.SIGTERM
	if grace == 0 {
		sig = syscall.SIGKILL
	}
	termUntil := time.Now().Add(grace)
	for {
		pids, err := CgroupPIDs(name)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still holds processes %v", name, pids)
		}
		if sig == syscall.SIGTERM && time.Now().After(termUntil) {
			sig = syscall.SIGKILL
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("signalling %d: %w", pid, err)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// findExecutable resolves a host command or fails naming the package that
// provides it.
func findExecutable(name, pkg string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found: install the Debian package %s (make cluster-deps)", name, pkg)
	}
	return p, nil
}

func itoa(i int) string { return strconv.Itoa(i) }
