package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// breakHint is what a break asks for: a served version never changes
// meaning in place.
const breakHint = "put the new shape in a new version, or give it a tolerant decode with its own test"

// tightenHint is what a tightening asks for: an object stored under the
// released CRD that breaks the new validation fails its next write (a
// label, a finalizer removal, the controller's status), unless the API
// server's ratcheting lets the unchanged value through.
const tightenHint = "a stored object that breaks it fails its next write: relax it, or accept it in " + acceptedFile + " saying why no stored object breaks it or why it must"

// Change is one difference of a served version's schema that an object
// stored under the released CRD can feel.
type Change struct {
	// CRD and Version name the CRD and its served version; Version is empty
	// when the whole CRD is gone.
	CRD, Version string
	// Path is the field (".spec.path", "[*]" for a list's items, "{*}"
	// for a map's values); empty when the version is gone.
	Path string
	// Problem says what changed, without the hint.
	Problem string
	// Tightening is true for a validation that refuses more than before
	// (an accepted one passes make verify), false for a break (a field
	// removed, a type changed), which nothing accepts.
	Tightening bool
}

// String is "<crd> <version>: <path>: <problem>: <hint>".
func (c Change) String() string {
	hint := breakHint
	if c.Tightening {
		hint = tightenHint
	}
	return c.where() + c.Problem + ": " + hint
}

// where is "<crd> <version>: <path>: ", each part when set.
func (c Change) where() string {
	s := c.CRD
	if c.Version != "" {
		s += " " + c.Version
	}
	s += ": "
	if c.Path != "" {
		s += c.Path + ": "
	}
	return s
}

// Compare returns the changes of current that an object stored under
// released can feel. Breaks: a CRD or a served version gone, and in each
// served version's schema a field removed, a type, format or list type
// changed. Tightenings: a validation that refuses more than before (a new
// or changed x-kubernetes-validations rule, a lower maxLength, maxItems,
// maxProperties or maximum, a higher minLength, minItems, minProperties or
// minimum, a bound made exclusive, a new or changed pattern or multipleOf,
// an enum added or narrowed, a field newly required, items made unique, a
// field no longer nullable, a new or changed allOf, anyOf, oneOf or not).
// Relaxing (a field no longer required, a new optional field, an enum
// widened, a rule removed, a limit raised) is no change.
func Compare(released, current []apiextensionsv1.CustomResourceDefinition) []Change {
	var changes []Change
	for _, old := range released {
		i := slices.IndexFunc(current, func(c apiextensionsv1.CustomResourceDefinition) bool { return c.Name == old.Name })
		if i < 0 {
			changes = append(changes, Change{CRD: old.Name, Problem: "removed"})
			continue
		}
		for _, ov := range old.Spec.Versions {
			if !ov.Served {
				continue
			}
			j := slices.IndexFunc(current[i].Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == ov.Name })
			if j < 0 || !current[i].Spec.Versions[j].Served {
				changes = append(changes, Change{CRD: old.Name, Version: ov.Name, Problem: "no longer served"})
				continue
			}
			report := func(path, problem string, tightening bool) {
				changes = append(changes, Change{CRD: old.Name, Version: ov.Name, Path: path, Problem: problem, Tightening: tightening})
			}
			compareSchema("", schemaOf(ov), schemaOf(current[i].Spec.Versions[j]), report)
		}
	}
	return changes
}

