package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Module is the product's module path, the -X targets' prefix.
	Module = "github.com/ohmlab/ohmlab-controller"
	// SourceRepo is the repository the image's source annotation names.
	SourceRepo = "https://github.com/ohmlab/ohmlab-controller"
	// Repository is the image's repository (the chart's image.repository).
	Repository = "ghcr.io/ohmlab/ohmlab-controller"
	// NonRoot is the numeric user and group the image runs as (the chart's
	// securityContext.runAsUser and runAsGroup).
	NonRoot = 65532
)

// Binaries are the commands the image carries, each at /NAME.
var Binaries = []string{"ohmlab", "ohmlab-controller"}

// BuildOptions of one image build.
type BuildOptions struct {
	Root            string
	Out             string
	Version         string
	Revision        string
	SourceDateEpoch int64 // < 0: $SOURCE_DATE_EPOCH, else the commit time
	Platforms       []v1.Platform
	// AllowDirty builds a working tree that differs from its commit (a
	// development build): the image is built but no provenance is written,
	// since there is no commit that describes its sources.
	AllowDirty bool
	// Source is the repository the commit comes from, as the checkout's
	// remote names it (https://host/path): Build sets it, for a release.
	Source string
}

// BuildResult names what Build wrote.
type BuildResult struct {
	Tag      string // Repository:Version
	Digest   v1.Hash
	Layout   string
	Archive  string
	Index    v1.ImageIndex
	Manifest map[string]v1.Hash // per platform ("linux/amd64")
}

// goFlags are the flags of every go build of the image, recorded in the
// provenance. -trimpath keeps the checkout's path out of the binaries;
// -buildvcs=true has the toolchain record the commit it saw and whether the
// tree was modified, which the provenance reads back; -s -w drop the symbol
// table and DWARF.
func goFlags(version, revision string) []string {
	return []string{
		"-trimpath", "-buildvcs=true", "-mod=readonly",
		"-ldflags=-s -w -X " + Module + "/internal/buildinfo.Version=" + version +
			" -X " + Module + "/internal/buildinfo.Revision=" + revision,
	}
}

// goEnv is the environment of every go build: the toolchain go.mod pins
// (the digest depends on the compiler), no cgo (a static binary for an image
// with no libc) and the baseline of each architecture, whatever the
// builder's environment says.
func goEnv(toolchain string, p v1.Platform) []string {
	return []string{"GOTOOLCHAIN=" + toolchain, "CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Architecture, "GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=", "GOEXPERIMENT="}
}

// Build cross-compiles the binaries for each platform and assembles the
// image index, its OCI layout and archive, and the provenance predicate.
// Every timestamp is the source date epoch, so the same commit gives the
// same digest.
func Build(o BuildOptions, log io.Writer) (*BuildResult, error) {
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, err
	}
	if err := o.defaults(root); err != nil {
		return nil, err
	}
	changes, err := uncommitted(root)
	switch {
	case err != nil && !o.AllowDirty:
		return nil, fmt.Errorf("%w: a release is built from a git checkout (-allow-dirty for a development build)", err)
	case len(changes) > 0 && !o.AllowDirty:
		return nil, fmt.Errorf("the working tree differs from commit %s (git status --porcelain):\n  %s\n"+
			"a release is built from a clean checkout; a development build takes -allow-dirty (make image IMAGE_ALLOW_DIRTY=1) and has no provenance",
			o.Revision, strings.Join(changes, "\n  "))
	}
	release := err == nil && len(changes) == 0
	if release {
		o.Source, err = sourceRepository(root, o.Revision)
		switch {
		case err != nil && !o.AllowDirty:
			return nil, fmt.Errorf("%w\na development build takes -allow-dirty (make image IMAGE_ALLOW_DIRTY=1) and has no provenance", err)
		case err != nil:
			fmt.Fprintf(log, "development build: %v\n", err)
			release = false
		}
	} else {
		fmt.Fprintf(log, "development build: the working tree is not commit %s, no provenance is written\n", o.Revision)
	}
	toolchain, err := pinnedToolchain(root)
	if err != nil {
		return nil, err
	}
	created := time.Unix(o.SourceDateEpoch, 0).UTC()
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	binDir := filepath.Join(o.Out, "bin")
	if err := os.RemoveAll(binDir); err != nil {
		return nil, err
	}

	base, err := layerFromEntries(baseEntries(created))
	if err != nil {
		return nil, err
	}
	anns := map[string]string{
		"org.opencontainers.image.source":   SourceRepo,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.created":  created.Format(time.RFC3339),
		"org.opencontainers.image.title":    "ohmlab-controller",
	}
	res := &BuildResult{Tag: Repository + ":" + o.Version, Manifest: map[string]v1.Hash{}}
	var adds []mutate.IndexAddendum
	var built []string
	for _, p := range o.Platforms {
		dir := filepath.Join(binDir, p.OS+"_"+p.Architecture)
		fmt.Fprintf(log, "go build %s (%s/%s)\n", strings.Join(Binaries, " "), p.OS, p.Architecture)
		if err := goBuild(root, dir, toolchain, p, o.Version, o.Revision); err != nil {
			return nil, err
		}
		var files []entry
		for _, b := range Binaries {
			data, err := os.ReadFile(filepath.Join(dir, b))
			if err != nil {
				return nil, err
			}
			files = append(files, entry{name: b, mode: 0o755, data: data, mtime: created})
			built = append(built, filepath.Join(dir, b))
		}
		bins, err := layerFromEntries(files)
		if err != nil {
			return nil, err
		}
		img, err := platformImage(base, bins, p, created, anns)
		if err != nil {
			return nil, err
		}
		d, err := img.Digest()
		if err != nil {
			return nil, err
		}
		res.Manifest[p.OS+"/"+p.Architecture] = d
		pl := p
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &pl}})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	idx = mutate.Annotations(idx, anns).(v1.ImageIndex)
	if res.Digest, err = idx.Digest(); err != nil {
		return nil, err
	}
	res.Index = idx

	res.Layout = filepath.Join(o.Out, "oci")
	if err := os.RemoveAll(res.Layout); err != nil {
		return nil, err
	}
	lp, err := layout.Write(res.Layout, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Version,
	})); err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	res.Archive = filepath.Join(o.Out, "ohmlab-controller-"+o.Version+".oci.tar")
	if err := archiveDir(res.Layout, res.Archive, created); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "digest"), []byte(res.Digest.String()+"\n"), 0o644); err != nil {
		return nil, err
	}
	provPath := filepath.Join(o.Out, "provenance.json")
	if !release {
		// A provenance left by an earlier build would describe other
		// binaries: make sign must find none to attest.
		if err := os.Remove(provPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return res, nil
	}
	prov, err := Provenance(o, toolchain, built)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(provPath, prov, 0o644); err != nil {
		return nil, err
	}
	return res, nil
}

