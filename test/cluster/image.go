package cluster

import (
	"fmt"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// ImageID is what the node reports as a container's imageID when it runs
// the image for this machine's platform (linux/GOARCH) of the OCI layout
// `make image` wrote: the digest of that image's config.
func ImageID(layoutDir string) (string, error) {
	top, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		return "", fmt.Errorf("reading the OCI layout %s: %w", layoutDir, err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return "", err
	}
	if len(tm.Manifests) != 1 {
		return "", fmt.Errorf("the OCI layout %s holds %d manifests, want make image's one index", layoutDir, len(tm.Manifests))
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return "", err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return "", err
	}
	want := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	for _, m := range im.Manifests {
		if m.Platform == nil || !m.Platform.Satisfies(want) {
			continue
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			return "", err
		}
		cfg, err := img.ConfigName()
		if err != nil {
			return "", err
		}
		return cfg.String(), nil
	}
	return "", fmt.Errorf("the index in %s has no %s image", layoutDir, want)
}
