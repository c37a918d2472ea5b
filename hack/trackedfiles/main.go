// Command trackedfiles fails when a file the repository tracks is an
// executable binary (ELF, Mach-O, PE, WebAssembly) or larger than 1 MB,
// unless hack/trackedfiles/allowed.txt lists it as test data (issue 24):
// build outputs are never committed. `make verify` runs it from the
// repository's root:
//
//	go run ./hack/trackedfiles
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	allowed, err := readAllowed(filepath.Join("hack", "trackedfiles", "allowed.txt"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "trackedfiles:", err)
		os.Exit(2)
	}
	problems, err := Check(".", allowed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trackedfiles:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "trackedfiles:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}
