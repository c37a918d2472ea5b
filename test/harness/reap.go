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
	var pids []string
	tasks, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(data)) {
			exe, err := os.Readlink("/proc/" + pid + "/exe")
			if err == nil && strings.HasPrefix(exe, dir+string(filepath.Separator)) {
				pids = append(pids, pid)
			}
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
