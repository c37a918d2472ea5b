package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
)

// PackageOptions of one chart archive.
type PackageOptions struct {
	// Chart is the chart's directory, inside a git checkout.
	Chart   string
	Version string
	Out     string
	// SourceDateEpoch is the time of every file in the archive (< 0: the
	// commit's), so that the same commit gives the same archive.
	SourceDateEpoch int64
	// Image is make image's output directory: a release chart pins its
	// digest (image.digest), and its provenance must name this commit.
	Image string
	// AllowDirty packages the working tree as it is, even one that differs
	// from its commit (a development chart): image.digest is left as the
	// chart has it.
	AllowDirty bool
}

// imageDigest is the form of make image's digest file and of image.digest.
var imageDigest = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// Package loads the chart (honouring .helmignore) and writes its archive
// NAME-VERSION.tgz into Out, as `helm package` does, with every file's
// time the source date: byte for byte the same for the same commit. A
// chart that does not carry Version as both its version and appVersion is
// refused: the release has one version (make verify checks the directory,
// this the archive). A release chart comes from a clean checkout and pins
// the digest of the image make image built from the same commit.
func Package(o PackageOptions, log io.Writer) (string, error) {
	chrt, err := loader.Load(o.Chart)
	if err != nil {
		return "", fmt.Errorf("loading the chart %s: %w", o.Chart, err)
	}
	if o.Version == "" {
		return "", fmt.Errorf("package: -version is required")
	}
	if m := chrt.Metadata; m.Version != o.Version || m.AppVersion != o.Version {
		return "", fmt.Errorf("chart %s has version %q and appVersion %q, want %q for both", m.Name, m.Version, m.AppVersion, o.Version)
	}
	revision, changes, gitErr := checkout(o.Chart)
	switch {
	case gitErr != nil && !o.AllowDirty:
		return "", fmt.Errorf("%w: a release chart is packaged from a git checkout (-allow-dirty for a development chart)", gitErr)
	case len(changes) > 0 && !o.AllowDirty:
		return "", fmt.Errorf("the working tree differs from commit %s (git status --porcelain):\n  %s\n"+
			"a release chart is packaged from a clean checkout; a development chart takes -allow-dirty (make chart CHART_ALLOW_DIRTY=1)",
			revision, strings.Join(changes, "\n  "))
	}
	if o.AllowDirty {
		// Even from a clean tree: the development chart runs the image by
		// its tag, as make test-cluster imports it.
		fmt.Fprintln(log, "development chart: the working tree as it is, image.digest left as the chart has it")
	} else {
		digest, err := releaseImage(o.Image, revision)
		if err != nil {
			return "", err
		}
		if err := pinImageDigest(chrt, digest); err != nil {
			return "", err
		}
	}
	if o.SourceDateEpoch < 0 {
		if gitErr != nil {
			return "", fmt.Errorf("no source date: give -source-date-epoch outside a git checkout")
		}
		out, err := git(o.Chart, "log", "-1", "--format=%ct")
		if err != nil {
			return "", err
		}
		if o.SourceDateEpoch, err = strconv.ParseInt(out, 10, 64); err != nil {
			return "", fmt.Errorf("commit time %q: %w", out, err)
		}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(o.Out, ".chart-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	saved, err := chartutil.Save(chrt, tmp)
	if err != nil {
		return "", fmt.Errorf("packaging %s: %w", o.Chart, err)
	}
	file := filepath.Join(o.Out, filepath.Base(saved))
	if err := normalize(saved, file, time.Unix(o.SourceDateEpoch, 0).UTC()); err != nil {
		return "", fmt.Errorf("packaging %s: %w", o.Chart, err)
	}
	return file, nil
}

// checkout returns the commit of the git checkout holding dir and what git
// status --porcelain lists in its whole tree: tracked files changed, staged
// or not, and untracked files that are not ignored. The chart ships the
// CRD and pins the image of that commit, so any change counts.
func checkout(dir string) (string, []string, error) {
	root, err := git(dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", nil, err
	}
	revision, err := git(root, "rev-parse", "HEAD")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("git", "status", "--porcelain", "--untracked-files=all")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("git status in %s: %w", root, err)
	}
	// Not TrimSpace: " M file" starts with a space.
	if s := strings.TrimRight(string(out), "\n"); s != "" {
		return revision, strings.Split(s, "\n"), nil
	}
	return revision, nil, nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w", strings.Join(args, " "), dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// releaseImage reads the digest make image wrote into dir, and checks that
// its provenance (written only by a release build) names revision: the
// chart pins an image of its own commit.
func releaseImage(dir, revision string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("a release chart pins its image: -image is required (make image's output directory)")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "digest"))
	if err != nil {
		return "", fmt.Errorf("a release chart pins its image: %w (run make image first)", err)
	}
	digest := strings.TrimSpace(string(raw))
	if !imageDigest.MatchString(digest) {
		return "", fmt.Errorf("%s holds %q, want sha256:<64 hex digits>", filepath.Join(dir, "digest"), digest)
	}
	provFile := filepath.Join(dir, "provenance.json")
	raw, err = os.ReadFile(provFile)
	if err != nil {
		return "", fmt.Errorf("the image in %s is no release build (%w): a release chart pins a release image", dir, err)
	}
	var prov struct {
		BuildDefinition struct {
			ExternalParameters struct {
				Source struct {
					Digest map[string]string `json:"digest"`
				} `json:"source"`
			} `json:"externalParameters"`
		} `json:"buildDefinition"`
	}
	if err := json.Unmarshal(raw, &prov); err != nil {
		return "", fmt.Errorf("%s: %w", provFile, err)
	}
	if got := prov.BuildDefinition.ExternalParameters.Source.Digest["gitCommit"]; got != revision {
		return "", fmt.Errorf("the image %s in %s was built from commit %q, the chart is commit %s: run make image again", digest, dir, got, revision)
	}
	return digest, nil
}

