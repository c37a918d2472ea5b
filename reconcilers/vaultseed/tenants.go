package vaultseed

import (
	"strings"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/planner"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// kvFor is the Vault client of namespace's objects: the namespace's own
// identity for a tenant namespace, the controller's for any other. A
// tenant's object never falls back to the controller's client.
func (r *Reconciler) kvFor(namespace string) (vaultkv.KV, error) {
	if !r.Tenants.IsTenant(namespace) {
		return r.KV, nil
	}
	if r.TenantKV == nil {
		return nil, &vaultkv.Error{Op: vaultkv.OpLogin, Path: namespace, Class: vaultkv.ClassInvalid,
			Reason: "the controller has no Vault identity for tenant namespaces"}
	}
	return r.TenantKV.KVFor(namespace)
}

// tenant reports whether namespace is a tenant namespace.
func (r *Reconciler) tenant(namespace string) bool { return r.Tenants.IsTenant(namespace) }

// allowDelete is whether deletionPolicy Delete removes the paths of
// namespace's objects: targets.vault.tenants.allowDelete for a tenant
// namespace, targets.vault.allowDelete for the others.
func (r *Reconciler) allowDelete(namespace string) bool {
	if r.tenant(namespace) {
		return r.Tenants.AllowDelete
	}
	return r.AllowDelete
}

// outOfScope runs the scope check of admission (tenancy.Check) on a tenant's
// object, adopts telling whether the plan adopts its path. It returns the
// stall of an object out of its namespace's scope, reported before any
// Vault request (or, for an adoption, before any write), and false for an
// object in scope or of no tenant.
func (r *Reconciler) outOfScope(in planner.Input, adopts bool) (planner.Result, bool) {
	seed := in.Seed
	if r.skipScopeCheck || !r.tenant(seed.Namespace) {
		return planner.Result{}, false
	}
	o := tenancy.ObjectOf(seed.Spec.Path, string(seed.Spec.DeletionPolicy), in.Analysis)
	o.Adopts = adopts
	v := tenancy.Check(r.Tenants, seed.Namespace, o)
	if v.InScope() {
		return planner.Result{}, false
	}
	lines := make([]string, len(v.Problems))
	for i, p := range v.Problems {
		lines[i] = p.String()
	}
	return planner.StalledResult(ohmlabv1alpha1.ReasonOutOfScope,
		planner.List("", lines, "; ", "; nothing is written to Vault for this object until it is fixed")), true
}

// tenantOwnerMessage replaces the OwnedByAnother message of a tenant's
// object whose path carries the owner marker of an object of another
// namespace: a tenant is not told of another namespace's objects.
func (r *Reconciler) tenantOwnerMessage(seed *ohmlabv1alpha1.VaultSeed, p *planner.Plan, path *vaultkv.Secret) {
	if p.Reason != ohmlabv1alpha1.ReasonOwnedByAnother || !r.tenant(seed.Namespace) || path == nil {
		return
	}
	if ns, _, ok := strings.Cut(path.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey], "/"); ok && ns == seed.Namespace {
		return
	}
	p.Message = planner.Text("the path carries the owner marker (custom_metadata " + ohmlabv1alpha1.OwnerMetadataKey +
		") of an object outside this namespace: choose another path under " + r.Tenants.PrefixOf(seed.Namespace) +
		", or ask the platform team to hand the path over")
}

// inScope reports whether seed lies in its namespace's scope, as the
// reconcile checks it before any Vault request (true for an object of no
// tenant): a deleted object out of scope has its path neither read nor
// deleted.
func (r *Reconciler) inScope(seed *ohmlabv1alpha1.VaultSeed) bool {
	_, out := r.outOfScope(planner.Input{Analysed: seeds.Analyse(seed)}, false)
	return !out
}