func (o *BuildOptions) defaults(root string) error {
	if o.Version == "" {
		v, err := os.ReadFile(filepath.Join(root, "VERSION"))
		if err != nil {
			return err
		}
		o.Version = strings.TrimSpace(string(v))
	}
	if o.Version == "" || strings.ContainsAny(o.Version, " \t\n/:") {
		return fmt.Errorf("version %q: want one word usable as an image tag", o.Version)
	}
	if o.Revision == "" {
		out, err := git(root, "rev-parse", "HEAD")
		if err != nil {
			return err
		}
		o.Revision = out
	}
	if o.SourceDateEpoch < 0 {
		s := os.Getenv("SOURCE_DATE_EPOCH")
		if s == "" {
			var err error
			if s, err = git(root, "log", "-1", "--format=%ct"); err != nil {
				return err
			}
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("source date epoch %q: want seconds since 1970", s)
		}
		o.SourceDateEpoch = n
	}
	if len(o.Platforms) == 0 {
		return fmt.Errorf("no platform to build")
	}
	return nil
}

// uncommitted lists what git status --porcelain reports in the tree at
// root: changed tracked files, staged or not, and untracked files that are
// not ignored (a new .go file would be compiled in).
func uncommitted(root string) ([]string, error) {
	cmd := exec.Command("git", "status", "--porcelain", "--untracked-files=all")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git status in %s: %w", root, err)
	}
	// Not git's TrimSpace: " M file" starts with a space.
	if s := strings.TrimRight(string(out), "\n"); s != "" {
		return strings.Split(s, "\n"), nil
	}
	return nil, nil
}

