package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// entry is one file or directory of a layer.
type entry struct {
	name     string // relative, no leading slash; directories end in /
	mode     int64
	uid, gid int
	data     []byte
	mtime    time.Time
}

// baseEntries is the distroless-equivalent base: the nonroot user and group
// (65532), root and nobody, a world-writable sticky /tmp and nonroot's home.
// No shell, no package manager, no libc: the binaries are static, carry
// their CA roots and time zone data (internal/buildinfo), and the accounts
// name /sbin/nologin, which does not exist.
func baseEntries(mtime time.Time) []entry {
	es := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: NonRoot, gid: NonRoot},
		{name: "root/", mode: 0o700},
		{name: "tmp/", mode: 0o1777},
	}
	for i := range es {
		es[i].mtime = mtime
	}
	return es
}

// writeTar writes the entries sorted by name, with their own times and
// owners only: no user names, no access or change times, so the bytes
// depend on nothing but the entries.
func writeTar(w io.Writer, entries []entry) error {
	sorted := append([]entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	tw := tar.NewWriter(w)
	for _, e := range sorted {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: e.mtime.UTC().Truncate(time.Second), Format: tar.FormatPAX,
		}
		if len(e.name) > 0 && e.name[len(e.name)-1] == '/' {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// archiveDir writes dir (the OCI layout) as one tar archive, an
// oci-archive that skopeo, podman and docker load: entries sorted, owned by
// root, timestamps mtime, modes normalised.
func archiveDir(dir, file string, mtime time.Time) error {
	var entries []entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			entries = append(entries, entry{name: rel + "/", mode: 0o755, mtime: mtime})
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		entries = append(entries, entry{name: rel, mode: 0o644, data: data, mtime: mtime})
		return nil
	})
	if err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := writeTar(f, entries); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
