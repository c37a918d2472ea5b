package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	gcrname "github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WriteBinaryImage writes ref, a one-layer image holding one static binary
// as /NAME (its entrypoint, run as user 65535), as a docker-save archive that
// ctr images import reads. The pause image is one (PauseImage).
func WriteBinaryImage(ref, binary, archive string) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("reading %s: %w", binary, err)
	}
	name := filepath.Base(binary)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Name: name, Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg,
		ModTime: time.Unix(0, 0), Format: tar.FormatPAX,
	}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.DockerLayer))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: []string{"/" + name}, User: "65535:65535"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tag, err := gcrname.NewTag(ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(archive, tag, img)
}
