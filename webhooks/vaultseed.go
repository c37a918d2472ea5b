// Package webhooks holds the VaultSeed validating admission webhook: it
// refuses, at `kubectl apply` time, what the controller would report as
// Stalled ten minutes later, with the verdict `ohmlab validate` gives before
// merge (internal/validate).
package webhooks

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/internal/validate"
)

// Path is where the webhook server serves the VaultSeed validator; the Helm
// chart's ValidatingWebhookConfiguration calls it there.
const Path = "/validate-ohmlab-fr-v1alpha1-vaultseed"

// +kubebuilder:webhook:path=/validate-ohmlab-fr-v1alpha1-vaultseed,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,groups=ohmlab.fr,resources=vaultseeds,verbs=create;update,versions=v1alpha1,name=vvaultseed.ohmlab.fr,admissionReviewVersions=v1

// SetupWithManager registers the validator on the manager's webhook server
// at Path. It reads the other objects from the manager's cache through the
// seedindex.IndexPath index, so call it after seedindex.IndexFields. namespaces are
// the namespaces the target watches: objects elsewhere are admitted without
// analysis; an empty list means every namespace.
func SetupWithManager(mgr ctrl.Manager, namespaces []string, opts ...Option) error {
	gvk := ohmlabv1alpha1.GroupVersion.WithKind("VaultSeed")
	if !mgr.GetScheme().Recognizes(gvk) {
		return fmt.Errorf("registering the VaultSeed webhook: the manager's scheme does not hold %s", gvk)
	}
	mgr.GetWebhookServer().Register(Path, NewWebhook(mgr.GetScheme(), mgr.GetCache(), namespaces, opts...))
	return nil
}

// NewWebhook returns the admission webhook of the VaultSeed validator.
// reader must have the seedindex.IndexPath index; a panic in the validator is
// answered as an error, never as an admission.
func NewWebhook(scheme *runtime.Scheme, reader client.Reader, namespaces []string, opts ...Option) *admission.Webhook {
	v := &Validator{Reader: reader}
	for _, o := range opts {
		o(v)
	}
	if len(namespaces) > 0 {
		v.Namespaces = map[string]bool{}
		for _, ns := range namespaces {
			v.Namespaces[ns] = true
		}
	}
	return admission.WithValidator[*ohmlabv1alpha1.VaultSeed](scheme, v).WithRecoverPanic(true)
}

// Validator is the admission.Validator of VaultSeed objects.
//
// It refuses, with one message listing every problem as "<key path>:
// <reason>", what internal/validate finds: the problems of the object
// alone, another object on its path, a reference cycle through its path,
// and a change of spec.path; it returns internal/validate's warnings (a
// template with white space around it, written as text; a rotate block that
// regenerates nothing; a changed value the controller keeps) as admission
// warnings, which kubectl prints, also the shard label's on an update of
// metadata alone (a value no process can take, or a shard no process
// runs). A related object whose spec.data cannot be decoded is an internal
// error, not an admission: a cycle through it could not be seen. It never blocks a DELETE, a status update, an
// update of an object being deleted (finalizer removal), or an update that
// leaves the spec as it was (metadata only), so an object admitted before
// the webhook existed can always be labelled, released and deleted.
type Validator struct {
	// Reader reads the other VaultSeeds, normally the manager's cache. It
	// must have the seedindex.IndexPath index.
	Reader client.Reader
	// Namespaces are the watched namespaces; nil means every namespace.
	Namespaces map[string]bool
	// AllowDelete is the target's allowDelete. Without it, an object
	// asking for deletionPolicy Delete is admitted with a warning: the
	// controller reports it Stalled (Forbidden) and never deletes its path.
	AllowDelete bool
	// Shards are the shards that run (targets.vault.shards): an object
	// labelled with another one is admitted with a warning. nil: unknown,
	// no such warning.
	Shards []string
	// Tenants are the tenant namespaces (targets.vault.tenants): an
	// object in one is analysed like any other, and refused out of its
	// scope (tenancy.Check), and its creation is refused past the
	// namespace's MaxObjectsPerNamespace.
	Tenants tenancy.Config
}

// Option configures the Validator of NewWebhook and SetupWithManager.
type Option func(*Validator)

// AllowDelete tells the validator the target's allowDelete.
func AllowDelete(allowed bool) Option {
	return func(v *Validator) { v.AllowDelete = allowed }
}

// deleteNotAllowed is the warning of deletionPolicy Delete on a target
// without allowDelete (product document, "Deletion").
const deleteNotAllowed = "spec.deletionPolicy: Delete is not allowed by this controller (its chart leaves targets.vault.allowDelete false): the object will be Stalled with reason Forbidden and its path will never be deleted; set targets.vault.allowDelete: true in the controller's chart, or use deletionPolicy: Retain"

// Shards tells the validator the shards that run (see Validator.Shards).
func Shards(running []string) Option {
	return func(v *Validator) { v.Shards = running }
}

// Tenants tells the validator the tenant namespaces (see
// Validator.Tenants).
func Tenants(cfg tenancy.Config) Option {
	return func(v *Validator) { v.Tenants = cfg }
}

