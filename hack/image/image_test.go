package main

import (
	"archive/tar"
	"bytes"
	stdcmp "cmp"
	"crypto/sha256"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// testEpoch pins what a release build takes from git.
const testEpoch = 1764547200 // 2025-12-01T00:00:00Z

// testRevision is the commit of the snapshot that buildOnce builds.
var testRevision string

var allPlatforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func testVersion(t testing.TB) string {
	t.Helper()
	v, err := os.ReadFile(filepath.Join(repoRoot(t), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(v))
}

// built is one release build, shared by the tests that only read it (a
// build cross-compiles two binaries for two platforms).
var built struct {
	once sync.Once
	res  *BuildResult
	out  string
	err  error
}

// buildOnce builds a snapshot of the working tree committed as it is
// (snapshot): a release build, which refuses a tree with uncommitted work.
func buildOnce(t *testing.T) (*BuildResult, string) {
	t.Helper()
	built.once.Do(func() {
		built.out, built.err = os.MkdirTemp("", "ohmlab-image-")
		if built.err != nil {
			return
		}
		root := filepath.Join(built.out, "src")
		testRevision = snapshot(t, root, time.Unix(testEpoch, 0))
		built.res, built.err = Build(BuildOptions{
			Root: root, Out: filepath.Join(built.out, "dist"), Version: testVersion(t), Revision: testRevision,
			SourceDateEpoch: testEpoch, Platforms: allPlatforms,
		}, io.Discard)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.res, filepath.Join(built.out, "dist")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.out != "" {
		_ = os.RemoveAll(built.out)
	}
	os.Exit(code)
}

// TestBuildIsReproducible builds the same commit twice, the second time
// from a clone at another path, with other file times and another umask
// (what differs between two machines), and expects the same digests and
// the same archive, byte for byte.
func TestBuildIsReproducible(t *testing.T) {
	first, firstOut := buildOnce(t)

	copyRoot := filepath.Join(t.TempDir(), "elsewhere", "ohmlab-controller")
	if rev := snapshot(t, copyRoot, time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)); rev != testRevision {
		t.Fatalf("the second snapshot is commit %s, the first %s", rev, testRevision)
	}
	old := syscall.Umask(0o077)
	second, err := Build(BuildOptions{
		Root: copyRoot, Out: t.TempDir(), Version: testVersion(t), Revision: testRevision,
		SourceDateEpoch: testEpoch, Platforms: allPlatforms,
	}, io.Discard)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("index digest: %s and %s", first.Digest, second.Digest)
	if first.Digest != second.Digest {
		t.Errorf("index digest %s, then %s", first.Digest, second.Digest)
	}
	if diff := cmp.Diff(first.Manifest, second.Manifest); diff != "" {
		t.Errorf("per-platform manifest digests differ (-first +second):\n%s", diff)
	}
	if a, b := fileSum(t, first.Archive), fileSum(t, second.Archive); a != b {
		t.Errorf("archive sha256 %s, then %s", a, b)
	}
	if a, b := fileSum(t, filepath.Join(firstOut, "provenance.json")), fileSum(t, filepath.Join(filepath.Dir(second.Layout), "provenance.json")); a != b {
		t.Errorf("provenance sha256 %s, then %s", a, b)
	}
}

// snapshot commits the working tree as it is (tracked files and new ones
// not ignored) into a new repository at to, every file with time mtime, and
// returns the commit: the same sources give the same commit, wherever and
// whenever they are copied.
func snapshot(t testing.TB, to string, mtime time.Time) string {
	t.Helper()
	copySources(t, repoRoot(t), to, mtime)
	return commitAll(t, to)
}

// commitAll commits every file under dir into a new repository there, at
// testEpoch, and returns the commit. Its remote origin is the project's
// repository, whose main branch holds the commit as a clone just fetched
// sees it.
func commitAll(t testing.TB, dir string) string {
	t.Helper()
	gitIn(t, dir, "init", "-q")
	gitIn(t, dir, "add", "-A")
	commit(t, dir)
	gitIn(t, dir, "remote", "add", "origin", SourceRepo+".git")
	gitIn(t, dir, "update-ref", "refs/remotes/origin/main", "HEAD")
	return gitIn(t, dir, "rev-parse", "HEAD")
}

// commit commits what is staged in dir, at testEpoch.
func commit(t testing.TB, dir string) {
	t.Helper()
	gitIn(t, dir, "-c", "user.name=ohmlab", "-c", "user.email=ohmlab@example.invalid", "-c", "commit.gpgsign=false",
		"commit", "-q", "--no-verify", "--allow-empty", "-m", "snapshot", "--date", "@"+fmt.Sprint(testEpoch))
}

// gitIn runs git in dir with fixed commit dates and no user configuration.
func gitIn(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_COMMITTER_DATE=@"+fmt.Sprint(testEpoch))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// copySources copies the files git knows of (tracked, and new ones not
// ignored), as a checkout on another machine would have them.
func copySources(t testing.TB, from, to string, mtime time.Time) {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = from
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
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
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dst, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(data))
}

// TestIndex checks the image index as a registry and a kubelet see it.
func TestIndex(t *testing.T) {
	res, _ := buildOnce(t)
	idx, err := LoadIndex(res.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d != res.Digest {
		t.Errorf("the layout holds index %s, the build says %s", d, res.Digest)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s", m.MediaType)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.String())
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: media type %s", d.Platform, d.MediaType)
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
	version := testVersion(t)
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": testRevision,
		"org.opencontainers.image.created":  "2025-12-01T00:00:00Z",
	} {
		if got := m.Annotations[k]; got != want {
			t.Errorf("index annotation %s = %q, want %q", k, got, want)
		}
	}
	if res.Tag != "ghcr.io/ohmlab/ohmlab-controller:"+version {
		t.Errorf("tag %s", res.Tag)
	}
}

// fsEntry is what the flattened filesystem of an image holds at a path.
type fsEntry struct {
	Mode     int64
	UID, GID int
	Size     int64 // regular files; -1 for a binary (size varies by release)
}

// TestImageFilesystemAndConfig checks each platform's image: the
// distroless-equivalent base and the two static binaries, nothing else (no
// shell, no package manager), every time the source date, and a config
// running the controller as 65532:65532.
func TestImageFilesystemAndConfig(t *testing.T) {
	res, _ := buildOnce(t)
	want := map[string]fsEntry{
		"etc":               {Mode: 0o755},
		"etc/group":         {Mode: 0o644, Size: 43},
		"etc/nsswitch.conf": {Mode: 0o644, Size: 17},
		"etc/passwd":        {Mode: 0o644, Size: 149},
		"home":              {Mode: 0o755},
		"home/nonroot":      {Mode: 0o700, UID: 65532, GID: 65532},
		"root":              {Mode: 0o700},
		"tmp":               {Mode: 0o1777},
		"ohmlab":            {Mode: 0o755, Size: -1},
		"ohmlab-controller": {Mode: 0o755, Size: -1},
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, p := range allPlatforms {
		t.Run(p.String(), func(t *testing.T) {
			img, err := PlatformImage(res.Index, p)
			if err != nil {
				t.Fatal(err)
			}
			files := map[string][]byte{}
			got := map[string]fsEntry{}
			tr := tar.NewReader(mutate.Extract(img))
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if !h.ModTime.Equal(time.Unix(testEpoch, 0)) {
					t.Errorf("%s: mtime %s, want the source date", h.Name, h.ModTime.UTC())
				}
				e := fsEntry{Mode: h.Mode, UID: h.Uid, GID: h.Gid, Size: h.Size}
				if h.Typeflag == tar.TypeReg {
					data, err := io.ReadAll(tr)
					if err != nil {
						t.Fatal(err)
					}
					files[h.Name] = data
					if h.Name == "ohmlab" || h.Name == "ohmlab-controller" {
						e.Size = -1
					}
				}
				got[h.Name] = e
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("filesystem (-want +got):\n%s", diff)
			}
			if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n") ||
				!strings.Contains(string(files["etc/group"]), "nonroot:x:65532:\n") {
				t.Errorf("no nonroot 65532 in /etc/passwd and /etc/group:\n%s%s", files["etc/passwd"], files["etc/group"])
			}
			for _, b := range Binaries {
				f, err := elf.NewFile(bytes.NewReader(files[b]))
				if err != nil {
					t.Fatalf("%s: %v", b, err)
				}
				if f.Machine != machines[p.Architecture] {
					t.Errorf("%s: ELF machine %s, want %s", b, f.Machine, machines[p.Architecture])
				}
				// No /etc/ssl nor /usr/share/zoneinfo in the image: both are
				// compiled in (internal/buildinfo).
				for _, pkg := range []string{"time/tzdata.loadFromEmbeddedTZData", "golang.org/x/crypto/x509roots/fallback.init"} {
					if !bytes.Contains(files[b], []byte(pkg)) {
						t.Errorf("%s does not link %s", b, pkg)
					}
				}
				for _, prog := range f.Progs {
					if prog.Type == elf.PT_INTERP {
						t.Errorf("%s: dynamically linked (PT_INTERP): the image has no libc", b)
					}
				}
			}

			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.OS != p.OS || cfg.Architecture != p.Architecture {
				t.Errorf("config platform %s/%s", cfg.OS, cfg.Architecture)
			}
			if !cfg.Created.Equal(time.Unix(testEpoch, 0)) {
				t.Errorf("config created %s", cfg.Created)
			}
			wantCfg := v1.Config{
				User: "65532:65532", Entrypoint: []string{"/ohmlab-controller"}, Env: []string{"PATH=/"},
				WorkingDir: "/home/nonroot", Labels: cfg.Config.Labels,
			}
			if diff := cmp.Diff(wantCfg, cfg.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if cfg.Config.Labels["org.opencontainers.image.revision"] != testRevision {
				t.Errorf("labels %v", cfg.Config.Labels)
			}
		})
	}
}

// TestExtractedBinaryIsTheReleasedOne runs the amd64 ohmlab taken out of
// the image layer (as the e2e test does with ohmlab-controller): it reports
// the VERSION file's release and the revision, and carries the fallback CA
// roots.
func TestExtractedBinaryIsTheReleasedOne(t *testing.T) {
	res, out := buildOnce(t)
	bin := filepath.Join(t.TempDir(), "ohmlab")
	if err := Extract(res.Layout, v1.Platform{OS: "linux", Architecture: "amd64"}, "/ohmlab", bin); err != nil {
		t.Fatal(err)
	}
	if a, b := fileSum(t, bin), fileSum(t, filepath.Join(out, "bin", "linux_amd64", "ohmlab")); a != b {
		t.Errorf("extracted %s, built %s", a, b)
	}
	if runtime.GOARCH == "amd64" {
		got, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("ohmlab version: %v\n%s", err, got)
		}
		if want := fmt.Sprintf("ohmlab %s (revision %s)\n", testVersion(t), testRevision); string(got) != want {
			t.Errorf("ohmlab version = %q, want %q", got, want)
		}
	}
	if err := Extract(res.Layout, v1.Platform{OS: "linux", Architecture: "arm64"}, "sh", filepath.Join(t.TempDir(), "sh")); err == nil {
		t.Error("extracting /sh succeeded: the image must have no shell")
	}
}

// TestProvenance checks the SLSA v1 predicate make sign attests against
// the real build: the builder is the Go toolchain go.mod pins, which built
// every binary, with the image build program's modules as its
// dependencies; the materials are the source commit, the toolchain's
// standard library and exactly the modules `go version -m` lists for the
// built binaries (the main module at that commit, each dependency with its
// go.sum hash).
func TestProvenance(t *testing.T) {
	_, out := buildOnce(t)
	raw, err := os.ReadFile(filepath.Join(out, "provenance.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p provenance
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	bd := p.BuildDefinition
	toolchain := goModToolchain(t, repoRoot(t))
	if bd.BuildType != buildType {
		t.Errorf("build type %q", bd.BuildType)
	}
	host := runtime.GOOS + "/" + runtime.GOARCH
	b := p.RunDetails.Builder
	// The builder is the release process, not a tool it runs: the Go
	// toolchain is one of its dependencies.
	if want := "https://github.com/ohmlab/ohmlab-controller/blob/main/docs/users/image.md#the-release-process"; b.ID != want {
		t.Errorf("builder id %q, want %q", b.ID, want)
	}
	wantToolchain := resourceDescriptor{Name: "go toolchain", URI: "pkg:golang/golang.org/toolchain@v0.0.1-" + toolchain + "." + runtime.GOOS + "-" + runtime.GOARCH}
	if len(b.BuilderDependencies) == 0 || !cmp.Equal(b.BuilderDependencies[0], wantToolchain) {
		t.Errorf("builder dependencies do not start with the Go toolchain %v: %v", wantToolchain, b.BuilderDependencies)
	}
	if b.Version["go"] != toolchain || b.Version["host"] != host || b.Version["imageBuilderGo"] != runtime.Version() {
		t.Errorf("builder version %v, want go %s on %s, the image builder's Go %s", b.Version, toolchain, host, runtime.Version())
	}
	ggcr := strings.TrimSpace(goIn(t, ".", "list", "-m", "-f", "{{.Path}}@{{.Version}}", "github.com/google/go-containerregistry"))
	ggcrPath, ggcrVersion, _ := strings.Cut(ggcr, "@")
	wantH1, _ := goModuleH1(goSum(t, "go.sum")[ggcrPath+" "+ggcrVersion])
	if !slices.ContainsFunc(b.BuilderDependencies, func(d resourceDescriptor) bool {
		return d.URI == "pkg:golang/"+ggcr && d.Digest["goModuleH1"] == wantH1 && wantH1 != ""
	}) {
		t.Errorf("builder dependencies lack %s with goModuleH1 %s:\n%v", ggcr, wantH1, b.BuilderDependencies)
	}
	wantSource := resourceDescriptor{URI: "git+https://github.com/ohmlab/ohmlab-controller", Digest: map[string]string{"gitCommit": testRevision}}
	if diff := cmp.Diff(wantSource, bd.ExternalParameters.Source); diff != "" {
		t.Errorf("source (-want +got):\n%s", diff)
	}
	if bd.InternalParameters.GoVersion != toolchain {
		t.Errorf("Go version %q, want go.mod's toolchain %q", bd.InternalParameters.GoVersion, toolchain)
	}
	if len(bd.InternalParameters.Settings) != 4 {
		t.Errorf("settings of %d binaries, want 4", len(bd.InternalParameters.Settings))
	}
	for name, s := range bd.InternalParameters.Settings {
		arch := strings.TrimPrefix(strings.Split(name, "/")[0], "linux_")
		for k, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux", "GOARCH": arch, "vcs.revision": testRevision, "vcs.modified": "false"} {
			if s[k] != want {
				t.Errorf("%s: build setting %s = %q, want %q", name, k, s[k], want)
			}
		}
	}
	// The toolchain does not record -ldflags under -trimpath: the build
	// program does.
	if flags := strings.Join(bd.InternalParameters.GoFlags, " "); !strings.Contains(flags, "-trimpath") ||
		!strings.Contains(flags, "buildinfo.Version="+testVersion(t)+" ") || !strings.Contains(flags, "buildinfo.Revision="+testRevision) {
		t.Errorf("Go flags %q lack -trimpath, the version or the revision", flags)
	}

	want := map[string]resourceDescriptor{}
	for _, d := range []resourceDescriptor{
		{Name: "source", URI: "git+https://github.com/ohmlab/ohmlab-controller@" + testRevision, Digest: map[string]string{"gitCommit": testRevision}},
		{Name: "go", URI: "pkg:golang/stdlib@" + strings.TrimPrefix(toolchain, "go")},
	} {
		want[d.URI] = d
	}
	bins, err := filepath.Glob(filepath.Join(out, "bin", "*", "*"))
	if err != nil || len(bins) != 4 {
		t.Fatalf("built binaries %v (%v), want 4", bins, err)
	}
	for _, bin := range bins {
		for _, m := range goVersionM(t, bin, toolchain) {
			want[m.URI] = m
		}
	}
	if !slices.ContainsFunc(slices.Collect(maps.Values(want)), func(d resourceDescriptor) bool {
		return strings.HasPrefix(d.URI, "pkg:golang/sigs.k8s.io/controller-runtime@") && d.Digest["goModuleH1"] != ""
	}) {
		t.Fatalf("go version -m lists no controller-runtime with its hash: %v", want)
	}
	got := map[string]resourceDescriptor{}
	for _, d := range bd.ResolvedDependencies {
		got[d.URI] = d
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolved dependencies, against go version -m of the built binaries (-want +got):\n%s", diff)
	}
}

// goVersionM is what `go version -m` says of a binary: the main module (at
// testRevision) and each dependency, its replacement if replaced, with its
// go.sum hash; and it checks the binary was built by toolchain.
func goVersionM(t *testing.T, bin, toolchain string) []resourceDescriptor {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(goIn(t, ".", "version", "-m", bin)), "\n")
	if !strings.HasSuffix(lines[0], ": "+toolchain) {
		t.Errorf("%s: %s, want %s", bin, lines[0], toolchain)
	}
	var mods []resourceDescriptor
	for _, line := range lines[1:] {
		f := strings.Split(strings.TrimPrefix(line, "\t"), "\t")
		switch f[0] {
		case "mod":
			mods = append(mods, resourceDescriptor{URI: "pkg:golang/" + f[1] + "@" + f[2], Digest: map[string]string{"gitCommit": testRevision}})
		case "dep", "=>":
			if f[0] == "=>" {
				mods = mods[:len(mods)-1]
			}
			d := resourceDescriptor{URI: "pkg:golang/" + f[1] + "@" + f[2]}
			if len(f) > 3 {
				h, ok := goModuleH1(f[3])
				if !ok {
					t.Fatalf("%s: %q is no go.sum hash", bin, f[3])
				}
				d.Digest = map[string]string{"goModuleH1": h}
			}
			mods = append(mods, d)
		}
	}
	return mods
}

// goModToolchain is the toolchain directive of dir's go.mod.
func goModToolchain(t *testing.T, dir string) string {
	t.Helper()
	tc := strings.TrimSpace(goIn(t, dir, "mod", "edit", "-print"))
	for _, line := range strings.Split(tc, "\n") {
		if v, ok := strings.CutPrefix(line, "toolchain "); ok {
			return v
		}
	}
	t.Fatalf("%s/go.mod has no toolchain directive", dir)
	return ""
}

func goIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// TestToolchainIsPinned: the product and the image build program (which
// gzips the layers) pin one Go release, so that the digest is the same on
// another machine.
func TestToolchainIsPinned(t *testing.T) {
	product, builder := goModToolchain(t, repoRoot(t)), goModToolchain(t, ".")
	if product != builder {
		t.Errorf("go.mod pins %s, hack/image/go.mod %s", product, builder)
	}
}

func goSum(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && !strings.HasSuffix(f[1], "/go.mod") {
			sums[f[0]+" "+f[1]] = f[2]
		}
	}
	return sums
}

// TestChartRunsTheImageAsItsUser checks that the chart's defaults run the
// image the way it is built: its numeric user and group (restricted Pod
// Security needs numbers, the image has no other account to offer) and its
// entrypoint.
func TestChartRunsTheImageAsItsUser(t *testing.T) {
	chart := filepath.Join(repoRoot(t), "charts", "ohmlab-controller")
	raw, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Image           struct{ Repository string }
		SecurityContext struct{ RunAsUser, RunAsGroup int }
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	if values.SecurityContext.RunAsUser != NonRoot || values.SecurityContext.RunAsGroup != NonRoot {
		t.Errorf("chart securityContext %d:%d, the image runs as %d:%d", values.SecurityContext.RunAsUser, values.SecurityContext.RunAsGroup, NonRoot, NonRoot)
	}
	if values.Image.Repository != Repository {
		t.Errorf("chart image.repository %q, the image is %q", values.Image.Repository, Repository)
	}
	// Every Deployment of the chart (one per process, one per shard) is
	// rendered from this one template.
	deployment, err := os.ReadFile(filepath.Join(chart, "templates", "_deployment.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(deployment), "command:\n            - /ohmlab-controller\n") {
		t.Error("the chart's Deployment does not run /ohmlab-controller, the image's entrypoint")
	}
}

// TestReleaseBuildRefusesUncommittedWork builds a small module of two
// commands in a fresh repository, changed in one way each: a release build
// refuses any change that git status --porcelain reports, and binaries
// whose build information names another commit than the one given; -allow-dirty
// builds the tree as it is and leaves no provenance to attest. The
// provenance's source is the repository of the remote the branch tracks
// (else origin), as its URL names it without credentials, and a release
// is refused without one, or when none of its branches holds the commit.
func TestReleaseBuildRefusesUncommittedWork(t *testing.T) {
	git := func(args ...string) func(t *testing.T, root string) {
		return func(t *testing.T, root string) { gitIn(t, root, args...) }
	}
	// write adds a file of package main that compiles beside main.go.
	write := func(name string) func(t *testing.T, root string) {
		return func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, name), "package main\n\nfunc init() {}\n")
		}
	}
	for _, tc := range []struct {
		name       string
		change     func(t *testing.T, root string)
		revision   string // "" the commit
		allowDirty bool
		refused    string // "": built
		provenance bool
		source     string // the provenance's source.uri: "" the project's
	}{
		{name: "clean", provenance: true},
		{name: "ignored build output", change: write("dist/leftover.go"), provenance: true},
		{name: "modified tracked file", change: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "cmd", "ohmlab", "main.go"), "package main\n\nfunc main() { println() }\n")
		}, refused: " M cmd/ohmlab/main.go"},
		{name: "untracked Go file", change: write("cmd/ohmlab/extra.go"), refused: "?? cmd/ohmlab/extra.go"},
		{name: "staged new file", change: func(t *testing.T, root string) {
			write("cmd/ohmlab/extra.go")(t, root)
			gitIn(t, root, "add", "cmd/ohmlab/extra.go")
		}, refused: "A  cmd/ohmlab/extra.go"},
		{name: "deleted tracked file", change: func(t *testing.T, root string) {
			if err := os.Remove(filepath.Join(root, "README")); err != nil {
				t.Fatal(err)
			}
		}, refused: " D README"},
		{name: "not a git checkout", change: func(t *testing.T, root string) {
			if err := os.RemoveAll(filepath.Join(root, ".git")); err != nil {
				t.Fatal(err)
			}
		}, refused: "git status in " /* the root */},
		{name: "revision other than the commit", change: func(t *testing.T, root string) { commit(t, root) },
			refused: `built from commit "`},
		{name: "revision not in the checkout", revision: "0123456789abcdef0123456789abcdef01234567",
			refused: "commit 0123456789abcdef0123456789abcdef01234567 is not in the checkout"},
		{name: "untracked Go file, development build", change: write("cmd/ohmlab/extra.go"), allowDirty: true},
		{name: "not a git checkout, development build", change: func(t *testing.T, root string) {
			if err := os.RemoveAll(filepath.Join(root, ".git")); err != nil {
				t.Fatal(err)
			}
		}, allowDirty: true},
		// The source is the repository as the checkout's remote names it.
		{name: "no remote", change: git("remote", "remove", "origin"), refused: `the checkout has no remote "origin"`},
		{name: "no remote, development build", change: git("remote", "remove", "origin"), allowDirty: true},
		{name: "commit on no branch of the remote", change: git("update-ref", "-d", "refs/remotes/origin/main"),
			refused: "is on no branch of remote origin (https://github.com/ohmlab/ohmlab-controller) as last fetched"},
		{name: "credentials in the remote's URL", change: git("remote", "set-url", "origin", "https://x-access-token:s3cr3t@github.com/ohmlab/ohmlab-controller.git/"),
			provenance: true},
		{name: "credentials in the remote's URL, commit on no branch of it", change: func(t *testing.T, root string) {
			git("remote", "set-url", "origin", "https://x-access-token:s3cr3t@github.com/ohmlab/ohmlab-controller.git")(t, root)
			git("update-ref", "-d", "refs/remotes/origin/main")(t, root)
		}, refused: "is on no branch of remote origin (https://github.com/ohmlab/ohmlab-controller)"},
		{name: "SSH remote", change: git("remote", "set-url", "origin", "git@github.com:ohmlab/ohmlab-controller.git"), provenance: true},
		{name: "the branch tracks a fork", change: func(t *testing.T, root string) {
			git("remote", "add", "fork", "ssh://git@github.com:22/someone/ohmlab-controller")(t, root)
			git("update-ref", "refs/remotes/fork/main", "HEAD")(t, root)
			git("config", "branch."+gitIn(t, root, "symbolic-ref", "--short", "HEAD")+".remote", "fork")(t, root)
		}, provenance: true, source: "git+https://github.com/someone/ohmlab-controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, out := t.TempDir(), t.TempDir()
			toolchain := goModToolchain(t, repoRoot(t))
			writeFile(t, filepath.Join(root, "go.mod"), "module example.com/two\n\ngo 1.26.0\n\ntoolchain "+toolchain+"\n")
			writeFile(t, filepath.Join(root, ".gitignore"), "dist/\n")
			writeFile(t, filepath.Join(root, "README"), "two commands\n")
			for _, cmd := range Binaries {
				writeFile(t, filepath.Join(root, "cmd", cmd, "main.go"), "package main\n\nfunc main() {}\n")
			}
			revision := commitAll(t, root)
			if tc.revision != "" {
				revision = tc.revision
			}
			if tc.change != nil {
				tc.change(t, root)
			}
			// A provenance of an earlier build must not survive a
			// development build.
			writeFile(t, filepath.Join(out, "provenance.json"), "{}")

			_, err := Build(BuildOptions{
				Root: root, Out: out, Version: "1.2.3", Revision: revision, SourceDateEpoch: testEpoch,
				Platforms: allPlatforms[:1], AllowDirty: tc.allowDirty,
			}, io.Discard)
			if err != nil && strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("Build's error carries the remote's credentials: %v", err)
			}
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("Build: %v, want a refusal naming %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			prov, err := os.ReadFile(filepath.Join(out, "provenance.json"))
			switch {
			case tc.provenance && (err != nil || !strings.Contains(string(prov), revision)):
				t.Errorf("provenance.json: %v, want one naming commit %s:\n%s", err, revision, prov)
			case !tc.provenance && !errors.Is(err, os.ErrNotExist):
				t.Errorf("a development build left provenance.json (%v):\n%s", err, prov)
			}
			if !tc.provenance {
				return
			}
			var p provenance
			if err := json.Unmarshal(prov, &p); err != nil {
				t.Fatal(err)
			}
			want := resourceDescriptor{URI: stdcmp.Or(tc.source, "git+https://github.com/ohmlab/ohmlab-controller"), Digest: map[string]string{"gitCommit": revision}}
			if diff := cmp.Diff(want, p.BuildDefinition.ExternalParameters.Source); diff != "" {
				t.Errorf("source (-want +got):\n%s", diff)
			}
			if strings.Contains(string(prov), "s3cr3t") {
				t.Error("the provenance carries the remote's credentials")
			}
		})
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

