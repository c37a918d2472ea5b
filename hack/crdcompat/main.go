// Command crdcompat fails when a CRD of CURRENT breaks what the last
// release's CRD in RELEASED served: `make verify` runs
//
//	go run ./hack/crdcompat config/crd/released config/crd/bases
//
// An object stored by a release must still decode and validate after an
// upgrade (issue 23): a served version never changes a field's type,
// removes a field or stops being served. Each problem is printed on a line
// naming the CRD, the version and the field path.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: crdcompat RELEASED_DIR CURRENT_DIR")
		os.Exit(2)
	}
	released, err := load(os.Args[1])
	if err == nil && len(released) == 0 {
		err = fmt.Errorf("%s: no CRD", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdcompat:", err)
		os.Exit(2)
	}
	current, err := load(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdcompat:", err)
		os.Exit(2)
	}
	problems := Compare(released, current)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "crdcompat:", p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "crdcompat: %d incompatible changes since the CRDs of %s\n", len(problems), os.Args[1])
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
