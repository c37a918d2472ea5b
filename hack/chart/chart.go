package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
)

// Package loads the chart in dir (honouring .helmignore) and writes its
// archive into out, as `helm package` does. A chart that does not carry
// version as both its version and appVersion is refused: the release has
// one version (make verify checks the directory, this the archive).
func Package(dir, version, out string) (string, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("loading the chart %s: %w", dir, err)
	}
	if version == "" {
		return "", fmt.Errorf("package: -version is required")
	}
	if m := chrt.Metadata; m.Version != version || m.AppVersion != version {
		return "", fmt.Errorf("chart %s has version %q and appVersion %q, want %q for both", m.Name, m.Version, m.AppVersion, version)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	file, err := chartutil.Save(chrt, out)
	if err != nil {
		return "", fmt.Errorf("packaging %s: %w", dir, err)
	}
	return file, nil
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
