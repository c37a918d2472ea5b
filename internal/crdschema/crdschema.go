// Package crdschema judges a VaultSeed as the API server judges it on
// create, with the API server's own libraries (k8s.io/apiextensions-apiserver)
// applied to the CRD of config/crd/bases: its OpenAPI schema, its list types
// and its CEL rules. `ohmlab validate` reports what this package finds, so
// that an object it passes is not refused by kubectl apply for its schema.
//
// It runs what the API server's customresource strategy runs for a create
// (Validate: the schema validator, x-kubernetes-list-type, then the CEL
// rules unless a blocking error came first) after what its decoder does
// (unknown fields pruned, nulls dropped, defaults set) and what
// PrepareForCreate does (status dropped). The checks of that strategy that
// are not about the schema are `ohmlab validate`'s own: apiVersion and kind,
// metadata (apimachinery's ValidateObjectMeta), unknown fields.
package crdschema

import (
	"context"
	"fmt"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/config/crd"
)

// validator is one served version's schema, compiled as the API server
// compiles it when it serves the CRD.
type validator struct {
	schema     apiservervalidation.SchemaValidator
	structural *structuralschema.Structural
	cel        *cel.Validator
}

// validators maps each served version of the embedded CRD to its
// validator, built once: compiling the CEL rules is the costly part.
var validators = sync.OnceValues(func() (map[string]*validator, error) {
	var c apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crd.VaultSeeds, &c); err != nil {
		return nil, fmt.Errorf("the embedded CRD: %w", err)
	}
	out := map[string]*validator{}
	for _, v := range c.Spec.Versions {
		if !v.Served || v.Schema == nil {
			continue
		}
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
			return nil, fmt.Errorf("the embedded CRD, version %s: %w", v.Name, err)
		}
		sv, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("the embedded CRD, version %s: %w", v.Name, err)
		}
		s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("the embedded CRD, version %s: %w", v.Name, err)
		}
		// As the API server serves it: defaults pruned of unknown fields.
		s = s.DeepCopy()
		if err := structuraldefaulting.PruneDefaults(s); err != nil {
			return nil, fmt.Errorf("the embedded CRD, version %s: %w", v.Name, err)
		}
		out[v.Name] = &validator{schema: sv, structural: s, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}
	}
	return out, nil
})

// Validate returns what the API server refuses in obj, a VaultSeed of the
// given served version as its JSON decodes (numbers as int64 or float64),
// on create: each error with its field path, as the API server's Invalid
// status lists them. obj is not changed. The error is for a version the CRD
// does not serve, or an embedded CRD that does not compile.
func Validate(ctx context.Context, version string, obj map[string]any) (field.ErrorList, error) {
	vs, err := validators()
	if err != nil {
		return nil, err
	}
	v, ok := vs[version]
	if !ok {
		return nil, fmt.Errorf("the CRD does not serve version %s", version)
	}
	u := runtime.DeepCopyJSON(obj)

	// The decoder's part.
	structuralpruning.Prune(u, v.structural, true)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u, v.structural)
	structuraldefaulting.Default(u, v.structural)
	// PrepareForCreate: status is the status subresource's.
	delete(u, "status")

	// The strategy's Validate.
	errs := apiservervalidation.ValidateCustomResource(nil, u, v.schema)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, v.structural, u)...)
	if blocking := blockingError(errs); blocking != nil {
		return append(errs, blocking), nil
	}
	celErrs, _ := v.cel.Validate(ctx, nil, v.structural, u, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...), nil
}

// blockingError is the customresource strategy's hasBlockingErr: after an
// error of these types the API server does not run the CEL rules, and says
// so.
func blockingError(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return nil
}
