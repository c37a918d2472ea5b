package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	helmregistry "helm.sh/helm/v3/pkg/registry"
)

const chartDir = "../../charts/ohmlab-controller"

// testEpoch is the commit time of the snapshots the tests commit.
const testEpoch = 1764547200 // 2025-12-01T00:00:00Z

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
	_, err := Package(PackageOptions{Chart: chartDir, Version: "0.0.0-other", Out: out, AllowDirty: true, SourceDateEpoch: 0}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `want "0.0.0-other"`) {
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
	file, err := Package(PackageOptions{Chart: chartDir, Version: v, Out: t.TempDir(), AllowDirty: true, SourceDateEpoch: testEpoch}, io.Discard)
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

// snapshot copies the files git knows of in the repository (tracked, and
// new ones not ignored), every file with time mtime, into a new repository
// at to, commits them at testEpoch and returns the commit: the same sources
// give the same commit wherever and whenever they are copied.
func snapshot(t *testing.T, to string, mtime time.Time) string {
	t.Helper()
	from, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := gitIn(t, from, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	for _, rel := range strings.Split(strings.TrimRight(out, "\x00"), "\x00") {
		src := filepath.Join(from, rel)
		st, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) || (err == nil && !st.Mode().IsRegular()) {
			continue // deleted in the working tree, or the bin symlink
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dst, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, to, "init", "-q")
	gitIn(t, to, "add", "-A")
	gitIn(t, to, "-c", "user.name=ohmlab", "-c", "user.email=ohmlab@example.invalid", "-c", "commit.gpgsign=false",
		"commit", "-q", "--no-verify", "-m", "snapshot", "--date", "@"+fmt.Sprint(testEpoch))
	return strings.TrimSpace(gitIn(t, to, "rev-parse", "HEAD"))
}

// gitIn runs git in dir with fixed commit dates and no user configuration.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_COMMITTER_DATE=@"+fmt.Sprint(testEpoch))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// imageDist writes what make image leaves in dist for a release build of
// commit: the index digest and the provenance naming the commit.
func imageDist(t *testing.T, dist, digest, commit string) {
	t.Helper()
	if err := os.MkdirAll(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	prov := `{"buildDefinition": {"externalParameters": {"source": {"uri": "git+https://github.com/ohmlab/ohmlab-controller", "digest": {"gitCommit": "` + commit + `"}}}}}`
	for name, data := range map[string]string{"digest": digest + "\n", "provenance.json": prov} {
		if err := os.WriteFile(filepath.Join(dist, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// makeChart runs make chart (no REGISTRY: package only) in root, writing
// into dist, with extra make variables.
func makeChart(t *testing.T, root, dist string, vars ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", root, "chart", "DIST=" + dist}, vars...)...)
	// The commit's time, as in a release: not one the caller's environment sets.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SOURCE_DATE_EPOCH=") })
	out, err := cmd.CombinedOutput()
	t.Logf("$ make chart %s\n%s", strings.Join(vars, " "), out)
	return string(out), err
}

// archiveFiles reads a chart archive: each file's content, and the
// modification times its entries carry.
func archiveFiles(t *testing.T, file string) (map[string]string, map[time.Time]int) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files, times := map[string]string{}, map[time.Time]int{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(data)
		times[h.ModTime.UTC()]++
	}
	return files, times
}

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestMakeChartIsAReleaseOfACleanCommit runs make chart in a snapshot of
// the repository, changed in one way each: a working tree that differs
// from its commit is refused (CHART_ALLOW_DIRTY=1 packages the tree as it
// is, clean or not, as a development chart: image.digest unset, what make
// test-cluster installs with the image it imported by tag); a release chart pins the digest
// make image wrote into DIST, and only that of an image built from the
// same commit; its values.yaml is the chart's but for that line.
func TestMakeChartIsAReleaseOfACleanCommit(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ohmlab-controller")
	commit := snapshot(t, root, time.Unix(testEpoch, 0))
	v := version(t)
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		change     func(t *testing.T)
		imageOf    string // the commit make image built: "" none
		allowDirty bool
		refused    string // "": packaged
		digest     string // image.digest in the archive
	}{
		{name: "clean commit, its image", imageOf: commit, digest: testDigest},
		{name: "untracked file", imageOf: commit, change: func(t *testing.T) {
			writeFile(t, filepath.Join(root, "charts", "ohmlab-controller", "templates", "extra.yaml"), "kind: ConfigMap\n")
		}, refused: "?? charts/ohmlab-controller/templates/extra.yaml"},
		{name: "modified tracked file outside the chart", imageOf: commit, change: func(t *testing.T) {
			writeFile(t, filepath.Join(root, "README.md"), "changed\n")
		}, refused: " M README.md"},
		{name: "staged change", imageOf: commit, change: func(t *testing.T) {
			writeFile(t, filepath.Join(root, "charts", "ohmlab-controller", "values.yaml"), string(values)+"# more\n")
			gitIn(t, root, "add", "charts/ohmlab-controller/values.yaml")
		}, refused: "M  charts/ohmlab-controller/values.yaml"},
		{name: "no image built", refused: "run make image first"},
		{name: "image of another commit", imageOf: "0123456789abcdef0123456789abcdef01234567",
			refused: `was built from commit "0123456789abcdef0123456789abcdef01234567", the chart is commit ` + commit},
		{name: "untracked file, development chart", allowDirty: true, change: func(t *testing.T) {
			writeFile(t, filepath.Join(root, "notes.txt"), "wip\n")
		}, digest: ""},
		{name: "clean commit, development chart", imageOf: commit, allowDirty: true, digest: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gitIn(t, root, "reset", "-q", "--hard")
			gitIn(t, root, "clean", "-q", "-fdx")
			if tc.change != nil {
				tc.change(t)
			}
			dist := t.TempDir()
			if tc.imageOf != "" {
				imageDist(t, dist, testDigest, tc.imageOf)
			}
			var vars []string
			if tc.allowDirty {
				vars = append(vars, "CHART_ALLOW_DIRTY=1")
			}
			out, err := makeChart(t, root, dist, vars...)
			archive := filepath.Join(dist, "ohmlab-controller-"+v+".tgz")
			if tc.refused != "" {
				if err == nil || !strings.Contains(out, tc.refused) {
					t.Errorf("make chart: %v, want a refusal naming %q", err, tc.refused)
				}
				if _, err := os.Stat(archive); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("make chart refused but left %s (%v)", archive, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("make chart: %v", err)
			}
			chrt, err := loader.Load(archive)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := chartutil.Values(chrt.Values).PathValue("image.digest"); err != nil || got != tc.digest {
				t.Errorf("the archive's image.digest is %v (%v), want %q", got, err, tc.digest)
			}
			files, _ := archiveFiles(t, archive)
			wantValues := string(values)
			if tc.digest != "" {
				wantValues = strings.Replace(wantValues, "\n  digest: \"\"\n", "\n  digest: \""+tc.digest+"\"\n", 1)
			}
			if diff := cmp.Diff(wantValues, files["ohmlab-controller/values.yaml"]); diff != "" {
				t.Errorf("the archive's values.yaml (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMakeChartIsReproducible packages the same commit twice, from two
// checkouts at other paths with other file times, at two moments: the same
// archive byte for byte (so a second push of a version moves no tag), its
// files stamped with the commit's time.
func TestMakeChartIsReproducible(t *testing.T) {
	var sums []string
	for i, mtime := range []time.Time{time.Unix(testEpoch, 0), time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)} {
		root := filepath.Join(t.TempDir(), fmt.Sprintf("checkout-%d", i), "ohmlab-controller")
		commit := snapshot(t, root, mtime)
		dist := t.TempDir()
		imageDist(t, dist, testDigest, commit)
		if _, err := makeChart(t, root, dist); err != nil {
			t.Fatalf("make chart: %v", err)
		}
		archive := filepath.Join(dist, "ohmlab-controller-"+version(t)+".tgz")
		raw, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, fmt.Sprintf("%x", sha256.Sum256(raw)))
		files, times := archiveFiles(t, archive)
		if want := map[time.Time]int{time.Unix(testEpoch, 0).UTC(): len(files)}; !cmp.Equal(want, times) {
			t.Errorf("the archive's file times %v, want all %d the commit's (%s)", times, len(files), time.Unix(testEpoch, 0).UTC())
		}
	}
	t.Logf("archive sha256: %s and %s", sums[0], sums[1])
	if sums[0] != sums[1] {
		t.Errorf("the same commit packaged twice: archive sha256 %s, then %s", sums[0], sums[1])
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
