package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// Kubectl runs bin/k8s/kubectl against the cluster as its administrator
// and returns its combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	bin, err := harness.Bin("k8s/kubectl")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Sample is the path of a manifest of config/samples.
func Sample(file string) string {
	return filepath.Join(harness.RepoRoot(), "config", "samples", file)
}

// LoadSample decodes a one-object manifest of config/samples.
func LoadSample(file string) (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(Sample(file))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}
