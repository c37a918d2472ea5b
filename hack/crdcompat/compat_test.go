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
			"path": {Type: "string", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](256), Pattern: "^[a-z/]+$",
				XValidations: apiextensionsv1.ValidationRules{{Rule: "self == oldSelf", Message: "immutable"}}},
			"mode": {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"Retain"`)}, {Raw: []byte(`"Delete"`)}}},
			"names": {Type: "array", XListType: ptr.To("set"), MaxItems: ptr.To[int64](8),
				Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}},
			"labels": {Type: "object", MaxProperties: ptr.To[int64](8),
				AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
			"replicas": {Type: "integer", Minimum: ptr.To[float64](1), Maximum: ptr.To[float64](10)},
			"note":     {Type: "string", Nullable: true},
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

// Hints of Change.String.
const (
	broken  = ": " + breakHint
	tighter = ": " + tightenHint
)

func TestCompare(t *testing.T) {
	const at = "seeds.example.com v1alpha1: "
	type schema = apiextensionsv1.JSONSchemaProps
	tests := []struct {
		name   string
		change func(*apiextensionsv1.CustomResourceDefinition)
		want   []string
	}{
		{name: "unchanged", change: func(*apiextensionsv1.CustomResourceDefinition) {}},

		// Breaks.
		{
			name: "type changed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "names", "[*]"}, func(s *schema) {
					*s = schema{Type: "object", Properties: map[string]schema{"key": {Type: "string"}}}
				})
			},
			want: []string{at + `.spec.names[*]: type changed from "string" to "object"` + broken},
		},
		{
			name: "field removed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"status", "keys", "[*]"}, func(s *schema) { delete(s.Properties, "version") })
			},
			want: []string{at + ".status.keys[*].version: removed" + broken},
		},
		{
			name:   "served version removed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Name = "v1beta1" },
			want:   []string{at + "no longer served" + broken},
		},
		{
			name:   "version no longer served",
			change: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Served = false },
			want:   []string{at + "no longer served" + broken},
		},
		{
			name: "format changed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"status", "keys", "[*]", "version"}, func(s *schema) { s.Format = "int32" })
			},
			want: []string{at + `.status.keys[*].version: format changed from "int64" to "int32"` + broken},
		},
		{
			name: "list type changed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "names"}, func(s *schema) { s.XListType = nil })
			},
			want: []string{at + ".spec.names: list type changed from set to atomic" + broken},
		},
		{
			name:   "CRD removed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) { c.Name = "others.example.com" },
			want:   []string{"seeds.example.com: removed" + broken},
		},

		// Tightenings: each refuses a value the released CRD stored.
		{
			name: "enum narrowed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "mode"}, func(s *schema) { s.Enum = s.Enum[:1] })
			},
			want: []string{at + `.spec.mode: enum narrowed: "Delete" is no longer accepted` + tighter},
		},
		{
			name: "enum added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "path"}, func(s *schema) { s.Enum = []apiextensionsv1.JSON{{Raw: []byte(`"a/b"`)}} })
			},
			want: []string{at + ".spec.path: enum added: other values are no longer accepted" + tighter},
		},
		{
			name: "field newly required",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec"}, func(s *schema) { s.Required = append(s.Required, "mode") })
			},
			want: []string{at + ".spec.mode: newly required" + tighter},
		},
		{
			name: "validation rule added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "path"}, func(s *schema) {
					s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{Rule: "self.size() <= 64", Message: "too long"})
				})
			},
			want: []string{at + ".spec.path: validation rule added: self.size() <= 64" + tighter},
		},
		{
			name: "validation rule changed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "path"}, func(s *schema) { s.XValidations[0].Rule = "self == oldSelf && self != ''" })
			},
			want: []string{at + ".spec.path: validation rule added: self == oldSelf && self != ''" + tighter},
		},
		{
			name: "first validation rule of a field",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"status", "keys", "[*]", "key"}, func(s *schema) {
					s.XValidations = apiextensionsv1.ValidationRules{{Rule: "!self.contains('.')"}}
				})
			},
			want: []string{at + ".status.keys[*].key: validation rule added: !self.contains('.')" + tighter},
		},
		{
			name: "maxLength lowered",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "path"}, func(s *schema) { s.MaxLength = ptr.To[int64](128) })
			},
			want: []string{at + ".spec.path: maxLength lowered from 256 to 128" + tighter},
		},
		{
			name: "maxLength added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "mode"}, func(s *schema) { s.MaxLength = ptr.To[int64](16) })
			},
			want: []string{at + ".spec.mode: maxLength added: 16" + tighter},
		},
		{
			name: "maxItems lowered",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "names"}, func(s *schema) { s.MaxItems = ptr.To[int64](4) })
			},
			want: []string{at + ".spec.names: maxItems lowered from 8 to 4" + tighter},
		},
		{
			name: "maxProperties lowered",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "labels"}, func(s *schema) { s.MaxProperties = ptr.To[int64](2) })
			},
			want: []string{at + ".spec.labels: maxProperties lowered from 8 to 2" + tighter},
		},
		{
			name: "minLength raised",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "path"}, func(s *schema) { s.MinLength = ptr.To[int64](3) })
			},
			want: []string{at + ".spec.path: minLength raised from 1 to 3" + tighter},
		},
		{
			name: "minItems added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "names"}, func(s *schema) { s.MinItems = ptr.To[int64](1) })
			},
			want: []string{at + ".spec.names: minItems raised from 0 to 1" + tighter},
		},
		{
			name: "minProperties added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "labels"}, func(s *schema) { s.MinProperties = ptr.To[int64](1) })
			},
			want: []string{at + ".spec.labels: minProperties raised from 0 to 1" + tighter},
		},
		{
			name: "minimum raised",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "replicas"}, func(s *schema) { s.Minimum = ptr.To[float64](2) })
			},
			want: []string{at + ".spec.replicas: minimum raised from 1 to 2" + tighter},
		},
		{
			name: "minimum made exclusive",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "replicas"}, func(s *schema) { s.ExclusiveMinimum = true })
			},
			want: []string{at + ".spec.replicas: minimum 1 made exclusive" + tighter},
		},
		{
			name: "maximum lowered",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "replicas"}, func(s *schema) { s.Maximum = ptr.To[float64](5) })
			},
			want: []string{at + ".spec.replicas: maximum lowered from 10 to 5" + tighter},
		},
		{
			name: "minimum added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"status", "keys", "[*]", "version"}, func(s *schema) { s.Minimum = ptr.To[float64](1) })
			},
			want: []string{at + ".status.keys[*].version: minimum added: 1" + tighter},
		},
		{
			name: "multipleOf added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "replicas"}, func(s *schema) { s.MultipleOf = ptr.To[float64](2) })
			},
			want: []string{at + ".spec.replicas: multipleOf set to 2" + tighter},
		},
		{
			name: "pattern added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "mode"}, func(s *schema) { s.Pattern = "^[A-Z]" })
			},
			want: []string{at + ".spec.mode: pattern added: ^[A-Z]" + tighter},
		},
		{
			name: "pattern changed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "path"}, func(s *schema) { s.Pattern = "^[a-z/.]+$" })
			},
			want: []string{at + ".spec.path: pattern changed from ^[a-z/]+$ to ^[a-z/.]+$" + tighter},
		},
		{
			name: "items made unique",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"status", "keys"}, func(s *schema) { s.UniqueItems = true })
			},
			want: []string{at + ".status.keys: items made unique" + tighter},
		},
		{
			name: "no longer nullable",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "note"}, func(s *schema) { s.Nullable = false })
			},
			want: []string{at + ".spec.note: no longer nullable" + tighter},
		},
		{
			name: "oneOf added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec"}, func(s *schema) { s.OneOf = []schema{{Required: []string{"mode"}}, {Required: []string{"names"}}} })
			},
			want: []string{at + ".spec: oneOf added or changed" + tighter},
		},
		{
			name: "a map's value tightened",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "labels"}, func(s *schema) {
					v := *s.AdditionalProperties.Schema
					v.MaxLength = ptr.To[int64](63)
					s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &v}
				})
			},
			want: []string{at + ".spec.labels{*}: maxLength added: 63" + tighter},
		},

		// Relaxing passes.
		{
			name: "field added",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec"}, func(s *schema) {
					s.Properties["prune"] = schema{Type: "boolean", XValidations: apiextensionsv1.ValidationRules{{Rule: "self"}}}
				})
			},
		},
		{
			name: "required dropped",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec"}, func(s *schema) { s.Required = nil })
			},
		},
		{
			name: "enum widened",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "mode"}, func(s *schema) { s.Enum = append(s.Enum, apiextensionsv1.JSON{Raw: []byte(`"Orphan"`)}) })
			},
		},
		{
			name: "limits loosened, rule and pattern removed",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "path"}, func(s *schema) {
					s.MaxLength, s.MinLength, s.Pattern, s.XValidations = ptr.To[int64](512), nil, "", nil
				})
				edit(c, []string{"spec", "names"}, func(s *schema) { s.MaxItems = nil })
				edit(c, []string{"spec", "labels"}, func(s *schema) { s.MaxProperties = ptr.To[int64](9) })
				edit(c, []string{"spec", "replicas"}, func(s *schema) { s.Minimum, s.Maximum = ptr.To[float64](0), nil })
				edit(c, []string{"spec", "mode"}, func(s *schema) { s.Nullable = true })
			},
		},
		{
			name: "rule's message changed, rule reformatted",
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				edit(c, []string{"spec", "path"}, func(s *schema) {
					s.XValidations[0] = apiextensionsv1.ValidationRule{Rule: " self == oldSelf\n", Message: "cannot change"}
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			current := released()
			tt.change(&current)
			got := texts(Compare([]apiextensionsv1.CustomResourceDefinition{released()}, []apiextensionsv1.CustomResourceDefinition{current}))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}

func texts(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.String())
	}
	return out
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
	want := []string{
		// The second release also refused more spellings of a path, which
		// the check reports since it knows tightenings.
		"vaultseeds.ohmlab.fr v1alpha1: .spec.path: validation rule added: self.size() <= 512 && self.matches('^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)+$') && self.split('/').all(s, s != '.' && s != '..')" + tighter,
		"vaultseeds.ohmlab.fr v1alpha1: .status.managedKeys: list type changed from set to map (keys key)" + broken,
		`vaultseeds.ohmlab.fr v1alpha1: .status.managedKeys[*]: type changed from "string" to "object"` + broken,
	}
	if diff := cmp.Diff(want, texts(Compare(first, second))); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