func schemaOf(v apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.JSONSchemaProps {
	if v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}

// compareSchema reports what cur changes of old at path (".spec.path",
// "[*]" for a list's items, "{*}" for a map's values).
func compareSchema(path string, old, cur *apiextensionsv1.JSONSchemaProps, report func(path, problem string, tightening bool)) {
	if old == nil {
		return
	}
	if path == "" {
		path = "."
	}
	if cur == nil {
		report(path, "removed", false)
		return
	}
	if old.Type != cur.Type {
		report(path, fmt.Sprintf("type changed from %q to %q", old.Type, cur.Type), false)
		return
	}
	if old.Format != cur.Format {
		report(path, fmt.Sprintf("format changed from %q to %q", old.Format, cur.Format), false)
	}
	if listType(old) != listType(cur) || !slices.Equal(old.XListMapKeys, cur.XListMapKeys) {
		report(path, fmt.Sprintf("list type changed from %s to %s", describeList(old), describeList(cur)), false)
	}
	compareValidations(path, old, cur, func(problem string) { report(path, problem, true) })
	for _, r := range cur.Required {
		if !slices.Contains(old.Required, r) {
			report(join(path, r), "newly required", true)
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

// compareValidations reports each value validation of cur that refuses a
// value old accepted, at one node of the schema.
func compareValidations(path string, old, cur *apiextensionsv1.JSONSchemaProps, report func(problem string)) {
	if len(cur.Enum) > 0 {
		allowed := map[string]bool{}
		for _, e := range cur.Enum {
			allowed[string(e.Raw)] = true
		}
		if len(old.Enum) == 0 {
			report("enum added: other values are no longer accepted")
		}
		for _, e := range old.Enum {
			if !allowed[string(e.Raw)] {
				report(fmt.Sprintf("enum narrowed: %s is no longer accepted", e.Raw))
			}
		}
	}

	// Upper bounds: lower is tighter. An unset bound is no bound.
	upper := func(name string, o, c *int64) {
		switch {
		case c == nil:
		case o == nil:
			report(fmt.Sprintf("%s added: %d", name, *c))
		case *c < *o:
			report(fmt.Sprintf("%s lowered from %d to %d", name, *o, *c))
		}
	}
	upper("maxLength", old.MaxLength, cur.MaxLength)
	upper("maxItems", old.MaxItems, cur.MaxItems)
	upper("maxProperties", old.MaxProperties, cur.MaxProperties)
	// Lower bounds: higher is tighter; an unset one is 0.
	lower := func(name string, o, c *int64) {
		if c != nil && *c > deref(o) {
			report(fmt.Sprintf("%s raised from %d to %d", name, deref(o), *c))
		}
	}
	lower("minLength", old.MinLength, cur.MinLength)
	lower("minItems", old.MinItems, cur.MinItems)
	lower("minProperties", old.MinProperties, cur.MinProperties)

	// Numeric bounds, each with its exclusive flag.
	switch o, c := old.Maximum, cur.Maximum; {
	case c == nil:
	case o == nil:
		report(fmt.Sprintf("maximum added: %v", *c))
	case *c < *o:
		report(fmt.Sprintf("maximum lowered from %v to %v", *o, *c))
	case *c == *o && cur.ExclusiveMaximum && !old.ExclusiveMaximum:
		report(fmt.Sprintf("maximum %v made exclusive", *c))
	}
	switch o, c := old.Minimum, cur.Minimum; {
	case c == nil:
	case o == nil:
		report(fmt.Sprintf("minimum added: %v", *c))
	case *c > *o:
		report(fmt.Sprintf("minimum raised from %v to %v", *o, *c))
	case *c == *o && cur.ExclusiveMinimum && !old.ExclusiveMinimum:
		report(fmt.Sprintf("minimum %v made exclusive", *c))
	}
	if cur.MultipleOf != nil && (old.MultipleOf == nil || *cur.MultipleOf != *old.MultipleOf) {
		report(fmt.Sprintf("multipleOf set to %v", *cur.MultipleOf))
	}

	// A changed pattern may accept less: only an unchanged one is safe.
	if cur.Pattern != "" && cur.Pattern != old.Pattern {
		if old.Pattern == "" {
			report(fmt.Sprintf("pattern added: %s", cur.Pattern))
		} else {
			report(fmt.Sprintf("pattern changed from %s to %s", old.Pattern, cur.Pattern))
		}
	}
	if cur.UniqueItems && !old.UniqueItems {
		report("items made unique")
	}
	if old.Nullable && !cur.Nullable {
		report("no longer nullable")
	}

	// A rule is known by its text: a changed rule is a new one, which may
	// refuse what the old one accepted.
	oldRules := map[string]bool{}
	for _, r := range old.XValidations {
		oldRules[strings.TrimSpace(r.Rule)] = true
	}
	for _, r := range cur.XValidations {
		if rule := strings.TrimSpace(r.Rule); !oldRules[rule] {
			report(fmt.Sprintf("validation rule added: %s", rule))
		}
	}

	// Combinators: any change may accept less.
	for _, c := range []struct {
		name     string
		old, cur any
		set      bool
	}{
		{"allOf", old.AllOf, cur.AllOf, len(cur.AllOf) > 0},
		{"anyOf", old.AnyOf, cur.AnyOf, len(cur.AnyOf) > 0},
		{"oneOf", old.OneOf, cur.OneOf, len(cur.OneOf) > 0},
		{"not", old.Not, cur.Not, cur.Not != nil},
	} {
		if c.set && !sameJSON(c.old, c.cur) {
			report(c.name + " added or changed")
		}
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// sameJSON compares two parts of a schema by their JSON.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
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
