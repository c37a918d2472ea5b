package docs

import (
	"path/filepath"
	"strings"
	"testing"
)

// releasedChart is where make chart pushes the chart of a release
// (REGISTRY=ghcr.io/ohmlab, beside the image ghcr.io/ohmlab/ohmlab-controller).
const releasedChart = "oci://ghcr.io/ohmlab/charts/ohmlab-controller"

// TestInstallStartsFromTheOCIChart: the README's Install section installs
// the released chart, signed and pinned to its image, from its OCI
// registry at the VERSION file's release; the chart's directory is for
// development, named after it.
func TestInstallStartsFromTheOCIChart(t *testing.T) {
	readme := read(t, filepath.Join("..", "README.md"))
	_, section, ok := strings.Cut(readme, "\n## Install\n")
	if !ok {
		t.Fatal("README.md has no ## Install section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("README.md's Install section has no sh code block")
	}
	block, _, _ = strings.Cut(block, "```")
	command := strings.Join(strings.Fields(strings.ReplaceAll(block, "\\\n", " ")), " ")
	version := strings.TrimSpace(read(t, filepath.Join("..", "VERSION")))
	if want := "helm install ohmlab-controller " + releasedChart + " --version " + version + " "; !strings.HasPrefix(command, want) {
		t.Errorf("the Install section's first command is\n  %s\nwant it to start with\n  %s", command, want)
	}
	dev := strings.Index(section, "./charts/ohmlab-controller")
	if dev < 0 || !strings.Contains(section[max(0, dev-200):dev], "development") {
		t.Errorf("the Install section does not name ./charts/ohmlab-controller as the development install")
	}
}
