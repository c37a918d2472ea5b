// Package harness starts the real servers the integration and end-to-end
// tests run against, on loopback: a Kubernetes control plane (envtest:
// kube-apiserver + etcd, with the ohmlab CRDs installed) and a HashiCorp
// Vault dev server. The binaries are built by `make tools` into bin/; when
// one is missing the harness fails with the command that builds it.
package harness

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/ohmlab/ohmlab-controller/test/repo"
)

// RepoRoot returns the absolute path of the repository root.
func RepoRoot() string { return repo.MustRoot() }

// Bin returns the path of a tool built by `make tools` (for example "vault"
// or "k8s/kubectl"), or an error naming the make command that builds it.
func Bin(name string) (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is missing: run `make tools` at the repository root to build it", p)
	}
	return p, nil
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
