// Command chart packages the ohmlab-controller Helm chart and pushes it to an
// OCI registry with Helm's library, as `helm package` and `helm push` do
// (make chart):
//
//	chart package -chart DIR -version V -out DIR
//	chart push    -file CHART.tgz -repo REGISTRY/PATH [-source-date-epoch S] [-insecure]
//
// package writes NAME-VERSION.tgz into -out and refuses a chart whose version
// or appVersion is not -version (the VERSION file). push pushes it to
// REGISTRY/PATH/NAME:VERSION and prints the reference by digest, the one to
// sign and to install.
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
		var dir, version, out string
		fs.StringVar(&dir, "chart", "../../charts/ohmlab-controller", "the chart's directory")
		fs.StringVar(&version, "version", "", "the release (the VERSION file): the chart's version and appVersion must be it")
		fs.StringVar(&out, "out", "../../dist", "output directory")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		file, err := Package(dir, version, out)
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
