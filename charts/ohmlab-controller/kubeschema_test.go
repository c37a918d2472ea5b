package chart_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/discovery"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// kubeTypes are the values the chart writes verbatim into the pod spec, by the Kubernetes type
// (core/v1) whose schema types them in values.schema.json.
var kubeTypes = map[string]string{
	"resources":                 "io.k8s.api.core.v1.ResourceRequirements",
	"affinity":                  "io.k8s.api.core.v1.Affinity",
	"tolerations":               "io.k8s.api.core.v1.Toleration",
	"topologySpreadConstraints": "io.k8s.api.core.v1.TopologySpreadConstraint",
}

// quantityPattern is how controller-gen (sigs.k8s.io/controller-tools) spells a
// resource.Quantity in the CRDs it writes: the API server's own schema says only "a string or a
// number", and a unit such as "MB" would pass until the API server refused the Deployment.
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// TestValuesSchemaTypesKubernetesObjects: the definitions of values.schema.json are the real
// kube-apiserver's OpenAPI v3 schemas of kubeTypes and what they refer to, made strict (an
// unknown field is refused, as a misspelt key would otherwise be dropped in silence), without
// descriptions. OHMLAB_UPDATE_SCHEMA=1 rewrites them.
func TestValuesSchemaTypesKubernetesObjects(t *testing.T) {
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	paths, err := discovery.NewDiscoveryClientForConfigOrDie(cp.Config).OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := paths["api/v1"].Schema("application/json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	var add func(name string)
	add = func(name string) {
		if _, ok := want[name]; ok {
			return
		}
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Fatalf("the API server's OpenAPI has no %s", name)
		}
		var refs []string
		want[name] = strictSchema(s, &refs)
		for _, r := range refs {
			add(r)
		}
	}
	for _, name := range kubeTypes {
		add(name)
	}
	const quantity = "io.k8s.apimachinery.pkg.api.resource.Quantity"
	if diff := cmp.Diff(map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}, want[quantity]); diff != "" {
		t.Fatalf("the API server's schema of %s changed (-was +now):\n%s", quantity, diff)
	}
	want[quantity] = map[string]any{"oneOf": []any{map[string]any{"type": "string", "pattern": quantityPattern}, map[string]any{"type": "number"}}}

	file := filepath.Join(charttest.ChartDir(), "values.schema.json")
	text := readChartFile(t, "values.schema.json")
	var schema struct {
		Definitions map[string]any `json:"definitions"`
		Properties  map[string]any `json:"properties"`
	}
	if err := json.Unmarshal([]byte(text), &schema); err != nil {
		t.Fatal(err)
	}
	for key, name := range kubeTypes {
		ref := "#/definitions/" + name
		got, _ := json.Marshal(schema.Properties[key])
		if !strings.Contains(string(got), `"$ref":"`+ref+`"`) {
			t.Errorf("values.schema.json: %s does not refer to %s: %s", key, ref, got)
		}
	}
	if diff := cmp.Diff(want, schema.Definitions); diff == "" {
		return
	} else if os.Getenv("OHMLAB_UPDATE_SCHEMA") == "" {
		t.Fatalf("values.schema.json's definitions are not the API server's (-want +got), OHMLAB_UPDATE_SCHEMA=1 rewrites them:\n%s", diff)
	}
	// The definitions are the file's last key.
	const marker = ",\n  \"definitions\": "
	if i := strings.Index(text, marker); i >= 0 {
		text = text[:i] + "\n}\n"
	}
	var defs bytes.Buffer
	enc := json.NewEncoder(&defs)
	enc.SetEscapeHTML(false)
	enc.SetIndent("  ", "  ")
	if err := enc.Encode(want); err != nil {
		t.Fatal(err)
	}
	text = strings.TrimSuffix(strings.TrimRight(text, "\n"), "}")
	text = strings.TrimRight(text, "\n") + marker + strings.TrimRight(defs.String(), "\n") + "\n}\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("rewrote values.schema.json's definitions")
}

// strictSchema converts an OpenAPI v3 schema of the API server into values.schema.json's JSON
// Schema: references point into #/definitions (and are collected into refs), an object with
// properties refuses any other, and descriptions, defaults and x-kubernetes-* extensions go.
func strictSchema(s any, refs *[]string) any {
	switch s := s.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, v := range s {
			switch {
			case k == "description" || k == "default" || strings.HasPrefix(k, "x-kubernetes-"):
			case k == "$ref":
				name := strings.TrimPrefix(v.(string), "#/components/schemas/")
				if !slices.Contains(*refs, name) {
					*refs = append(*refs, name)
				}
				out[k] = "#/definitions/" + name
			default:
				out[k] = strictSchema(v, refs)
			}
		}
		if _, ok := out["properties"]; ok {
			if _, ok := out["additionalProperties"]; !ok {
				out["additionalProperties"] = false
			}
		}
		return out
	case []any:
		out := make([]any, len(s))
		for i, v := range s {
			out[i] = strictSchema(v, refs)
		}
		return out
	default:
		return s
	}
}
