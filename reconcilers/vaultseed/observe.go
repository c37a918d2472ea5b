package vaultseed

import (
	"context"
	"slices"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/planner"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// input is what the planner takes of the object: the object analysed once,
// the managed keys the process knows (status, or a write status could not
// record), and the reference cycle through it over the cache.
func (r *Reconciler) input(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) (planner.Input, error) {
	managed, unreported := r.store.managed(seed)
	in := planner.Input{Analysed: seeds.Analyse(seed), Managed: managed, Unreported: unreported, AllowDelete: r.allowDelete(seed.Namespace),
		CheckRecord: !r.ObserveOnly, Now: r.now(), ReportWithin: r.Timeout}
	if len(in.Analysis.Problems) > 0 {
		return in, nil
	}
	ring, err := r.cycle(ctx, in.Analysed)
	in.Ring = ring
	return in, err
}

// cycle returns the message of a reference cycle through the object's path,
// or "". It analyses only the objects reachable from the object through
// references (seedindex.Related), not the whole cache.
func (r *Reconciler) cycle(ctx context.Context, seed seeds.Analysed) (string, error) {
	related, err := seedindex.Related(ctx, r.Client, seed)
	if err != nil || len(related) == 0 {
		return "", err
	}
	objs := []templating.Object{seed.Object}
	for _, o := range related {
		objs = append(objs, o.Object)
	}
	return planner.RingThrough(templating.AnalyseSet(objs), seeds.Owner(seed.Seed)), nil
}

// reader is how a reconcile of seed reads Vault through kv: reference
// sources through what the process remembers of them (sources), the
// object's own path with its metadata first when it was never written. A
// tenant's object reads every path from Vault with its own identity: what
// the process remembers was read with another's, and serving it would
// let the tenant read what Vault refuses it.
func (r *Reconciler) reader(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, kv vaultkv.KV) *sourcedReader {
	var read planner.KVReader = kv
	if managed, _ := r.store.managed(seed); !r.ObserveOnly && seed.Status.Version == 0 && len(managed) == 0 {
		// Never written: its path is most likely new, and only a read of
		// its metadata tells whether its marker may create them.
		read = newPathReader{KV: kv, path: seed.Spec.Path}
	}
	if r.tenant(seed.Namespace) {
		return &sourcedReader{KVReader: read}
	}
	self := client.ObjectKeyFromObject(seed)
	reader := r.sources.readerFor(read, seed.Spec.Path, self.String(),
		func() bool { return r.referenced(ctx, seed.Spec.Path) }, func() { r.notifyDependents(ctx, seed.Spec.Path) })
	if reconcileAsked(seed) {
		// A person asked for this reconcile, most likely after changing a
		// source by hand: what the process remembers of it may be older.
		reader.fresh = func(path string) { r.notifyDependentsBut(ctx, path, self) }
	}
	return reader
}

// sourcesComing says whether a new object's first wait is left unreported:
// it is RefPending, writes nothing, has never reported a status, and a
// source it waits for, read absent, is the path of an object of this
// process that this process has yet to reconcile. That object's first write
// wakes it (notifyDependents), and its backoff retry comes anyway, so a
// RefPending status and Warning event, stale a moment later, would only
// cost two Kubernetes writes (dependents created beside their sources are
// often reconciled just before them). Once per
// object and process: its next wait is reported, whatever its sources.
func (r *Reconciler) sourcesComing(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, out outcome) bool {
	p := out.plan
	if r.ObserveOnly || p == nil || p.Outcome != planner.OutcomeWait || !p.Empty() || len(out.absentSources) == 0 ||
		findCondition(seed, ohmlabv1alpha1.ConditionReady) != nil || reconcileAsked(seed) {
		return false
	}
	key := client.ObjectKeyFromObject(seed)
	if r.store.has(key, factWaitUnreported) {
		return false
	}
	for _, path := range out.absentSources {
		if path != seed.Spec.Path && r.unreconciledOwner(ctx, path) {
			r.store.add(key, factWaitUnreported)
			ctrl.LoggerFrom(ctx).V(1).Info("waiting for a source whose object is yet to be reconciled; not reporting RefPending", "path", seed.Spec.Path, "source", path)
			return true
		}
	}
	return false
}

// unreconciledOwner reports whether path is the own path of an object of
// this process that this process has not reconciled yet (queued for its
// first reconcile here). When the cache cannot answer, it says no: the wait
// is then reported.
func (r *Reconciler) unreconciledOwner(ctx context.Context, path string) bool {
	var list ohmlabv1alpha1.VaultSeedList
	opts := []client.ListOption{client.MatchingFields{seedindex.IndexPath: path}, client.UnsafeDisableDeepCopy}
	if r.Selector != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: r.Selector})
	}
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		return false
	}
	for i := range list.Items {
		if !r.store.has(client.ObjectKeyFromObject(&list.Items[i]), factAttempted) {
			return true
		}
	}
	return false
}

// absentSources are the paths of refs read absent, sorted.
func absentSources(refs map[string]*vaultkv.Secret) []string {
	var out []string
	for path, s := range refs {
		if s == nil || !s.Exists {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

// newPathReader reads path, the path of an object never written, with
// ReadNew (its metadata first), and every other path as kv does.
type newPathReader struct {
	vaultkv.KV
	path string
}

func (n newPathReader) Read(ctx context.Context, path string) (*vaultkv.Secret, error) {
	if path == n.path {
		return n.KV.ReadNew(ctx, path)
	}
	return n.KV.Read(ctx, path)
}

// now is the planner's clock.
func (r *Reconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}
