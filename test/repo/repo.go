// Package repo finds the repository's root for the tests and test programs of
// every module in it. It walks up from the working directory (a test binary
// runs in its package's directory, go run in the caller's) to the go.mod that
// declares the product's module: the tests are built with -trimpath, which
// leaves no source path in the binary to follow.
package repo

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/modfile"
)

// Module is the product's module path.
const Module = "github.com/ohmlab/ohmlab-controller"

// Root returns the absolute path of the repository: the nearest directory at
// or above the working directory whose go.mod declares Module.
func Root() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modfile.ModulePath(data) == Module {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("no go.mod of %s at or above %s: run from inside the repository", Module, wd)
		}
	}
}

// MustRoot is Root for the test helpers that cannot return an error; it
// panics outside the repository.
func MustRoot() string {
	root, err := Root()
	if err != nil {
		panic(err)
	}
	return root
}
