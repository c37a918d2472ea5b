// Command image builds, pushes and takes apart the ohmlab-controller OCI
// image without a container daemon (make image, make image-push, the e2e
// test that runs the binary out of the image):
//
//	image build   [-root DIR] [-out DIR] [-version V] [-revision R] [-source-date-epoch S] [-platforms P,...] [-allow-dirty]
//	image push    -layout DIR -ref REGISTRY/REPO:TAG [-insecure]
//	image extract -layout DIR -platform OS/ARCH -file NAME -out PATH
//
// build writes, under -out: oci/ (an OCI image layout holding one image
// index), ohmlab-controller-VERSION.oci.tar (the same layout as one archive),
// digest (the index digest) and provenance.json (the SLSA v1 provenance
// predicate that make sign attests). build refuses a working tree that
// differs from its commit, untracked files included, and a commit that no
// branch of the checkout's remote holds (the provenance names that remote's
// repository); -allow-dirty builds it anyway, for development, and writes
// no provenance.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: image build|push|extract [flags]")
	}
	fs := flag.NewFlagSet("image "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch args[0] {
	case "build":
		var o BuildOptions
		var platforms string
		fs.StringVar(&o.Root, "root", "../..", "repository root (the product module)")
		fs.StringVar(&o.Out, "out", "../../dist", "output directory")
		fs.StringVar(&o.Version, "version", "", "release version (default: the VERSION file)")
		fs.StringVar(&o.Revision, "revision", "", "source revision (default: git rev-parse HEAD)")
		fs.Int64Var(&o.SourceDateEpoch, "source-date-epoch", -1, "timestamp of every file and of the config (default: $SOURCE_DATE_EPOCH, else the commit time)")
		fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated OS/ARCH list")
		fs.BoolVar(&o.AllowDirty, "allow-dirty", false, "development build: accept uncommitted changes, write no provenance")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		var err error
		if o.Platforms, err = parsePlatforms(platforms); err != nil {
			return err
		}
		res, err := Build(o, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s\n", res.Tag, res.Digest)
		return nil
	case "push":
		var layoutDir, ref string
		var insecure bool
		fs.StringVar(&layoutDir, "layout", "../../dist/oci", "OCI layout written by build")
		fs.StringVar(&ref, "ref", "", "REGISTRY/REPOSITORY:TAG to push the index to")
		fs.BoolVar(&insecure, "insecure", false, "plain HTTP (a registry on loopback)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		digestRef, err := Push(layoutDir, ref, insecure)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, digestRef)
		return nil
	case "extract":
		var layoutDir, platform, file, out string
		fs.StringVar(&layoutDir, "layout", "../../dist/oci", "OCI layout written by build")
		fs.StringVar(&platform, "platform", "linux/amd64", "OS/ARCH of the image to read")
		fs.StringVar(&file, "file", "ohmlab-controller", "path of the file in the image")
		fs.StringVar(&out, "out", "", "where to write it (mode 0755)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if out == "" {
			return fmt.Errorf("extract: -out is required")
		}
		p, err := parsePlatforms(platform)
		if err != nil {
			return err
		}
		return Extract(layoutDir, p[0], file, out)
	default:
		return fmt.Errorf("unknown command %q: want build, push or extract", args[0])
	}
}
