// Command pause is the pod sandbox's process (containerd's sandbox_image):
// it holds the pod's namespaces, reaps the zombies re-parented to it (it is
// PID 1 of the pod when the PID namespace is shared) and exits on SIGINT or
// SIGTERM. It does what registry.k8s.io/pause does, built here because no
// registry is reachable from the machines make cluster runs on.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
