package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
)

// SLSA v1 provenance predicate (https://slsa.dev/provenance/v1), the
// predicate of cosign attest --type slsaprovenance1; cosign wraps it in an
// in-toto statement whose subject is the image digest.
type provenance struct {
	BuildDefinition buildDefinition `json:"buildDefinition"`
	RunDetails      runDetails      `json:"runDetails"`
}

type buildDefinition struct {
	BuildType            string               `json:"buildType"`
	ExternalParameters   externalParameters   `json:"externalParameters"`
	InternalParameters   internalParameters   `json:"internalParameters"`
	ResolvedDependencies []resourceDescriptor `json:"resolvedDependencies"`
}

type externalParameters struct {
	Source          resourceDescriptor `json:"source"`
	Version         string             `json:"version"`
	Platforms       []string           `json:"platforms"`
	SourceDateEpoch int64              `json:"sourceDateEpoch"`
}

type internalParameters struct {
	GoVersion string   `json:"goVersion"`
	GoFlags   []string `json:"goFlags"`
	// Settings are each binary's build settings as the Go toolchain
	// recorded them (go version -m): flags, GOOS, GOARCH, CGO_ENABLED...
	Settings map[string]map[string]string `json:"settings"`
}

type runDetails struct {
	Builder    builder              `json:"builder"`
	Byproducts []resourceDescriptor `json:"byproducts,omitempty"`
}

// builder is what ran the build: this repository's release process (a
// maintainer holding the release key runs make image and make sign from a
// clean clone), with, as its dependencies, the Go toolchain that compiled
// the binaries (its release and host, the module the go command downloads
// it as) and the modules of the program that assembled the image's layers.
type builder struct {
	ID                  string               `json:"id"`
	Version             map[string]string    `json:"version,omitempty"`
	BuilderDependencies []resourceDescriptor `json:"builderDependencies,omitempty"`
}

type resourceDescriptor struct {
	Name   string            `json:"name,omitempty"`
	URI    string            `json:"uri,omitempty"`
	Digest map[string]string `json:"digest,omitempty"`
}

const buildType = SourceRepo + "/tree/main/hack/image#v1"

// ReleaseBuilder is runDetails.builder.id: the release process that
// docs/users/image.md describes, which runs this program. It is no hosted build
// platform: whoever holds the release key builds and signs (SLSA Build L1).
const ReleaseBuilder = SourceRepo + "/blob/main/docs/users/image.md#the-release-process"

// toolchainID is the Go toolchain as the go command names it when it
// downloads one (GOTOOLCHAIN): golang.org/toolchain@v0.0.1-go1.26.8.linux-amd64.
func toolchainID(goVersion, host string) string {
	return "pkg:golang/golang.org/toolchain@v0.0.1-" + goVersion + "." + strings.ReplaceAll(host, "/", "-")
}

