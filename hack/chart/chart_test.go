package main

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	helmregistry "helm.sh/helm/v3/pkg/registry"
)

const chartDir = "../../charts/ohmlab-controller"

func version(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

// TestPackageRefusesAnotherVersion: the archive carries the VERSION
// file's release or is not written.
func TestPackageRefusesAnotherVersion(t *testing.T) {
	out := t.TempDir()
	if _, err := Package(chartDir, "0.0.0-other", out); err == nil || !strings.Contains(err.Error(), `want "0.0.0-other"`) {
		t.Errorf("Package with another version: %v, want a refusal naming it", err)
	}
	if files, _ := os.ReadDir(out); len(files) != 0 {
		t.Errorf("Package wrote %v after refusing", files)
	}
}

// TestPushedChartIsTheArchive pushes the packaged chart to a registry on
// loopback and pulls it back by the digest Push returned, with Helm's
// registry client as helm install does: the same archive, its metadata the
// chart's, tagged VERSION.
func TestPushedChartIsTheArchive(t *testing.T) {
	v := version(t)
	file, err := Package(chartDir, v, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if want := "ohmlab-controller-" + v + ".tgz"; filepath.Base(file) != want {
		t.Errorf("Package wrote %s, want %s", filepath.Base(file), want)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	ref, err := Push(file, "oci://"+host+"/charts/", 0, true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, host+"/charts/ohmlab-controller@sha256:") {
		t.Fatalf("Push returned %s, want %s/charts/ohmlab-controller@sha256:...", ref, host)
	}
	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptWriter(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(ref)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pulled.Chart.Data, want) {
		t.Errorf("pulled %d bytes, not the %d of %s", len(pulled.Chart.Data), len(want), file)
	}
	if m := pulled.Chart.Meta; m.Name != "ohmlab-controller" || m.Version != v {
		t.Errorf("pulled chart %s %s, want ohmlab-controller %s", m.Name, m.Version, v)
	}
	tags, err := client.Tags(host + "/charts/ohmlab-controller")
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 1 || tags[0] != v {
		t.Errorf("tags %v, want [%s]", tags, v)
	}
}
