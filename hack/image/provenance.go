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

type builder struct {
	ID string `json:"id"`
}

type resourceDescriptor struct {
	Name   string            `json:"name,omitempty"`
	URI    string            `json:"uri,omitempty"`
	Digest map[string]string `json:"digest,omitempty"`
}

const (
	buildType = SourceRepo + "/tree/main/hack/image#v1"
	builderID = SourceRepo + "/hack/image"
)

// Provenance describes the build of the binaries (paths under
// BIN/OS_ARCH/NAME): the source repository and commit, the Go version and
// flags, and every module the toolchain linked in, read back from the
// binaries' own build information, as materials.
func Provenance(o BuildOptions, binaries []string) ([]byte, error) {
	src := resourceDescriptor{URI: "git+" + SourceRepo, Digest: map[string]string{"gitCommit": o.Revision}}
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
		RunDetails: runDetails{Builder: builder{ID: builderID}},
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
		if p.BuildDefinition.InternalParameters.GoVersion == "" {
			p.BuildDefinition.InternalParameters.GoVersion = bi.GoVersion
		} else if bi.GoVersion != p.BuildDefinition.InternalParameters.GoVersion {
			return nil, fmt.Errorf("%s was built by %s, another binary by %s", name, bi.GoVersion, p.BuildDefinition.InternalParameters.GoVersion)
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		p.BuildDefinition.InternalParameters.Settings[name] = settings
		for _, m := range bi.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			rd := resourceDescriptor{URI: "pkg:golang/" + m.Path + "@" + m.Version}
			if h, ok := goModuleH1(m.Sum); ok {
				rd.Digest = map[string]string{"goModuleH1": h}
			}
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
	goVersion := p.BuildDefinition.InternalParameters.GoVersion
	p.BuildDefinition.ResolvedDependencies = []resourceDescriptor{
		{Name: "source", URI: src.URI + "@" + o.Revision, Digest: src.Digest},
		{Name: "go", URI: "pkg:golang/stdlib@" + strings.TrimPrefix(goVersion, "go")},
	}
	uris := make([]string, 0, len(deps))
	for u := range deps {
		uris = append(uris, u)
	}
	sort.Strings(uris)
	for _, u := range uris {
		p.BuildDefinition.ResolvedDependencies = append(p.BuildDefinition.ResolvedDependencies, deps[u])
	}
	return json.MarshalIndent(p, "", "  ")
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
