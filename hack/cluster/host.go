package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// KernelSysctls are the host-wide (not per network namespace) settings the
// kubelet writes at start (pkg/kubelet/cm setupKernelTunables); down puts
// back what up found.
var KernelSysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// HostPaths are the host directories the node's processes create outside
// the state directory, whatever their flags say: containerd's shim sockets
// and runc state (/run/containerd), the pods' network namespaces
// (/run/netns), libcni's result cache (/var/lib/cni), the kubelet's fixed
// device-plugin and pod-resources paths (/var/lib/kubelet) and its
// container log links (/var/log/containers). down removes each one that up
// did not find.
var HostPaths = []string{
	"/run/containerd",
	"/run/netns",
	"/var/lib/cni",
	"/var/lib/kubelet",
	"/var/log/containers",
	"/var/log/pods",
}

// CgroupRoot is where the cgroup v1 hierarchies are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// Cgroups created under each hierarchy: kubepods by the kubelet (pods and
// their containers), DaemonCgroup by up for the node's daemons, so that
// down finds every process the node started, containerd's shims included.
const (
	KubepodsCgroup = "kubepods"
	DaemonCgroup   = "ohmlab-node"
)

// TrackingHierarchy is the cgroup v1 hierarchy down enumerates processes
// in: the pids controller, mounted on every machine the node runs on.
const TrackingHierarchy = "pids"

func readSysctl(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc/sys", name))
	return strings.TrimSpace(string(b)), err
}

func writeSysctl(name, value string) error {
	return os.WriteFile(filepath.Join("/proc/sys", name), []byte(value), 0o644)
}

// SnapshotSysctls reads KernelSysctls.
func SnapshotSysctls() (map[string]string, error) {
	m := map[string]string{}
	for _, s := range KernelSysctls {
		v, err := readSysctl(s)
		if err != nil {
			return nil, err
		}
		m[s] = v
	}
	return m, nil
}

// RestoreSysctls writes back a snapshot.
func RestoreSysctls(m map[string]string) error {
	var errs []error
	for _, s := range slices.Sorted(maps.Keys(m)) {
		if cur, err := readSysctl(s); err == nil && cur == m[s] {
			continue
		}
		if err := writeSysctl(s, m[s]); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", s, m[s], err))
		}
	}
	return errors.Join(errs...)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// run runs a host command, returning its combined output in the error.
func runHost(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// InNode runs a command on the node's network (nsenter keeps the host's
// mount namespace, so that what the kubelet mounts containerd sees).
func InNode(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + NetNSPath(), "--", name}, args...)...)
}

// NetNSPath is the network namespace's bind mount.
func NetNSPath() string { return filepath.Join("/run/netns", NetNS) }

// SetUpNetwork creates the node's network namespace, the veth pair between
// it and the host, and the host's routes to the pod and Service ranges.
func SetUpNetwork() error {
	steps := [][]string{
		{"ip", "netns", "add", NetNS},
		{"ip", "link", "add", HostVeth, "type", "veth", "peer", "name", NodeVeth, "netns", NetNS},
		{"ip", "addr", "add", HostIP.String(), "dev", HostVeth},
		{"ip", "link", "set", HostVeth, "up"},
		{"ip", "-n", NetNS, "link", "set", "lo", "up"},
		{"ip", "-n", NetNS, "addr", "add", NodeIP.String(), "dev", NodeVeth},
		{"ip", "-n", NetNS, "link", "set", NodeVeth, "up"},
		{"ip", "-n", NetNS, "route", "add", "default", "via", HostIP.Addr().String()},
		// The host reaches ClusterIPs (kube-proxy's rules apply in the
		// namespace's PREROUTING) and pod IPs through the node.
		{"ip", "route", "add", ServiceCIDR.String(), "via", NodeIP.Addr().String(), "dev", HostVeth},
		{"ip", "route", "add", PodCIDR.String(), "via", NodeIP.Addr().String(), "dev", HostVeth},
	}
	for _, s := range steps {
		if err := runHost(s[0], s[1:]...); err != nil {
			return err
		}
	}
	// Per network namespace: routing between the pods' bridge and the
	// node's link, and iptables on bridged traffic (kube-proxy's rules
	// must see a pod's packets to a Service backed by a pod on the same
	// bridge).
	for _, s := range []string{"net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1"} {
		if err := runHost("nsenter", "--net="+NetNSPath(), "--", "sysctl", "-q", "-w", s); err != nil {
			return err
		}
	}
	return nil
}

// TearDownNetwork deletes the veth pair (with the host's routes through it)
// and the namespace. The veth goes first and explicitly: the kernel
// destroys a deleted namespace's devices asynchronously.
func TearDownNetwork() error {
	if exists("/sys/class/net/" + HostVeth) {
		if err := runHost("ip", "link", "delete", HostVeth); err != nil {
			return err
		}
	}
	if exists(NetNSPath()) {
		return runHost("ip", "netns", "delete", NetNS)
	}
	return nil
}

// mountPoints lists the mount points at or under any of roots, deepest
// first, from /proc/self/mountinfo.
func mountPoints(roots []string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		for _, r := range roots {
			if mp == r || strings.HasPrefix(mp, strings.TrimSuffix(r, "/")+"/") {
				found = append(found, mp)
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(found, func(i, j int) bool { return len(found[i]) > len(found[j]) })
	return slices.Compact(found), nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Unmount detaches every mount under roots (pod volumes, container root
// file systems, pod network namespaces), deepest first.
func Unmount(roots []string) error {
	var errs []error
	for range 3 { // a lazy detach can reveal a mount stacked beneath
		mps, err := mountPoints(roots)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, mp := range mps {
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
			}
		}
	}
	if mps, err := mountPoints(roots); err == nil && len(mps) > 0 {
		errs = append(errs, fmt.Errorf("still mounted: %s", strings.Join(mps, ", ")))
	}
	return errors.Join(errs...)
}

// hierarchies lists the mounted cgroup v1 hierarchies (and the v2 one of a
// hybrid host).
func hierarchies() ([]string, error) {
	entries, err := os.ReadDir(CgroupRoot)
	if err != nil {
		return nil, err
	}
	var hs []string
	for _, e := range entries {
		if e.IsDir() {
			hs = append(hs, filepath.Join(CgroupRoot, e.Name()))
		}
	}
	return hs, nil
}

// cgroupDirs lists name's directories (one per hierarchy) that exist.
func cgroupDirs(name string) ([]string, error) {
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, h := range hs {
		if d := filepath.Join(h, name); exists(d) {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

// AddToDaemonCgroup moves a process into DaemonCgroup's tracking cgroup,
// where what it starts later (containerd's shims) is found by down too.
func AddToDaemonCgroup(pid int) error {
	dir := filepath.Join(CgroupRoot, TrackingHierarchy, DaemonCgroup)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// CgroupPIDs lists the processes in name's tracking cgroup and its
// descendants.
func CgroupPIDs(name string) ([]int, error) {
	root := filepath.Join(CgroupRoot, TrackingHierarchy, name)
	var pids []int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}

// RemoveCgroups removes name's cgroup tree in every hierarchy, leaves
// first. The cgroups must hold no process.
func RemoveCgroups(name string) error {
	dirs, err := cgroupDirs(name)
	if err != nil {
		return err
	}
	var errs []error
	for _, top := range dirs {
		var tree []string
		_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				tree = append(tree, path)
			}
			return nil
		})
		sort.Slice(tree, func(i, j int) bool { return len(tree[i]) > len(tree[j]) })
		for _, d := range tree {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}
