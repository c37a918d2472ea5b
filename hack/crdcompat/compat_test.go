package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// released is a CRD as a release served it: one version, a spec with a
// required string, an enum and a list of names, a status with a list map.
func released() apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	schema := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Required: []string{"path"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"path":  str,
			"mode":  {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"Retain"`)}, {Raw: []byte(`"Delete"`)}}},
			"names": {Type: "array", XListType: ptr.To("set"), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}},
		}},
		"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"keys": {Type: "array", XListType: ptr.To("map"), XListMapKeys: []string{"key"}, Items: &apiextensionsv1.JSONSchemaPropsOrArray{
				Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"key"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"key":     str,
					"version": {Type: "integer", Format: "int64"},
				}},
			}},
		}},
	}}
	crd := apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1alpha1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &schema},
		}},
	}}
	crd.Name = "seeds.example.com"
	return crd
}

// edit applies f to the schema at path (property names, "[*]" for a
// list's items) in the first version of crd.
func edit(crd *apiextensionsv1.CustomResourceDefinition, path []string, f func(*apiextensionsv1.JSONSchemaProps)) {
	editSchema(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, path, f)
}

func editSchema(s *apiextensionsv1.JSONSchemaProps, path []string, f func(*apiextensionsv1.JSONSchemaProps)) {
	switch {
	case len(path) == 0:
		f(s)
	case path[0] == "[*]":
		editSchema(s.Items.Schema, path[1:], f)
	default:
		// Properties hold values: change a copy and store it back.
		p := s.Properties[path[0]]
		editSchema(&p, path[1:], f)
		s.Properties[path[0]] = p
	}
}

func TestCompare(t *testing.T) {
	const hint = ": put the new shape in a new version, or give it a tolerant decode with its own test"
	tests := []struct {
		name   string
		change func(*apiextensionsv1.CustomResourceDefinition)
		want   []string
	}{
		{name: "unchanged", change: func(*apiextensionsv1.CustomResourceDefinition) {}},
		{
			name: "type changed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "names", "[*]"}, func(s *apiextensionsv1.JSONSchemaProps) {
					*s = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"key": {Type: "string"}}}
				})
			},
			want: []string{`seeds.example.com v1alpha1: .spec.names[*]: type changed from "string" to "object"` + hint},
		},
		{
			name: "field removed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"status", "keys", "[*]"}, func(s *apiextensionsv1.JSONSchemaProps) { delete(s.Properties, "version") })
			},
			want: []string{"seeds.example.com v1alpha1: .status.keys[*].version: removed" + hint},
		},
		{
			name:   "served version removed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Name = "v1beta1" },
			want:   []string{"seeds.example.com v1alpha1: no longer served" + hint},
		},
		{
			name:   "version no longer served",
			change: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Served = false },
			want:   []string{"seeds.example.com v1alpha1: no longer served" + hint},
		},
		{
			name: "format changed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"status", "keys", "[*]", "version"}, func(s *apiextensionsv1.JSONSchemaProps) { s.Format = "int32" })
			},
			want: []string{`seeds.example.com v1alpha1: .status.keys[*].version: format changed from "int64" to "int32"` + hint},
		},
		{
			name: "list type changed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "names"}, func(s *apiextensionsv1.JSONSchemaProps) { s.XListType = nil })
			},
			want: []string{"seeds.example.com v1alpha1: .spec.names: list type changed from set to atomic" + hint},
		},
		{
			name: "enum narrowed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "mode"}, func(s *apiextensionsv1.JSONSchemaProps) { s.Enum = s.Enum[:1] })
			},
			want: []string{`seeds.example.com v1alpha1: .spec.mode: enum narrowed: "Delete" is no longer accepted` + hint},
		},
		{
			name: "field newly required",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec"}, func(s *apiextensionsv1.JSONSchemaProps) { s.Required = append(s.Required, "mode") })
			},
			want: []string{"seeds.example.com v1alpha1: .spec.mode: newly required" + hint},
		},
		{
			name: "field added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec"}, func(s *apiextensionsv1.JSONSchemaProps) {
					s.Properties["prune"] = apiextensionsv1.JSONSchemaProps{Type: "boolean"}
				})
			},
		},
		{
			name: "required dropped",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec"}, func(s *apiextensionsv1.JSONSchemaProps) { s.Required = nil })
			},
		},
		{
			name: "enum widened",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "mode"}, func(s *apiextensionsv1.JSONSchemaProps) {
					s.Enum = append(s.Enum, apiextensionsv1.JSON{Raw: []byte(`"Orphan"`)})
				})
			},
		},
		{
			name: "version added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				v := *c.Spec.Versions[0].DeepCopy()
				v.Name, v.Storage = "v1beta1", false
				c.Spec.Versions = append(c.Spec.Versions, v)
			},
		},
		{
			name:   "CRD removed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) { c.Name = "others.example.com" },
			want:   []string{"seeds.example.com: removed" + hint},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			current := released()
			tt.change(&current)
			got := Compare([]apiextensionsv1.CustomResourceDefinition{released()}, []apiextensionsv1.CustomResourceDefinition{current})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSecondReleaseBrokeTheFirst runs the check on the change that broke
// upgrades (issue 23): status.managedKeys from names to {key, version}
// inside the served v1alpha1.
func TestSecondReleaseBrokeTheFirst(t *testing.T) {
	first, err := load("../../test/e2e/testdata/first-release")
	if err != nil {
		t.Fatal(err)
	}
	second, err := load("../../config/crd/released")
	if err != nil {
		t.Fatal(err)
	}
	const hint = ": put the new shape in a new version, or give it a tolerant decode with its own test"
	want := []string{
		"vaultseeds.ohmlab.fr v1alpha1: .status.managedKeys: list type changed from set to map (keys key)" + hint,
		`vaultseeds.ohmlab.fr v1alpha1: .status.managedKeys[*]: type changed from "string" to "object"` + hint,
	}
	if diff := cmp.Diff(want, Compare(first, second)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
