// Command ohmlab checks VaultSeed objects before they are merged, with the
// verdict the controller's admission webhook gives at apply time:
//
//	ohmlab validate [--output text|json] [--values FILE] [--namespace NS] -|FILE|DIR...
//	ohmlab plan [--output text|json] -|FILE|DIR...
//	ohmlab version
//
// For example, over a rendered chart:
//
//	helm template vault-operator ... | ohmlab validate -
//
// validate exits 0 when every object is valid, 1 when any is invalid, and 2
// on unreadable input or bad usage.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/ohmlab/ohmlab-controller/internal/buildinfo"
)

// Exit codes.
const (
	exitValid   = 0
	exitInvalid = 1
	exitUsage   = 2
)

const usage = `Usage:
  ohmlab validate [--output text|json] [--values FILE] [--namespace NS] -|FILE|DIR...
                  check VaultSeed objects in a YAML stream ("-" is standard input),
                  files, and directories (their .yaml, .yml and .json files, recursively);
                  --values: the controller chart's values, whose targets.vault.tenants
                  scope the objects of tenant namespaces; --namespace: the namespace of
                  objects that name none
  ohmlab plan [--output text|json] [--token-file FILE] -|FILE|DIR...
                  validate them, then print what the controller would do to their
                  Vault paths, reading only (ohmlab plan --help)
  ohmlab version  print the version and source revision
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs one command and returns its exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "validate":
		return runValidate(args[1:], stdin, stdout, stderr)
	case "plan":
		return runPlan(args[1:], stdin, stdout, stderr)
	case "version":
		if len(args) > 1 {
			fmt.Fprint(stderr, usage)
			return exitUsage
		}
		fmt.Fprintf(stdout, "ohmlab %s (revision %s)\n", buildinfo.Version, buildinfo.Revision)
		return exitValid
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitValid
	}
	fmt.Fprintf(stderr, "ohmlab: unknown command %q\n%s", args[0], usage)
	return exitUsage
}
