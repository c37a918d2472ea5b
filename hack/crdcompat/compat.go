package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// hint is what every problem asks for: a served version never changes
// meaning in place.
const hint = "put the new shape in a new version, or give it a tolerant decode with its own test"

// Compare returns the changes of current that break what released served:
// a CRD or a served version gone, and in each served version's schema a
// field removed, a type, format or list type changed, an enum narrowed or
// a field newly required. Relaxing (a field no longer required, a new
// optional field, an enum widened) is not a problem.
func Compare(released, current []apiextensionsv1.CustomResourceDefinition) []string {
	var problems []string
	for _, old := range released {
		i := slices.IndexFunc(current, func(c apiextensionsv1.CustomResourceDefinition) bool { return c.Name == old.Name })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("%s: removed: %s", old.Name, hint))
			continue
		}
		for _, ov := range old.Spec.Versions {
			if !ov.Served {
				continue
			}
			j := slices.IndexFunc(current[i].Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == ov.Name })
			if j < 0 || !current[i].Spec.Versions[j].Served {
				problems = append(problems, fmt.Sprintf("%s %s: no longer served: %s", old.Name, ov.Name, hint))
				continue
			}
			report := func(path, problem string) {
				problems = append(problems, fmt.Sprintf("%s %s: %s: %s: %s", old.Name, ov.Name, path, problem, hint))
			}
			compareSchema("", schemaOf(ov), schemaOf(current[i].Spec.Versions[j]), report)
		}
	}
	return problems
}

func schemaOf(v apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.JSONSchemaProps {
	if v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}

// compareSchema reports what cur breaks of old at path (".spec.path",
// "[*]" for a list's items, "{*}" for a map's values).
func compareSchema(path string, old, cur *apiextensionsv1.JSONSchemaProps, report func(path, problem string)) {
	if old == nil {
		return
	}
	if path == "" {
		path = "."
	}
	if cur == nil {
		report(path, "removed")
		return
	}
	if old.Type != cur.Type {
		report(path, fmt.Sprintf("type changed from %q to %q", old.Type, cur.Type))
		return
	}
	if old.Format != cur.Format {
		report(path, fmt.Sprintf("format changed from %q to %q", old.Format, cur.Format))
	}
	if listType(old) != listType(cur) || !slices.Equal(old.XListMapKeys, cur.XListMapKeys) {
		report(path, fmt.Sprintf("list type changed from %s to %s", describeList(old), describeList(cur)))
	}
	if len(cur.Enum) > 0 {
		allowed := map[string]bool{}
		for _, e := range cur.Enum {
			allowed[string(e.Raw)] = true
		}
		if len(old.Enum) == 0 {
			report(path, "enum added: other values are no longer accepted")
		}
		for _, e := range old.Enum {
			if !allowed[string(e.Raw)] {
				report(path, fmt.Sprintf("enum narrowed: %s is no longer accepted", e.Raw))
			}
		}
	}
	for _, r := range cur.Required {
		if !slices.Contains(old.Required, r) {
			report(join(path, r), "newly required")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(old.Properties)) {
		o := old.Properties[name]
		var c *apiextensionsv1.JSONSchemaProps
		if p, ok := cur.Properties[name]; ok {
			c = &p
		}
		compareSchema(join(path, name), &o, c, report)
	}
	if old.Items != nil && old.Items.Schema != nil {
		var c *apiextensionsv1.JSONSchemaProps
		if cur.Items != nil {
			c = cur.Items.Schema
		}
		compareSchema(strings.TrimSuffix(path, ".")+"[*]", old.Items.Schema, c, report)
	}
	if old.AdditionalProperties != nil && old.AdditionalProperties.Schema != nil {
		var c *apiextensionsv1.JSONSchemaProps
		if cur.AdditionalProperties != nil {
			c = cur.AdditionalProperties.Schema
		}
		compareSchema(strings.TrimSuffix(path, ".")+"{*}", old.AdditionalProperties.Schema, c, report)
	}
}

func join(path, name string) string {
	return strings.TrimSuffix(path, ".") + "." + name
}

// listType is a list's x-kubernetes-list-type; atomic when unset.
func listType(s *apiextensionsv1.JSONSchemaProps) string {
	if s.XListType == nil {
		return "atomic"
	}
	return *s.XListType
}

func describeList(s *apiextensionsv1.JSONSchemaProps) string {
	if len(s.XListMapKeys) == 0 {
		return listType(s)
	}
	return fmt.Sprintf("%s (keys %s)", listType(s), strings.Join(s.XListMapKeys, ", "))
}
