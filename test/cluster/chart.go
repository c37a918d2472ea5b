package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// Registry is an OCI registry in this process on loopback, plain HTTP
// (go-containerregistry's, the one hack/image's tests push to), with the
// referrers API cosign v3 stores its signatures in.
type Registry struct {
	Host string
	srv  *httptest.Server
}

// StartRegistry starts the registry; Stop ends it.
func StartRegistry() *Registry {
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	return &Registry{Host: strings.TrimPrefix(srv.URL, "http://"), srv: srv}
}

// Stop stops the registry.
func (r *Registry) Stop() { r.srv.Close() }

// Cosign runs bin/cosign offline, isolated from the machine: its own HOME
// (no TUF cache, no registry credentials), a throwaway key pair, a signing
// configuration with no transparency log nor timestamp authority and an
// empty trusted root, as hack/image's signing test does.
type Cosign struct {
	Bin, Home string
}

// NewCosign creates the key pair and the offline signing configuration in
// home, with the cosign binary bin.
func NewCosign(ctx context.Context, bin, home string) (*Cosign, error) {
	c := &Cosign{Bin: bin, Home: home}
	for _, args := range [][]string{
		{"generate-key-pair"},
		{"signing-config", "create", "--out", "signing-config.json"},
		{"trusted-root", "create", "--out", "trusted-root.json"},
	} {
		if _, err := c.Run(ctx, args...); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Env is the environment of cosign and of what runs it (make chart).
func (c *Cosign) Env() []string {
	return append(os.Environ(), "HOME="+c.Home, "COSIGN_PASSWORD=throwaway", "TUF_ROOT="+filepath.Join(c.Home, "tuf"))
}

// Key and PublicKey are the key pair's files.
func (c *Cosign) Key() string       { return filepath.Join(c.Home, "cosign.key") }
func (c *Cosign) PublicKey() string { return filepath.Join(c.Home, "cosign.pub") }

// SignFlags are make's COSIGN_FLAGS for signing offline to a plain HTTP
// registry.
func (c *Cosign) SignFlags() string {
	return "--signing-config=" + filepath.Join(c.Home, "signing-config.json") +
		" --trusted-root=" + filepath.Join(c.Home, "trusted-root.json") + " --allow-http-registry"
}

// Run runs cosign with args and returns its combined output.
func (c *Cosign) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	cmd.Env, cmd.Dir = c.Env(), c.Home
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("cosign %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Verify checks ref's signature with the public key pub (the key's
// signature, no transparency log), as a user does before installing.
func (c *Cosign) Verify(ctx context.Context, pub, ref string) error {
	_, err := c.Run(ctx, "verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", ref)
	return err
}

// MakeChart runs `make chart` at the repository root: the chart packaged
// into dist, pushed to oci://host/charts over plain HTTP and signed with
// cosign's key. It is the development chart (CHART_ALLOW_DIRTY): the
// working tree is tested as it is, and the image is the one the node
// imported under the chart's tag. It returns the pushed chart's reference by digest (what
// make chart prints last) and make's output.
func MakeChart(ctx context.Context, dist, host string, cosign *Cosign) (string, string, error) {
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", harness.RepoRoot(), "chart",
		"DIST="+dist, "CHART_ALLOW_DIRTY=1", "REGISTRY="+host, "INSECURE=1", "COSIGN_KEY="+cosign.Key(), "COSIGN_FLAGS="+cosign.SignFlags())
	cmd.Env = cosign.Env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", out.String(), fmt.Errorf("make chart: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	ref := lines[len(lines)-1]
	if !strings.HasPrefix(ref, host+"/charts/") || !strings.Contains(ref, "@sha256:") {
		return "", out.String(), fmt.Errorf("make chart printed %q last, want %s/charts/NAME@sha256:...", ref, host)
	}
	return ref, out.String(), nil
}

// SameChart says how chart got differs from want: its metadata, and every
// other file Helm loaded (values, schema, templates, the rest) byte for
// byte. Chart.yaml is compared as metadata: packaging writes it anew.
func SameChart(got, want *chart.Chart) error {
	files := func(c *chart.Chart) map[string]string {
		m := map[string]string{}
		for _, f := range c.Raw {
			if f.Name != chartutil.ChartfileName {
				m[f.Name] = string(f.Data)
			}
		}
		return m
	}
	g, w := files(got), files(want)
	var diff []string
	if !reflect.DeepEqual(got.Metadata, want.Metadata) {
		diff = append(diff, fmt.Sprintf("metadata %+v, want %+v", *got.Metadata, *want.Metadata))
	}
	for name, data := range w {
		if got, ok := g[name]; !ok {
			diff = append(diff, name+" missing")
		} else if got != data {
			diff = append(diff, name+" differs")
		}
	}
	for name := range g {
		if _, ok := w[name]; !ok {
			diff = append(diff, name+" is not in the directory")
		}
	}
	if len(diff) > 0 {
		sort.Strings(diff)
		return fmt.Errorf("%d differences (%d files): %s", len(diff), len(w)+1, strings.Join(diff, ", "))
	}
	return nil
}