// Provenance describes the build of the binaries (paths under
// BIN/OS_ARCH/NAME) with toolchain: the source repository (o.Source, as the
// checkout's remote names it) and commit, the
// Go version and flags, and as materials the main module and every module
// the toolchain linked in, read back from the binaries' own build
// information. It refuses binaries whose build information names another
// commit, a modified tree or another toolchain: it attests only that.
func Provenance(o BuildOptions, toolchain string, binaries []string) ([]byte, error) {
	if o.Source == "" {
		return nil, fmt.Errorf("no source repository: a release names the repository its commit comes from")
	}
	src := resourceDescriptor{URI: "git+" + o.Source, Digest: map[string]string{"gitCommit": o.Revision}}
	p := provenance{
		BuildDefinition: buildDefinition{
			BuildType: buildType,
			ExternalParameters: externalParameters{
				Source: src, Version: o.Version, SourceDateEpoch: o.SourceDateEpoch,
			},
			InternalParameters: internalParameters{
				GoFlags:  goFlags(o.Version, o.Revision),
				Settings: map[string]map[string]string{},
			},
		},
	}
	for _, pl := range o.Platforms {
		p.BuildDefinition.ExternalParameters.Platforms = append(p.BuildDefinition.ExternalParameters.Platforms, pl.OS+"/"+pl.Architecture)
	}
	deps := map[string]resourceDescriptor{}
	for _, bin := range binaries {
		bi, err := buildinfo.ReadFile(bin)
		if err != nil {
			return nil, fmt.Errorf("reading the build information of %s: %w", bin, err)
		}
		name := filepath.Base(filepath.Dir(bin)) + "/" + filepath.Base(bin)
		if bi.GoVersion != toolchain {
			return nil, fmt.Errorf("%s was built by %s, go.mod pins %s", name, bi.GoVersion, toolchain)
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if settings["vcs.revision"] != o.Revision || settings["vcs.modified"] != "false" {
			return nil, fmt.Errorf("%s was built from commit %q (modified: %q), not from commit %s as it is", name, settings["vcs.revision"], settings["vcs.modified"], o.Revision)
		}
		p.BuildDefinition.InternalParameters.Settings[name] = settings
		main := resourceDescriptor{URI: "pkg:golang/" + bi.Main.Path + "@" + bi.Main.Version, Digest: map[string]string{"gitCommit": o.Revision}}
		deps[main.URI] = main
		for _, m := range bi.Deps {
			rd := moduleDescriptor(m)
			deps[rd.URI] = rd
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		p.RunDetails.Byproducts = append(p.RunDetails.Byproducts, resourceDescriptor{
			Name: name, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])},
		})
	}
	p.BuildDefinition.InternalParameters.GoVersion = toolchain
	p.BuildDefinition.ResolvedDependencies = append([]resourceDescriptor{
		{Name: "source", URI: src.URI + "@" + o.Revision, Digest: src.Digest},
		{Name: "go", URI: "pkg:golang/stdlib@" + strings.TrimPrefix(toolchain, "go")},
	}, sorted(deps)...)

	// The image build program itself: the go command built it for the
	// host it runs on, with the modules it records.
	self, ok := debug.ReadBuildInfo()
	if !ok {
		return nil, fmt.Errorf("the image build program carries no build information")
	}
	mine := map[string]resourceDescriptor{}
	for _, m := range self.Deps {
		rd := moduleDescriptor(m)
		mine[rd.URI] = rd
	}
	host := runtime.GOOS + "/" + runtime.GOARCH
	p.RunDetails.Builder = builder{
		ID:      ReleaseBuilder,
		Version: map[string]string{"go": toolchain, "host": host, "imageBuilderGo": self.GoVersion},
		BuilderDependencies: append([]resourceDescriptor{
			{Name: "go toolchain", URI: toolchainID(toolchain, host)},
			{Name: "image builder", URI: "pkg:golang/" + self.Main.Path + "@" + self.Main.Version},
		}, sorted(mine)...),
	}
	return json.MarshalIndent(p, "", "  ")
}

// moduleDescriptor names a linked module (its replacement if replaced) as
// a package URL, with its go.sum hash.
func moduleDescriptor(m *debug.Module) resourceDescriptor {
	if m.Replace != nil {
		m = m.Replace
	}
	rd := resourceDescriptor{URI: "pkg:golang/" + m.Path + "@" + m.Version}
	if h, ok := goModuleH1(m.Sum); ok {
		rd.Digest = map[string]string{"goModuleH1": h}
	}
	return rd
}

func sorted(m map[string]resourceDescriptor) []resourceDescriptor {
	uris := make([]string, 0, len(m))
	for u := range m {
		uris = append(uris, u)
	}
	sort.Strings(uris)
	out := make([]resourceDescriptor, 0, len(uris))
	for _, u := range uris {
		out = append(out, m[u])
	}
	return out
}

// goModuleH1 turns a go.sum hash (h1:base64) into the in-toto goModuleH1
// digest (the same SHA-256, hex).
func goModuleH1(sum string) (string, bool) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha256.Size {
		return "", false
	}
	return hex.EncodeToString(raw), true
}