// warnings are internal/validate's warnings as admission warnings.
func warnings(ps []validate.Problem) admission.Warnings {
	var out admission.Warnings
	for _, w := range ps {
		out = append(out, w.String())
	}
	return out
}

var _ admission.Validator[*ohmlabv1alpha1.VaultSeed] = &Validator{}

// ValidateCreate analyses a new object with the objects it relates to.
func (v *Validator) ValidateCreate(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) (admission.Warnings, error) {
	return v.validate(ctx, seed, nil)
}

// ValidateUpdate analyses an updated object, unless the update must always
// pass: the status subresource, an object being deleted, or an unchanged
// spec.
func (v *Validator) ValidateUpdate(ctx context.Context, old, seed *ohmlabv1alpha1.VaultSeed) (admission.Warnings, error) {
	if req, err := admission.RequestFromContext(ctx); err == nil && req.SubResource != "" {
		return nil, nil
	}
	if !seed.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	if equality.Semantic.DeepEqual(old.Spec, seed.Spec) {
		// Metadata only, such as a move to another shard: admitted, with a
		// warning when no process takes the shard label.
		return append(warnings(validate.ShardWarnings(seed)), warnings(validate.UnrunShardWarnings(seed, v.Shards))...), nil
	}
	return v.validate(ctx, seed, old)
}

// ValidateDelete admits every deletion.
func (v *Validator) ValidateDelete(context.Context, *ohmlabv1alpha1.VaultSeed) (admission.Warnings, error) {
	return nil, nil
}

func (v *Validator) validate(ctx context.Context, seed, old *ohmlabv1alpha1.VaultSeed) (admission.Warnings, error) {
	tenant := v.Tenants.IsTenant(seed.Namespace)
	if v.Namespaces != nil && !v.Namespaces[seed.Namespace] && !tenant {
		return nil, nil
	}
	if tenant && old == nil {
		if err := v.underLimit(ctx, seed); err != nil {
			return nil, err
		}
	}
	analysed := seeds.Analyse(seed)
	others, err := seedindex.Related(ctx, v.Reader, analysed)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if tenant {
		// A tenant's refusal never names another namespace's object or
		// path (a duplicate path, a cycle): that would tell the tenant
		// what exists outside its scope. Another namespace's object on its
		// path is met at reconcile time by the path's owner marker.
		others = slices.DeleteFunc(others, func(o seeds.Analysed) bool { return o.Seed.Namespace != seed.Namespace })
	}
	var before *seeds.Analysed
	if old != nil {
		a := seeds.Analyse(old)
		before = &a
	}
	verdict := validate.WithScope(validate.Seed(analysed, before, others), v.Tenants, analysed)
	out := append(warnings(verdict.Warnings), warnings(validate.UnrunShardWarnings(seed, v.Shards))...)
	if seed.Spec.DeletionPolicy == ohmlabv1alpha1.DeletionPolicyDelete && !v.AllowDelete && !tenant {
		// A tenant's Delete is a problem of its scope instead.
		out = append(out, deleteNotAllowed)
	}
	if !verdict.Valid() {
		return out, invalid(seed, verdict)
	}
	return out, nil
}

// underLimit refuses the creation of seed when its tenant namespace
// already holds MaxObjectsPerNamespace VaultSeeds, so that one tenant
// cannot fill the work queue that every namespace shares. It counts what
// the Reader holds: creations still on their way to the cache can pass it
// by a few.
func (v *Validator) underLimit(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) error {
	limit := v.Tenants.MaxObjectsPerNamespace
	if limit <= 0 {
		return nil
	}
	var list ohmlabv1alpha1.VaultSeedList
	if err := v.Reader.List(ctx, &list, client.InNamespace(seed.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return apierrors.NewInternalError(err)
	}
	if len(list.Items) < limit {
		return nil
	}
	return apierrors.NewForbidden(ohmlabv1alpha1.GroupVersion.WithResource("vaultseeds").GroupResource(), seed.Name,
		fmt.Errorf("namespace %s already holds %d VaultSeeds, the most a tenant namespace may (targets.vault.tenants.maxObjectsPerNamespace of the controller's chart): delete one first", seed.Namespace, len(list.Items)))
}

// invalid is the refusal of seed: the API's Invalid status, as the API
// server's own validation gives it, naming the object, and each problem's
// key as a cause. A cause never carries the value (a plain leaf may be a
// secret somebody typed).
func invalid(seed *ohmlabv1alpha1.VaultSeed, verdict validate.Verdict) error {
	errs := make(field.ErrorList, 0, len(verdict.Problems))
	for _, p := range verdict.Problems {
		path := field.NewPath(validate.KeyData)
		if p.Key != "" {
			path = field.NewPath(p.Key)
		}
		errs = append(errs, field.Invalid(path, field.OmitValueType{}, p.Message))
	}
	return apierrors.NewInvalid(ohmlabv1alpha1.GroupVersion.WithKind("VaultSeed").GroupKind(), seed.Name, errs)
}