// sourceRepository is the repository commit revision comes from, as the
// checkout at root sees it: the remote its branch tracks (else origin),
// holding the commit on one of its branches as last fetched, its URL
// without credentials as https://host/path (an SSH or scp-like address
// names the same repository).
func sourceRepository(root, revision string) (string, error) {
	if _, err := git(root, "rev-parse", "--verify", "-q", revision+"^{commit}"); err != nil {
		return "", fmt.Errorf("commit %s is not in the checkout", revision)
	}
	remote := "origin"
	if branch, err := git(root, "symbolic-ref", "-q", "--short", "HEAD"); err == nil {
		if r, err := git(root, "config", "branch."+branch+".remote"); err == nil && r != "" && r != "." {
			remote = r
		}
	}
	raw, err := git(root, "remote", "get-url", remote)
	if err != nil {
		return "", fmt.Errorf("the checkout has no remote %q: a release names the repository its commit comes from (git remote add %s %s.git)", remote, remote, SourceRepo)
	}
	repo, err := canonicalRepository(raw)
	if err != nil {
		return "", fmt.Errorf("remote %s: %w", remote, err)
	}
	held, err := git(root, "for-each-ref", "--contains", revision, "--format=%(refname)", "refs/remotes/"+remote+"/")
	if err != nil {
		return "", err
	}
	if held == "" {
		return "", fmt.Errorf("commit %s is on no branch of remote %s (%s) as last fetched: a release is built from a commit its repository holds (push it, git fetch %s)", revision, remote, repo, remote)
	}
	return repo, nil
}

// scpLike is git's user@host:path address form.
var scpLike = regexp.MustCompile(`^(?:[^@/]+@)?([^:/]+):(.+)$`)

// canonicalRepository names a remote's repository: credentials, the .git
// suffix and a trailing slash dropped; an SSH address as its https://
// form (the same host serves both); a local path as file://.
func canonicalRepository(raw string) (string, error) {
	var u *url.URL
	if m := scpLike.FindStringSubmatch(raw); m != nil && !strings.Contains(raw, "://") {
		u = &url.URL{Scheme: "https", Host: m[1], Path: "/" + strings.TrimPrefix(m[2], "/")}
	} else {
		var err error
		if u, err = url.Parse(raw); err != nil {
			// url's error quotes the address, credentials included.
			return "", fmt.Errorf("its URL is not one")
		}
		switch u.Scheme {
		case "ssh", "git+ssh", "git":
			u.Scheme, u.Host = "https", u.Hostname()
		case "https", "http", "file":
		case "":
			if !filepath.IsAbs(raw) {
				return "", fmt.Errorf("its URL %q names no repository a verifier can find", raw)
			}
			u = &url.URL{Scheme: "file", Path: raw}
		default:
			return "", fmt.Errorf("its URL's scheme %q names no repository a verifier can find", u.Scheme)
		}
	}
	u.User, u.RawQuery, u.Fragment, u.RawPath = nil, "", "", ""
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), ".git")
	return u.String(), nil
}

// pinnedToolchain is go.mod's toolchain directive (go1.26.8): the Go release
// the binaries, hence the digest, are built with on any machine.
func pinnedToolchain(root string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "toolchain" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s has no toolchain directive: the image's digest depends on the Go release that builds it", filepath.Join(root, "go.mod"))
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

func goBuild(root, dir, toolchain string, p v1.Platform, version, revision string) error {
	args := append([]string{"build"}, goFlags(version, revision)...)
	args = append(args, "-o", dir+string(filepath.Separator))
	for _, b := range Binaries {
		args = append(args, "./cmd/"+b)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), goEnv(toolchain, p)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// platformImage is one platform's image: the base layer, the binaries'
// layer, and a config that runs /ohmlab-controller as nonroot.
func platformImage(base, bins v1.Layer, p v1.Platform, created time.Time, anns map[string]string) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	at := v1.Time{Time: created}
	img, err := mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: at, CreatedBy: "hack/image: /etc/passwd, /etc/group (nonroot 65532), /home/nonroot, /tmp",
		}},
		mutate.Addendum{Layer: bins, MediaType: types.OCILayer, History: v1.History{
			Created: at, CreatedBy: "hack/image: go build " + strings.Join(Binaries, " "),
		}},
	)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = at
	cfg.Author = ""
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
		Entrypoint: []string{"/ohmlab-controller"},
		// PATH=/ so that a command "ohmlab" resolves without a shell.
		Env:        []string{"PATH=/"},
		WorkingDir: "/home/nonroot",
		Labels:     anns,
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, anns).(v1.Image), nil
}

// layerFromEntries is a gzip-compressed OCI layer of the entries, in their
// order (baseEntries and the binaries come sorted).
func layerFromEntries(entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	if err := writeTar(&buf, entries); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression))
}

func parsePlatforms(s string) ([]v1.Platform, error) {
	var ps []v1.Platform
	for _, f := range strings.Split(s, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if p.OS != "linux" || (p.Architecture != "amd64" && p.Architecture != "arm64") {
			return nil, fmt.Errorf("platform %q: want linux/amd64 or linux/arm64", f)
		}
		ps = append(ps, *p)
	}
	return ps, nil
}
