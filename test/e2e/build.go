package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// RunWithController builds ohmlab-controller from the working tree (so a
// test never runs a stale binary) with the given version stamped in (""
// keeps the default), runs the tests with its path, removes it and exits
// with their code. It is the body of a test package's TestMain.
func RunWithController(version string, run func(bin string) int) {
	dir, err := os.MkdirTemp("", "ohmlab-controller-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin := filepath.Join(dir, "ohmlab-controller")
	args := []string{"build", "-o", bin}
	if version != "" {
		args = append(args, "-ldflags", "-X github.com/ohmlab/ohmlab-controller/internal/buildinfo.Version="+version)
	}
	build := exec.Command("go", append(args, "./cmd/ohmlab-controller")...)
	build.Dir = harness.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building ohmlab-controller: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := run(bin)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
