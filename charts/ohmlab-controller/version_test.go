package chart_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

// TestOneVersion checks that the release version has one source, the
// VERSION file (which the Makefile and hack/image stamp into the binaries
// and use as the image tag): the chart's version and appVersion, the
// default image tag and the CRD's ohmlab.fr/revision, which the controller
// compares with its build (OhmlabCRDRevisionMismatch), all carry it.
// `make verify` runs it.
// release is the VERSION file's release.
func release(t testing.TB) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(charttest.RepoRoot(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

func TestOneVersion(t *testing.T) {
	version := release(t)
	if version == "" {
		t.Fatal("VERSION is empty")
	}
	ch, err := charttest.Load()
	if err != nil {
		t.Fatal(err)
	}
	objs := charttest.Render(t, charttest.Values(t, "targets:\n  vault:\n    enabled: true\n    namespaces: [vault-operator-system]\n"))
	crds := charttest.Filter(objs, "CustomResourceDefinition")
	if len(crds) == 0 {
		t.Fatal("the chart renders no CRD")
	}
	deployments := charttest.Filter(objs, "Deployment")
	if len(deployments) == 0 {
		t.Fatal("the chart renders no Deployment")
	}

	got := map[string]string{
		"Chart.yaml version":    ch.Metadata.Version,
		"Chart.yaml appVersion": ch.Metadata.AppVersion,
	}
	for _, crd := range crds {
		got["CRD "+crd.GetName()+" ohmlab.fr/revision"] = crd.GetAnnotations()["ohmlab.fr/revision"]
	}
	for _, o := range deployments {
		var d appsv1.Deployment
		charttest.Convert(t, o, &d)
		for _, c := range d.Spec.Template.Spec.Containers {
			_, tag, _ := strings.Cut(c.Image, ":")
			got["Deployment "+d.Name+" image tag"] = tag
		}
	}
	for where, v := range got {
		if v != version {
			t.Errorf("%s is %q, VERSION is %q: bump them together (see the Makefile's VERSION)", where, v, version)
		}
	}
}
