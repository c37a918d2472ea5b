// Package seeds turns VaultSeed objects into templating objects, so that the
// webhook, the CLI and the reconciler analyse exactly the same thing.
package seeds

import (
	"bytes"
	"encoding/json"
	"fmt"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// Object converts a VaultSeed into the object templating analyses. spec.data
// is decoded with json.Number leaves so numbers keep their written form.
// The error names the object; it never holds a value.
func Object(seed *ohmlabv1alpha1.VaultSeed) (templating.Object, error) {
	o := templating.Object{Namespace: seed.Namespace, Name: seed.Name, Path: seed.Spec.Path, Data: map[string]any{}}
	if seed.Spec.Rotate != nil {
		o.Rotate = &templating.Rotate{Token: seed.Spec.Rotate.Token, Every: seed.Spec.Rotate.Every, Keys: seed.Spec.Rotate.Keys}
	}
	if seed.Spec.Data == nil || len(seed.Spec.Data.Raw) == 0 || string(seed.Spec.Data.Raw) == "null" {
		return o, nil
	}
	dec := json.NewDecoder(bytes.NewReader(seed.Spec.Data.Raw))
	dec.UseNumber()
	if err := dec.Decode(&o.Data); err != nil {
		return o, fmt.Errorf("%s/%s: spec.data is not a JSON object", seed.Namespace, seed.Name)
	}
	return o, nil
}

// Analysed is a VaultSeed with its templating object and analysis: made
// once (Analyse), then passed on to each check and to the planner.
type Analysed struct {
	Seed     *ohmlabv1alpha1.VaultSeed
	Object   templating.Object
	Analysis templating.Analysis
}

// Analyse converts and analyses one VaultSeed. A spec.data that is not an
// object is reported as an InvalidSpec problem.
func Analyse(seed *ohmlabv1alpha1.VaultSeed) Analysed {
	o, err := Object(seed)
	a := templating.Analyse(o)
	if err != nil {
		a.Problems = append([]templating.Problem{{Reason: templating.ReasonInvalidSpec, Key: "", Message: "spec.data is not an object"}}, a.Problems...)
	}
	return Analysed{Seed: seed, Object: o, Analysis: a}
}

// Owner is the value of the owner marker a VaultSeed writes on its path:
// "<namespace>/<name>" (product document, "Adoption").
func Owner(seed *ohmlabv1alpha1.VaultSeed) string {
	return seed.Namespace + "/" + seed.Name
}
