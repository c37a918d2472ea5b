// Command chart packages the ohmlab-controller Helm chart and pushes it to an
// OCI registry with Helm's library, as `helm package` and `helm push` do
// (make chart):
//
//	chart package -chart DIR -version V -out DIR [-image DIR] [-source-date-epoch S] [-allow-dirty]
//	chart push    -file CHART.tgz -repo REGISTRY/PATH [-source-date-epoch S] [-insecure]
//
// package writes NAME-VERSION.tgz into -out, every file's time the source
// date (the same commit, the same archive), and refuses a chart whose version
// or appVersion is not -version (the VERSION file). It refuses a working tree
// that differs from its commit, untracked files included; the chart it
// packages then pins image.digest to the digest make image wrote into -image,
// whose provenance must name the same commit. -allow-dirty packages the tree
// as it is, for development, and leaves image.digest as the chart has it
// (clean or not).
// push pushes it to REGISTRY/PATH/NAME:VERSION and prints the reference by
// digest, the one to sign and to install.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: chart package|push [flags]")
	}
	fs := flag.NewFlagSet("chart "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch args[0] {
	case "package":
		var o PackageOptions
		fs.StringVar(&o.Chart, "chart", "../../charts/ohmlab-controller", "the chart's directory")
		fs.StringVar(&o.Version, "version", "", "the release (the VERSION file): the chart's version and appVersion must be it")
		fs.StringVar(&o.Out, "out", "../../dist", "output directory")
		fs.StringVar(&o.Image, "image", "", "make image's output directory: its digest is pinned as image.digest")
		fs.Int64Var(&o.SourceDateEpoch, "source-date-epoch", -1, "time of every file in the archive (default: the commit time)")
		fs.BoolVar(&o.AllowDirty, "allow-dirty", false, "development chart: accept uncommitted changes, leave image.digest unset")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		file, err := Package(o, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, file)
		return nil
	case "push":
		var file, repo string
		var epoch int64
		var insecure bool
		fs.StringVar(&file, "file", "", "the packaged chart (NAME-VERSION.tgz)")
		fs.StringVar(&repo, "repo", "", "REGISTRY/PATH the chart is pushed under (as NAME:VERSION)")
		fs.Int64Var(&epoch, "source-date-epoch", -1, "the manifest's creation time (default: now)")
		fs.BoolVar(&insecure, "insecure", false, "plain HTTP (a registry on loopback)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if file == "" || repo == "" {
			return fmt.Errorf("push: -file and -repo are required")
		}
		ref, err := Push(file, repo, epoch, insecure, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, ref)
		return nil
	default:
		return fmt.Errorf("unknown command %q: want package or push", args[0])
	}
}