// imageDigestLine is values.yaml's image.digest, empty: the line the
// release chart sets, comments and the rest of the file kept as written.
var imageDigestLine = regexp.MustCompile(`(?m)^  digest: ""$`)

// pinImageDigest sets image.digest in the chart's values.yaml (what
// packaging writes) and in its parsed values.
func pinImageDigest(chrt *chart.Chart, digest string) error {
	for _, f := range chrt.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		text := string(f.Data)
		start := strings.Index(text, "\nimage:\n")
		if start < 0 {
			return fmt.Errorf("%s has no top-level image: block", f.Name)
		}
		block := text[start+1:]
		if end := regexp.MustCompile(`(?m)^\S`).FindAllStringIndex(block, 2); len(end) == 2 {
			block = block[:end[1][0]]
		}
		if n := len(imageDigestLine.FindAllString(block, -1)); n != 1 {
			return fmt.Errorf("%s's image: block has %d lines `  digest: \"\"`, want 1", f.Name, n)
		}
		pinned := imageDigestLine.ReplaceAllString(block, `  digest: "`+digest+`"`)
		f.Data = []byte(text[:start+1] + pinned + text[start+1+len(block):])
		values, err := chartutil.ReadValues(f.Data)
		if err != nil {
			return fmt.Errorf("%s with the digest: %w", f.Name, err)
		}
		if got, _ := values.PathValue("image.digest"); got != digest {
			return fmt.Errorf("%s with the digest has image.digest %v", f.Name, got)
		}
		chrt.Values = values
		return nil
	}
	return fmt.Errorf("the chart has no %s", chartutil.ValuesfileName)
}

// normalize rewrites the archive Helm wrote (its files stamped with the
// time of packaging) with every file's time mtime, the same entries in the
// same order, and the gzip header Helm writes (no name, no time).
func normalize(from, to string, mtime time.Time) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	zw.Header = gzip.Header{Extra: zr.Header.Extra, Comment: zr.Header.Comment, OS: 255}
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			return fmt.Errorf("%s: unexpected entry type %q in Helm's archive", h.Name, h.Typeflag)
		}
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: h.Name, Mode: h.Mode, Size: h.Size, ModTime: mtime,
		}); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(to, buf.Bytes(), 0o644)
}

// Push pushes the archive to repo/NAME:VERSION with Helm's registry client
// (credentials as `helm registry login` stored them), the manifest's
// creation time set from epoch when it is not negative, and returns
// repo/NAME@DIGEST.
func Push(file, repo string, epoch int64, insecure bool, log io.Writer) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	chrt, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", file, err)
	}
	opts := []registry.ClientOption{registry.ClientOptWriter(log)}
	if insecure {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return "", err
	}
	repo = strings.TrimSuffix(strings.TrimPrefix(repo, registry.OCIScheme+"://"), "/")
	var push []registry.PushOption
	if epoch >= 0 {
		push = append(push, registry.PushOptCreationTime(time.Unix(epoch, 0).UTC().Format(time.RFC3339)))
	}
	res, err := client.Push(data, repo+"/"+chrt.Metadata.Name+":"+chrt.Metadata.Version, push...)
	if err != nil {
		return "", fmt.Errorf("pushing %s to %s: %w", file, repo, err)
	}
	return repo + "/" + chrt.Metadata.Name + "@" + res.Manifest.Digest, nil
}
