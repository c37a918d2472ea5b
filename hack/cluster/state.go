package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// RecordPath is the machine-wide record of the cluster that is up: it makes
// a second up refuse, and tells down (from any checkout) what to put back.
// It is written before up changes anything on the host.
const RecordPath = "/run/ohmlab-cluster.json"

// lockPath serialises up and down.
const lockPath = "/run/ohmlab-cluster.lock"

// Record is what up found on the host before changing it.
type Record struct {
	Dir     string    `json:"dir"`
	Started time.Time `json:"started"`
	PID     int       `json:"pid"`
	// Sysctls holds the values of KernelSysctls before up.
	Sysctls map[string]string `json:"sysctls"`
	// Created lists the HostPaths that did not exist before up.
	Created []string `json:"created"`
	// NetNSBefore lists /run/netns's entries before up (the pods' network
	// namespaces are the ones added since).
	NetNSBefore []string `json:"netnsBefore"`
}

// errClusterUp is a second up's answer.
var errClusterUp = errors.New("a cluster is already up")

func readRecord() (*Record, error) {
	b, err := os.ReadFile(RecordPath)
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", RecordPath, err)
	}
	return &r, nil
}

func writeRecord(r *Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := RecordPath + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, RecordPath)
}

// withLock runs f holding the machine-wide lock; a concurrent up or down
// waits for it. The lock file is removed when no cluster is left up, so
// that down leaves nothing behind: a waiter that then finds the path gone,
// or naming another file, takes the lock again.
func withLock(f func() error) error {
	for {
		fd, err := unix.Open(lockPath, unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return fmt.Errorf("opening %s: %w", lockPath, err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
			unix.Close(fd)
			return fmt.Errorf("locking %s: %w", lockPath, err)
		}
		var held, named unix.Stat_t
		if unix.Fstat(fd, &held) != nil || unix.Stat(lockPath, &named) != nil || held.Ino != named.Ino || held.Dev != named.Dev {
			unix.Close(fd)
			continue
		}
		err = f()
		if !exists(RecordPath) {
			_ = os.Remove(lockPath)
		}
		unix.Close(fd) // releases the lock
		return err
	}
}

// newRecord snapshots the host for dir's cluster, refusing when a cluster
// is already up.
func newRecord(dir string) (*Record, error) {
	switch r, err := readRecord(); {
	case err == nil:
		return nil, fmt.Errorf("%w (state %s, since %s): run make cluster-down first", errClusterUp, r.Dir, r.Started.Format(time.RFC3339))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	if exists(NetNSPath()) {
		return nil, fmt.Errorf("%w: the network namespace %s exists but %s does not; remove it with ip netns delete %s", errClusterUp, NetNS, RecordPath, NetNS)
	}
	for _, c := range []string{KubepodsCgroup} {
		if dirs, err := cgroupDirs(c); err != nil {
			return nil, err
		} else if len(dirs) > 0 {
			return nil, fmt.Errorf("another kubelet runs on this machine (%s exists)", dirs[0])
		}
	}
	sysctls, err := SnapshotSysctls()
	if err != nil {
		return nil, err
	}
	r := &Record{Dir: dir, Started: time.Now().UTC(), PID: os.Getpid(), Sysctls: sysctls}
	for _, p := range HostPaths {
		if !exists(p) {
			r.Created = append(r.Created, p)
		}
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			r.NetNSBefore = append(r.NetNSBefore, e.Name())
		}
	}
	return r, writeRecord(r)
}
