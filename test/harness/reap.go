package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// reapChildrenOnExit starts a watchdog that kills, with SIGKILL, this
// process's children whose binary is under dir once this process is gone,
// however it ends (a panic or a timeout skips every cleanup). envtest starts
// kube-apiserver and etcd without a way to tie their life to ours.
func reapChildrenOnExit(dir string) error {
	// /proc/<pid>/exe is resolved: so must dir be (bin/ may be a link).
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	var pids []string
	for _, c := range children() {
		if strings.HasPrefix(c.exe, dir+string(filepath.Separator)) {
			pids = append(pids, strconv.Itoa(c.pid))
		}
	}
	if len(pids) == 0 {
		return nil
	}
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 1; done; kill -9 %s 2>/dev/null; exit 0",
		os.Getpid(), strings.Join(pids, " "))
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the reaper of %s: %w", strconv.Quote(dir), err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// child is a child process of this one and the binary it runs.
type child struct {
	pid int
	exe string // resolved, as /proc/<pid>/exe gives it
}

// children lists this process's children (of every thread).
func children() []child {
	var out []child
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			if exe, err := os.Readlink("/proc/" + f + "/exe"); err == nil {
				out = append(out, child{pid: pid, exe: exe})
			}
		}
	}
	return out
}
