package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// imageLayoutEnv names an OCI layout written by `make image` (dist/oci) to
// take the controller from; unset, the test builds the linux/amd64 image
// itself with the same program, from the working tree as it is
// (-allow-dirty: a test, not a release).
const imageLayoutEnv = "OHMLAB_IMAGE_LAYOUT"

// imageController returns the ohmlab-controller binary taken out of the
// linux/amd64 layer of the image (hack/image extract), and the revision
// it must report.
func imageController(t *testing.T) (bin, revision string) {
	t.Helper()
	root := harness.RepoRoot()
	dir := t.TempDir()
	layoutDir := os.Getenv(imageLayoutEnv)
	if layoutDir == "" {
		out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
		if err != nil {
			t.Fatalf("git rev-parse HEAD: %v", err)
		}
		revision = strings.TrimSpace(string(out))
		hackImage(t, "build", "-root", root, "-out", filepath.Join(dir, "dist"), "-revision", revision, "-platforms", "linux/amd64", "-allow-dirty")
		layoutDir = filepath.Join(dir, "dist", "oci")
	}
	bin = filepath.Join(dir, "ohmlab-controller")
	hackImage(t, "extract", "-layout", layoutDir, "-platform", "linux/amd64", "-file", "/ohmlab-controller", "-out", bin)
	return bin, revision
}

// hackImage runs the image build program, a module of its own (it keeps
// go-containerregistry out of the product's go.mod).
func hackImage(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"-C", filepath.Join(harness.RepoRoot(), "hack", "image"), "run", "."}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/image %s: %v\n%s", args[0], err, out)
	}
}

// TestImageControllerReconcilesWithTheChartsCRD runs the controller binary
// the image ships (linux/amd64 layer), not one built for the test, with the
// CRD annotated as the chart of the same commit installs it: both objects of
// the demo go Ready, the build reports the VERSION file's release, the CRD
// check says 0; once the CRD claims another release, it says 1.
func TestImageControllerReconcilesWithTheChartsCRD(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	bin, revision := imageController(t)
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "VERSION"))
	g.Expect(err).NotTo(HaveOccurred())
	version := strings.TrimSpace(string(raw))

	env, err := Start(ctx, Options{Dir: t.TempDir(), Resync: 2 * time.Second, ControllerBin: bin})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(env.Stop)

	// The CRD as `helm install` of this commit's chart writes it.
	rendered := charttest.Filter(charttest.Render(t, nil), "CustomResourceDefinition")
	g.Expect(rendered).To(HaveLen(1))
	g.Expect(rendered[0].GetAnnotations()).To(HaveKeyWithValue("ohmlab.fr/revision", version))
	setCRDAnnotations(t, env, rendered[0].GetAnnotations())

	c := startController(t, env)
	for _, s := range []Sample{Keycloak, Grafana} {
		out, err := env.Apply(ctx, s)
		g.Expect(err).NotTo(HaveOccurred(), out)
	}
	for _, s := range []Sample{Keycloak, Grafana} {
		g.Expect(env.WaitReady(ctx, s)).To(Succeed())
	}
	kc, _ := readPath(t, env, Keycloak.Path)
	gr, _ := readPath(t, env, Grafana.Path)
	g.Expect(nested(gr, "admin.password")).To(Equal(nested(kc, "admin.password")), "the reference is copied")

	metrics := func() string { _, body := httpGet(ctx, "http://"+c.MetricsAddr+"/metrics"); return body }
	body := metrics()
	g.Expect(body).To(ContainSubstring(`ohmlab_crd_revision_mismatch{crd="vaultseeds.ohmlab.fr"} 0`), "same commit, same release")
	g.Expect(body).To(MatchRegexp(`ohmlab_build_info\{revision="[0-9a-f]{40}",version="` + version + `"\} 1`))
	if revision != "" {
		g.Expect(body).To(ContainSubstring(`ohmlab_build_info{revision="` + revision + `",version="` + version + `"} 1`))
	}

	// A chart of another release upgrades the CRD: the check, every
	// resync, reports the drift.
	other := rendered[0].GetAnnotations()
	other["ohmlab.fr/revision"] = "0.0.0-another-release"
	setCRDAnnotations(t, env, other)
	g.Eventually(metrics).WithTimeout(20*time.Second).
		Should(ContainSubstring(`ohmlab_crd_revision_mismatch{crd="vaultseeds.ohmlab.fr"} 1`), "the CRD claims another release")
}

func setCRDAnnotations(t *testing.T, env *Env, annotations map[string]string) {
	t.Helper()
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.CP.Client.Get(ctx, client.ObjectKey{Name: "vaultseeds.ohmlab.fr"}, crd); err != nil {
		t.Fatal(err)
	}
	crd.Annotations = annotations
	if err := env.CP.Client.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
}
