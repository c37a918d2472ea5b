package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// pe is the start of a PE file: an MS-DOS header whose e_lfanew (0x3c)
// points at the "PE\0\0" signature.
func pe() []byte {
	b := make([]byte, 0x44)
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], 0x40)
	copy(b[0x40:], "PE\x00\x00")
	return b
}

func TestCheck(t *testing.T) {
	repo := t.TempDir()
	files := map[string][]byte{
		"ohmlab":                      append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 100)...),
		"dist/ohmlab-darwin":          {0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1},
		"dist/ohmlab.exe":             pe(),
		"big.json":                    bytes.Repeat([]byte("x"), MaxSize+1),
		"testdata/recorded.json":      bytes.Repeat([]byte("x"), MaxSize+1),
		"testdata/controller.elf":     []byte("\x7fELF"),
		"exactly-the-limit.txt":       bytes.Repeat([]byte("x"), MaxSize),
		"MZ.md":                       append([]byte("MZ is a text here"), make([]byte, 100)...),
		"main.go":                     []byte("package main\n"),
		"empty":                       nil,
		"deleted-from-the-work-tree":  []byte("\x7fELF"),
		"untracked-binary.gitignored": []byte("\x7fELF"),
	}
	for name, data := range files {
		path := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("rm", "-q", "--cached", "untracked-binary.gitignored")
	if err := os.Remove(filepath.Join(repo, "deleted-from-the-work-tree")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ohmlab", filepath.Join(repo, "link")); err != nil {
		t.Fatal(err)
	}
	git("add", "link")

	got, err := Check(repo, map[string]bool{"testdata/recorded.json": true, "testdata/controller.elf": true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"big.json: 1.0 MB, over the 1 MB limit: keep it out of the repository, or list test data in hack/trackedfiles/allowed.txt",
		"dist/ohmlab-darwin: an executable binary (Mach-O): build outputs are never committed: git rm --cached dist/ohmlab-darwin",
		"dist/ohmlab.exe: an executable binary (PE): build outputs are never committed: git rm --cached dist/ohmlab.exe",
		"ohmlab: an executable binary (ELF): build outputs are never committed: git rm --cached ohmlab",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestReadAllowed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allowed.txt")
	if err := os.WriteFile(path, []byte("# test data\ntestdata/a.bin # the recorded scrape\n\n  testdata/b.json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readAllowed(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"testdata/a.bin": true, "testdata/b.json": true}, got); diff != "" {
		t.Errorf("allowed (-want +got):\n%s", diff)
	}
}
