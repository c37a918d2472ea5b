package tenancy

import (
	"slices"
	"strings"

	"github.com/ohmlab/ohmlab-controller/templating"
)

// ReasonOutOfScope is the reason of every problem of Check: the condition
// reason of a tenant's object stalled by it, and the reason of its
// refusal at admission.
const ReasonOutOfScope = "OutOfScope"

// Keys of the problems that are not about one key of spec.data.
const (
	KeyPath           = "spec.path"
	KeyDeletionPolicy = "spec.deletionPolicy"
)

// Object is what the scope check needs of one VaultSeed, from its spec and
// templating's analysis of it (ObjectOf).
type Object struct {
	// Path is spec.path as written.
	Path string
	// Refs are the sources of every <ref:> leaf of spec.data.
	Refs []Ref
	// DeletionPolicy is spec.deletionPolicy ("" is Retain).
	DeletionPolicy string
	// Adopts is true when the reconcile would adopt the path: it has no
	// owner marker. Admission cannot know it and leaves it false.
	Adopts bool
}

// Ref is one <ref:> leaf, or one reference of a composed value: the dotted
// key of spec.data that holds it and the path it reads.
type Ref struct {
	Key  string
	Path string
}

// ObjectOf is the Object of a VaultSeed with spec.path path,
// spec.deletionPolicy deletionPolicy and analysis a (templating.Analyse of
// it): every well-formed <ref:> leaf, and each reference of a composed
// value, in key order. A malformed one is a problem of the analysis
// (InvalidSpec) and reads nothing.
func ObjectOf(path, deletionPolicy string, a templating.Analysis) Object {
	o := Object{Path: path, DeletionPolicy: deletionPolicy}
	for _, k := range a.Keys {
		for _, r := range a.Leaves[k].Refs() {
			o.Refs = append(o.Refs, Ref{Key: k, Path: r.Path})
		}
	}
	return o
}

// Problem is one reason an object is out of its namespace's scope.
type Problem struct {
	// Key is spec.path, spec.deletionPolicy, or the dotted key of a
	// <ref:> leaf in spec.data.
	Key string
	// Message says what is allowed: the namespace's prefix, the shared
	// sources, the chart's switch. It never names or echoes the path
	// refused, and says the same whether that path exists or not and
	// whoever owns it: it is computed from the configuration and the
	// object alone.
	Message string
}

// String returns "<key>: <message>".
func (p Problem) String() string { return p.Key + ": " + p.Message }

// Verdict is what Check says of one object.
type Verdict struct {
	// Tenant is true when the object's namespace is a tenant namespace;
	// false, the object is not the check's business (a platform object,
	// or tenants are off) and Problems is nil.
	Tenant bool
	// Prefix is the namespace's prefix, when Tenant.
	Prefix string
	// Problems refuse the object, sorted by Key then Message; nil when it
	// is in scope.
	Problems []Problem
}

// InScope reports whether the object may be reconciled as its namespace's
// tenant, or is no tenant's.
func (v Verdict) InScope() bool { return len(v.Problems) == 0 }

// Check is the scope check of an object o in namespace under c, the same
// at admission (webhook, `ohmlab validate`) and before any Vault request
// of a reconcile. In a tenant namespace:
//   - spec.path must be a path (templating.ValidPath: one spelling per
//     Vault path, so no "..", "//", "%", white space or non-ASCII
//     look-alike) strictly under the namespace's prefix;
//   - every <ref:> must read a path under that prefix or under one of the
//     shared sources;
//   - deletionPolicy Delete needs AllowDelete, and adopting a path without
//     an owner marker needs AllowAdoption.
//
// A namespace that is not a valid namespace name cannot expand the prefix
// into a path, and gets every path refused.
func Check(c Config, namespace string, o Object) Verdict {
	if !c.IsTenant(namespace) {
		return Verdict{}
	}
	prefix := c.PrefixOf(namespace)
	v := Verdict{Tenant: true, Prefix: prefix}
	own := templating.ValidPath(strings.TrimSuffix(prefix, "/")) && strings.HasSuffix(prefix, "/")
	under := func(p, prefix string) bool {
		return templating.ValidPath(p) && strings.HasPrefix(p, prefix) && len(p) > len(prefix)
	}
	pathOK := own && under(o.Path, prefix)
	if !pathOK {
		v.Problems = append(v.Problems, Problem{Key: KeyPath,
			Message: "must be a path under " + prefix + ", this namespace's prefix (" + templating.PathRule + "); a tenant's object cannot choose another"})
	}
	sources := "under " + prefix + " (this namespace's prefix)"
	if len(c.SharedSources) > 0 {
		sources += " or under a shared source (" + strings.Join(c.SharedSources, ", ") + ")"
	}
	for _, r := range o.Refs {
		ok := own && under(r.Path, prefix)
		for _, s := range c.SharedSources {
			ok = ok || under(r.Path, s)
		}
		if !ok {
			v.Problems = append(v.Problems, Problem{Key: r.Key,
				Message: "<ref:> must read a path " + sources + "; a tenant's object cannot read elsewhere"})
		}
	}
	if o.DeletionPolicy == "Delete" && !c.AllowDelete {
		v.Problems = append(v.Problems, Problem{Key: KeyDeletionPolicy,
			Message: "Delete is not allowed in tenant namespaces (the controller's chart leaves targets.vault.tenants.allowDelete false): use Retain"})
	}
	if pathOK && o.Adopts && !c.AllowAdoption {
		v.Problems = append(v.Problems, Problem{Key: KeyPath,
			Message: "the path has no owner marker, and adopting a path is not allowed in tenant namespaces (the controller's chart leaves targets.vault.tenants.allowAdoption false): ask the platform team to remove the path's data or to mark it for this object"})
	}
	slices.SortFunc(v.Problems, func(a, b Problem) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	v.Problems = slices.Compact(v.Problems)
	return v
}
