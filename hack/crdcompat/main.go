// Command crdcompat fails when a CRD of CURRENT breaks or tightens what the
// last release's CRD in RELEASED served: `make verify` runs
//
//	go run ./hack/crdcompat -accepted hack/crdcompat/accepted.yaml config/crd/released config/crd/bases
//
// An object stored by a release must still decode and validate after an
// upgrade: a served version never changes a field's type, removes a field
// or stops being served (a break), and never refuses a value it accepted
// (a tightening: a stored object holding it fails its next write) unless
// the allow-list accepts that tightening with a reason. Each problem is
// printed on a line naming the CRD, the version and the field path; an
// entry of the allow-list that names no tightening is a problem too.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func main() {
	accepted := flag.String("accepted", "", "an allow-list of deliberate tightenings (YAML), for example "+acceptedFile)
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: crdcompat [-accepted FILE] RELEASED_DIR CURRENT_DIR")
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	releasedDir, currentDir := flag.Arg(0), flag.Arg(1)
	released, err := load(releasedDir)
	if err == nil && len(released) == 0 {
		err = fmt.Errorf("%s: no CRD", releasedDir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdcompat:", err)
		os.Exit(2)
	}
	current, err := load(currentDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdcompat:", err)
		os.Exit(2)
	}
	var list []Acceptance
	if *accepted != "" {
		if list, err = loadAccepted(*accepted); err != nil {
			fmt.Fprintln(os.Stderr, "crdcompat:", err)
			os.Exit(2)
		}
	}
	changes := Compare(released, current)
	refused, problems := Accept(changes, list)
	for _, c := range changes {
		if c.Tightening && !slices.Contains(refused, c) {
			fmt.Printf("crdcompat: accepted (%s): %s\n", *accepted, c.where()+c.Problem)
		}
	}
	for _, c := range refused {
		fmt.Fprintln(os.Stderr, "crdcompat:", c)
	}
	for _, p := range problems {
		fmt.Fprintf(os.Stderr, "crdcompat: %s: %s\n", *accepted, p)
	}
	if len(refused) > 0 {
		fmt.Fprintf(os.Stderr, "crdcompat: %d incompatible changes since the CRDs of %s\n", len(refused), releasedDir)
	}
	if len(refused) > 0 || len(problems) > 0 {
		os.Exit(1)
	}
}

// load reads the CRDs of the .yaml files of dir.
func load(dir string) ([]apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := d.Decode(&crd); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if crd.APIVersion == "" && crd.Kind == "" {
				continue // an empty document: comments only
			}
			if crd.Kind != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s: a %q, not a CustomResourceDefinition", f, crd.Kind)
			}
			out = append(out, crd)
		}
	}
	return out, nil
}
