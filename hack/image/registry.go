package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// LoadIndex returns the image index the build wrote into an OCI layout (the
// layout's only entry).
func LoadIndex(dir string) (v1.ImageIndex, error) {
	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("OCI layout %s: %d entries, want the one image index make image writes", dir, len(m.Manifests))
	}
	return outer.ImageIndex(m.Manifests[0].Digest)
}

// Push pushes the layout's index (and every platform's image) to ref and
// returns the reference by digest, the one to sign.
func Push(dir, ref string, insecure bool) (string, error) {
	idx, err := LoadIndex(dir)
	if err != nil {
		return "", err
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.NewTag(ref, opts...)
	if err != nil {
		return "", fmt.Errorf("reference %q: %w", ref, err)
	}
	if err := remote.WriteIndex(tag, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", fmt.Errorf("pushing to %s: %w", tag, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return tag.Context().Digest(d.String()).String(), nil
}

// PlatformImage returns the image of one platform of the index.
func PlatformImage(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the index has no %s/%s image", p.OS, p.Architecture)
}

// Extract copies one regular file out of a platform's image (the topmost
// layer that has it), so that a test runs the very binary the image ships.
func Extract(dir string, p v1.Platform, file, out string) error {
	idx, err := LoadIndex(dir)
	if err != nil {
		return err
	}
	img, err := PlatformImage(idx, p)
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	want := path.Clean("/" + file)[1:]
	for i := len(layers) - 1; i >= 0; i-- {
		found, err := extractFromLayer(layers[i], want, out)
		if err != nil {
			return err
		}
		if found {
			return nil
		}
	}
	return fmt.Errorf("no file /%s in the %s/%s image", want, p.OS, p.Architecture)
}

func extractFromLayer(l v1.Layer, want, out string) (bool, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return false, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if path.Clean("/" + h.Name)[1:] != want || h.Typeflag != tar.TypeReg {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return false, err
		}
		f, err := os.OpenFile(out, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
		if err != nil {
			return false, err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return false, err
		}
		return true, f.Close()
	}
}