// TestCanonicalRepository: a remote's URL, as git accepts it, names the
// repository a verifier finds it at, never with the URL's credentials.
func TestCanonicalRepository(t *testing.T) {
	for _, tc := range []struct {
		remote, want, refused string
	}{
		{remote: "https://github.com/ohmlab/ohmlab-controller", want: "https://github.com/ohmlab/ohmlab-controller"},
		{remote: "https://github.com/ohmlab/ohmlab-controller.git/", want: "https://github.com/ohmlab/ohmlab-controller"},
		{remote: "https://x-access-token:s3cr3t@github.com/ohmlab/ohmlab-controller.git", want: "https://github.com/ohmlab/ohmlab-controller"},
		{remote: "https://git.example.com:8443/ohmlab/ohmlab-controller.git?ref=x#y", want: "https://git.example.com:8443/ohmlab/ohmlab-controller"},
		{remote: "git@github.com:ohmlab/ohmlab-controller.git", want: "https://github.com/ohmlab/ohmlab-controller"},
		{remote: "github.com:ohmlab/ohmlab-controller", want: "https://github.com/ohmlab/ohmlab-controller"},
		{remote: "ssh://git@github.com:22/ohmlab/ohmlab-controller.git", want: "https://github.com/ohmlab/ohmlab-controller"},
		{remote: "git://github.com/ohmlab/ohmlab-controller.git", want: "https://github.com/ohmlab/ohmlab-controller"},
		{remote: "/srv/git/ohmlab-controller.git", want: "file:///srv/git/ohmlab-controller"},
		{remote: "file:///srv/git/ohmlab-controller", want: "file:///srv/git/ohmlab-controller"},
		{remote: "../ohmlab-controller", refused: "names no repository a verifier can find"},
		{remote: "ftp://s3cr3t@example.com/repo", refused: `scheme "ftp"`},
		{remote: "https://s3cr3t@example.com/%zz", refused: "its URL is not one"},
	} {
		t.Run(tc.remote, func(t *testing.T) {
			got, err := canonicalRepository(tc.remote)
			switch {
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("canonicalRepository = %q, %v; want a refusal naming %q", got, err, tc.refused)
			case tc.refused == "" && (err != nil || got != tc.want):
				t.Errorf("canonicalRepository = %q, %v; want %q", got, err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("the error carries the URL's credentials: %v", err)
			}
		})
	}
}
