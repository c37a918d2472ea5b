package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MaxSize is the largest file the repository tracks without an allow-list
// entry.
const MaxSize = 1 << 20

// Check returns a problem line for each file tracked by the git work tree
// at repo that is an executable binary or larger than MaxSize, unless
// allowed lists it.
func Check(repo string, allowed map[string]bool) ([]string, error) {
	out, err := exec.Command("git", "-C", repo, "ls-files", "-z").Output()
	if err != nil {
		return nil, fmt.Errorf("listing the tracked files: %w", err)
	}
	var problems []string
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name == "" || allowed[name] {
			continue
		}
		info, err := os.Lstat(filepath.Join(repo, name))
		if errors.Is(err, fs.ErrNotExist) || err == nil && !info.Mode().IsRegular() {
			continue // deleted from the work tree, or a link
		}
		if err != nil {
			return nil, err
		}
		kind, err := executable(filepath.Join(repo, name))
		if err != nil {
			return nil, err
		}
		switch {
		case kind != "":
			problems = append(problems, fmt.Sprintf("%s: an executable binary (%s): build outputs are never committed: git rm --cached %s", name, kind, name))
		case info.Size() > MaxSize:
			problems = append(problems, fmt.Sprintf("%s: %.1f MB, over the %d MB limit: keep it out of the repository, or list test data in hack/trackedfiles/allowed.txt", name, float64(info.Size())/1e6, MaxSize>>20))
		}
	}
	return problems, nil
}

// executable names the executable format of a file from its magic
// number: ELF, Mach-O, PE or WebAssembly; "" for any other file.
func executable(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 64)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	head = head[:n]
	for _, m := range []struct {
		magic []byte
		kind  string
	}{
		{[]byte("\x7fELF"), "ELF"},
		{[]byte{0xfe, 0xed, 0xfa, 0xce}, "Mach-O"},
		{[]byte{0xfe, 0xed, 0xfa, 0xcf}, "Mach-O"},
		{[]byte{0xce, 0xfa, 0xed, 0xfe}, "Mach-O"},
		{[]byte{0xcf, 0xfa, 0xed, 0xfe}, "Mach-O"},
		{[]byte{0xca, 0xfe, 0xba, 0xbe}, "Mach-O universal"},
		{[]byte("\x00asm"), "WebAssembly"},
	} {
		if bytes.HasPrefix(head, m.magic) {
			return m.kind, nil
		}
	}
	// PE: an MS-DOS header whose e_lfanew points at "PE\0\0", so that a
	// text starting with "MZ" is not one.
	if len(head) == 64 && bytes.HasPrefix(head, []byte("MZ")) {
		sig := make([]byte, 4)
		if _, err := f.ReadAt(sig, int64(binary.LittleEndian.Uint32(head[0x3c:]))); err == nil && string(sig) == "PE\x00\x00" {
			return "PE", nil
		}
	}
	return "", nil
}

// readAllowed reads an allow-list: one path a line, relative to the
// repository's root; "#" starts a comment.
func readAllowed(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	allowed := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		line, _, _ := strings.Cut(s.Text(), "#")
		if line = strings.TrimSpace(line); line != "" {
			allowed[line] = true
		}
	}
	return allowed, s.Err()
}
