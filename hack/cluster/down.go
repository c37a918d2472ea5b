package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// Down takes down the cluster brought up with the state directory l: it
// stops every process, unmounts, deletes the network namespace and the
// cgroups, restores the sysctls, removes the host directories up created and
// the state directory (but bin/ and logs/). Taking down a machine with no
// cluster up succeeds. A cluster brought up from another state directory
// (another checkout's, on a shared machine) is left alone: its user may be
// running tests on it.
func Down(l Layout, log io.Writer) error {
	return withLock(func() error {
		rec, err := readRecord()
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintln(log, "cluster: no cluster is up")
			return nil
		}
		if err != nil {
			return err
		}
		if rec.Dir != l.Dir {
			return fmt.Errorf("%w from %s, not %s: take it down from there (cluster down -dir %s)", errClusterUp, rec.Dir, l.Dir, rec.Dir)
		}
		return teardown(rec, log)
	})
}

// teardown undoes rec's up, step by step; a failed step does not stop the
// next ones, and keeps the record (so that up still refuses and down can be
// run again).
func teardown(rec *Record, log io.Writer) error {
	start := time.Now()
	l := Layout{Dir: rec.Dir}
	var errs []error
	step := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	// The daemons first, so that the kubelet restarts no container; then
	// the containers, which their shims' death leaves running.
	step("stopping the node's daemons", KillCgroup(DaemonCgroup, time.Second, 20*time.Second))
	step("stopping the containers", KillCgroup(KubepodsCgroup, 0, 20*time.Second))
	step("stopping the node's daemons", KillCgroup(DaemonCgroup, 0, 5*time.Second))

	step("deleting the network namespace", TearDownNetwork())
	// ip netns makes /run/netns a mount point of its own: when up created
	// it, it goes whole; otherwise only the pods' namespaces added since.
	roots := append([]string{l.Dir}, rec.Created...)
	if !slices.Contains(rec.Created, "/run/netns") {
		if entries, err := os.ReadDir("/run/netns"); err == nil {
			for _, e := range entries {
				if !slices.Contains(rec.NetNSBefore, e.Name()) {
					roots = append(roots, filepath.Join("/run/netns", e.Name()))
				}
			}
		}
	}
	unmountErr := Unmount(roots)
	step("unmounting", unmountErr)

	step("removing the kubelet's cgroups", RemoveCgroups(KubepodsCgroup))
	step("removing the daemons' cgroup", RemoveCgroups(DaemonCgroup))
	step("restoring the sysctls", RestoreSysctls(rec.Sysctls))

	// Never remove a directory while something is still mounted under it:
	// RemoveAll would walk into the mount.
	if unmountErr == nil {
		for _, root := range roots[1:] {
			step("removing "+root, os.RemoveAll(root))
		}
		step("cleaning "+l.Dir, cleanState(l, Survivors...))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.Remove(RecordPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	fmt.Fprintf(log, "cluster: down in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// cleanState removes the state directory's entries but keep.
func cleanState(l Layout, keep ...string) error {
	entries, err := os.ReadDir(l.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if slices.Contains(keep, e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(l.Dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Load imports image archives (docker save or OCI layout archives) into
// containerd's k8s.io namespace, where the kubelet finds them; pods use
// them with imagePullPolicy: Never (or IfNotPresent). baseName names the
// images of an OCI archive whose index carries only a tag
// (org.opencontainers.image.ref.name: 0.1.0), as make image writes.
func Load(l Layout, baseName string, archives ...string) error {
	for _, a := range archives {
		args := []string{"--address", l.ContainerdSocket(), "--namespace", "k8s.io", "images", "import", "--all-platforms"}
		if baseName != "" {
			args = append(args, "--base-name", baseName)
		}
		out, err := exec.Command("ctr", append(args, a)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr images import %s: %w: %s", a, err, out)
		}
	}
	return nil
}
