// Package vaultseed reconciles VaultSeed objects into Vault KV v2 paths
// (product document, "What the controller does with a path", "Deletion",
// "Conditions"): observe (read the path and its reference sources), plan (a
// pure function, plan.go), apply (metadata first, then data with
// check-and-set), then report (status, events, metrics).
package vaultseed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

const (
	// maxCASAttempts bounds how often one reconcile reads and plans again
	// after a check-and-set conflict before it backs off.
	maxCASAttempts = 5
	// backoffBase and backoffMax bound the retry delay of an object that
	// waits (product document, "Conditions": 5 s doubling to 5 min).
	backoffBase = 5 * time.Second
	backoffMax  = 5 * time.Minute
	// reportTimeout bounds the status write that follows a reconcile.
	reportTimeout = 30 * time.Second
)

// Reconciler reconciles the VaultSeed objects of one target.
type Reconciler struct {
	// Client reads objects from the manager's cache and writes status.
	Client client.Client
	// APIReader reads objects from the API server, past the cache: it
	// tells an object that left a label-filtered cache for another shard
	// from a deleted one. SetupWithManager defaults it to the manager's.
	APIReader client.Reader
	// KV is the target's Vault.
	KV vaultkv.KV
	// Generator makes the values of generated keys.
	Generator templating.Generator
	// Recorder emits events; they name keys and counts, never values.
	Recorder events.EventRecorder
	// Metrics are the per-object metrics.
	Metrics *Metrics
	// Target names the target in metric labels ("vault").
	Target string
	// ObserveOnly runs the whole reconcile and writes nothing to Vault.
	ObserveOnly bool
	// AllowDelete lets deletionPolicy Delete remove paths.
	AllowDelete bool
	// ResyncPeriod is how often every object is reconciled again (each at
	// its own phase of the period, see resync).
	ResyncPeriod time.Duration
	// Timeout bounds one reconcile.
	Timeout time.Duration
	// Selector chooses the objects of this process's shard (issue 13); an
	// object it does not match is left to another process and forgotten
	// here: its finalizer, status and path stay as they are. nil: every
	// object.
	Selector labels.Selector

	backoff    workqueue.TypedRateLimiter[types.NamespacedName]
	dependents chan event.TypedGenericEvent[*ohmlabv1alpha1.VaultSeed]
	// known holds which objects were reconciled, or asked for, since the
	// start.
	known known
	// unreported holds, per object, what was written but not yet recorded
	// in status.
	unreported sync.Map // types.NamespacedName -> unreported
	sources    *sources

	// lastWrites holds, per object, this process's writes of it that the
	// cache may not show yet.
	lastWrites lastWrites
}

// outcome is what one reconcile of a live object found and did.
type outcome struct {
	result
	// plan is the plan made: applied, or in observe-only mode what a real
	// run would do; nil when planning did not happen.
	plan *Plan
	// applied: the plan's writes happened, or at least its data write
	// landed before a later step failed; what it wrote is reported.
	applied bool
	// version is the KV version read or written, and created its
	// created_time (zero when not known).
	version int
	created time.Time
	// path is the path as read, nil when it was not: the managed keys a
	// reconcile that applied no plan reports are those it shows
	// (recordsOn).
	path *vaultkv.Secret
	// backoff asks for a retry with backoff (the object waits).
	backoff bool
	// timedOut: Vault did not answer in time, so the reconcile did not
	// complete (alert OhmlabReconcileStale).
	timedOut bool
	// absentSources are the reference sources read absent, when the plan
	// waits.
	absentSources []string
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(parent context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx, cancel := context.WithTimeout(parent, r.Timeout)
	defer cancel()
	// Taken before the read: the watch may forget the write between the
	// read and latest.
	last := r.lastWrites.get(req.NamespacedName)
	seed := &ohmlabv1alpha1.VaultSeed{}
	if err := r.Client.Get(ctx, req.NamespacedName, seed); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted, or, with a cache filtered by the shard's
			// selector, moved to another shard.
			return ctrl.Result{}, r.leave(ctx, req.NamespacedName, nil)
		}
		return ctrl.Result{}, err
	}
	// The cache may not show this process's last writes yet.
	r.lastWrites.latest(seed, last)
	if !r.owns(seed) {
		// Another shard's: it moved there, and that shard's process
		// reconciles it.
		return ctrl.Result{}, r.leave(ctx, req.NamespacedName, seed)
	}
	if !r.known.add(req.NamespacedName, factAttempted) {
		// The series exists from the first attempt, so an object whose
		// reconciles never complete is stale too.
		r.Metrics.seen(r.Target, seed.Namespace, seed.Name)
	}
	if err := r.rewriteFirstReleaseStatus(ctx, seed); err != nil {
		return ctrl.Result{}, err
	}
	if !seed.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, seed)
	}
	if err := r.syncFinalizer(ctx, seed); err != nil {
		return ctrl.Result{}, err
	}
	if r.deferAfterStart(seed) {
		return r.resync(req.NamespacedName, time.Now()), nil
	}
	out, err := r.sync(ctx, seed)
	if err != nil {
		return ctrl.Result{}, err
	}
	out.timedOut = out.timedOut || ctx.Err() != nil
	if r.sourcesComing(ctx, seed, out) {
		return ctrl.Result{RequeueAfter: r.backoff.When(req.NamespacedName)}, nil
	}
	// A reconcile that ran out of time still reports why (Vault hangs):
	// status gets a deadline of its own.
	reportCtx, cancelReport := context.WithTimeout(parent, reportTimeout)
	defer cancelReport()
	if err := r.report(reportCtx, seed, out); err != nil {
		return ctrl.Result{}, err
	}
	if !out.timedOut {
		r.Metrics.reconciled(r.Target, seed.Namespace, seed.Name)
	}
	if out.backoff {
		return ctrl.Result{RequeueAfter: r.backoff.When(req.NamespacedName)}, nil
	}
	r.backoff.Forget(req.NamespacedName)
	return r.resync(req.NamespacedName, time.Now()), nil
}

// sourcesComing says whether a new object's first wait is left unreported:
// it is RefPending, writes nothing, has never reported a status, and a
// source it waits for, read absent, is the path of an object of this
// process that this process has yet to reconcile. That object's first write
// wakes it (notifyDependents), and its backoff retry comes anyway, so a
// RefPending status and Warning event, stale a moment later, would only
// cost two Kubernetes writes (issue 25: about a fifth of the dependents
// created beside their sources are reconciled just before them). Once per
// object and process: its next wait is reported, whatever its sources.
func (r *Reconciler) sourcesComing(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, out outcome) bool {
	p := out.plan
	if r.ObserveOnly || p == nil || p.Outcome != OutcomeWait || !p.Empty() || len(out.absentSources) == 0 ||
		findCondition(seed, ohmlabv1alpha1.ConditionReady) != nil || reconcileAsked(seed) {
		return false
	}
	key := client.ObjectKeyFromObject(seed)
	if r.known.has(key, factWaitUnreported) {
		return false
	}
	for _, path := range out.absentSources {
		if path != seed.Spec.Path && r.unreconciledOwner(ctx, path) {
			r.known.add(key, factWaitUnreported)
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
	opts := []client.ListOption{client.MatchingFields{seeds.IndexPath: path}, client.UnsafeDisableDeepCopy}
	if r.Selector != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: r.Selector})
	}
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		return false
	}
	for i := range list.Items {
		if !r.known.has(client.ObjectKeyFromObject(&list.Items[i]), factAttempted) {
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

// desiredOf is what the object declares, with the given managed keys.
func desiredOf(seed *ohmlabv1alpha1.VaultSeed, analysis templating.Analysis, managed []ohmlabv1alpha1.ManagedKey) Desired {
	d := Desired{Owner: seeds.Owner(seed), Analysis: analysis, Prune: seed.Spec.Prune, Version: int(seed.Status.Version)}
	if seed.Spec.Rotate != nil {
		d.RotationToken = seed.Spec.Rotate.Token
	}
	d.WrittenAt = make(map[string]int, len(managed))
	d.CreatedAt = make(map[string]string, len(managed))
	for _, m := range managed {
		d.ManagedKeys = append(d.ManagedKeys, m.Key)
		d.WrittenAt[m.Key] = int(m.Version)
		d.CreatedAt[m.Key] = m.CreatedTime
	}
	return d
}

// managed is status.managedKeys, or what a status write that failed since
// would have made of it.
func (r *Reconciler) managed(seed *ohmlabv1alpha1.VaultSeed) []ohmlabv1alpha1.ManagedKey {
	// An object deleted and created again under the same name is another
	// object: what its predecessor wrote is not its own.
	if u, ok := r.unreported.Load(client.ObjectKeyFromObject(seed)); ok && u.(unreported).uid == seed.UID {
		return u.(unreported).managedKeys
	}
	return seed.Status.ManagedKeys
}

// sync observes, plans and applies. The error is for failures of the
// Kubernetes API or of value generation; Vault's answers are outcomes.
func (r *Reconciler) sync(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) (outcome, error) {
	gen := r.Generator
	gen.Dry = r.ObserveOnly
	if !r.ObserveOnly {
		// Its dependents reconciled meanwhile wait for its write.
		defer r.sources.begin(seed.Spec.Path)()
	}
	var kv KVReader = r.KV
	if !r.ObserveOnly && seed.Status.Version == 0 && len(r.managed(seed)) == 0 {
		// Never written: its path is most likely new, and only a read of
		// its metadata tells whether its marker may create them.
		kv = newPathReader{KV: r.KV, path: seed.Spec.Path}
	}
	reader := r.sources.readerFor(kv, seed.Spec.Path, client.ObjectKeyFromObject(seed).String(),
		func() bool { return r.referenced(ctx, seed.Spec.Path) }, func() { r.notifyDependents(ctx, seed.Spec.Path) })
	if reconcileAsked(seed) {
		// A person asked for this reconcile, most likely after changing a
		// source by hand: what the process remembers of it may be older.
		self := client.ObjectKeyFromObject(seed)
		reader.fresh = func(path string) { r.notifyDependentsBut(ctx, path, self) }
	}
	in := planInput{
		kv:          reader,
		expect:      reader.expect,
		ring:        func(obj templating.Object) (string, error) { return r.cycle(ctx, seed, obj) },
		managed:     func() []ohmlabv1alpha1.ManagedKey { return r.managed(seed) },
		landed:      func(path *vaultkv.Secret) (*intent, error) { return r.landed(ctx, seed, path) },
		allowDelete: r.AllowDelete,
		gen:         gen,
	}
	if end, ok := ctx.Deadline(); ok {
		// The writes that follow generation need time of their own: it
		// stops a quarter of the reconcile's time before its end.
		in.fillBy = end.Add(-r.Timeout / 4)
	}
	for range maxCASAttempts {
		pl, err := observePlan(ctx, seed, in)
		var read readError
		var stopped *templating.StoppedError
		switch {
		case errors.As(err, &read):
			out := backendOutcome(read.err)
			out.path = pl.observed.Path
			return out, nil
		case errors.As(err, &stopped) && ctx.Err() == nil:
			return outcome{result: stalledResult(ohmlabv1alpha1.ReasonGenerationTimeout, textMessage(r.generationTimeoutMessage(seed)))}, nil
		case err != nil:
			return outcome{}, err
		case pl.stop != nil:
			return outcome{result: *pl.stop}, nil
		}
		p := pl.plan
		if r.ObserveOnly {
			return observeOnlyOutcome(p, pl.observed.Path.Version), nil
		}
		applied, written, err := r.apply(ctx, seed, p, pl.observed.Path)
		if errors.Is(err, vaultkv.ErrCASMismatch) {
			ctrl.LoggerFrom(ctx).Info("the path changed while reconciling; reading it again", "path", seed.Spec.Path)
			continue
		}
		out := outcome{plan: &p, applied: applied, version: written.Version, created: written.Created, path: pl.observed.Path}
		if err != nil {
			// What was written before the failure is still reported.
			b := backendOutcome(err)
			out.result, out.backoff, out.timedOut = b.result, b.backoff, b.timedOut
			return out, nil
		}
		out.result, out.backoff = planResult(p, written.Version)
		if p.Outcome == OutcomeWait {
			out.absentSources = absentSources(pl.observed.Refs)
		}
		return out, nil
	}
	return outcome{result: waitingResult(ohmlabv1alpha1.ReasonProgressing,
		textMessage(fmt.Sprintf("the path changed during each of %d attempts; retrying", maxCASAttempts))), backoff: true}, nil
}

// generationTimeoutMessage is the stall of an object whose values were not
// computed in the time a reconcile leaves to generation. It is Stalled, not
// retried with backoff: each attempt costs the cores as much again, and
// other objects' hashes share them.
func (r *Reconciler) generationTimeoutMessage(seed *ohmlabv1alpha1.VaultSeed) string {
	_, a := seeds.Analyse(seed)
	return fmt.Sprintf("computing the object's values did not finish in the %s a reconcile leaves to it (of its %s): it declares %d bcrypt hashes and key pairs "+
		"(at most %d are admitted), and bcrypt is slow by design; nothing is written to the path. Split the keys over several objects, or give the controller more CPU; "+
		"this is checked again at the next resync", r.Timeout-r.Timeout/4, r.Timeout, templating.CostlyKeys(a), templating.MaxCostlyKeys)
}

// planResult is the result of a plan applied without error.
func planResult(p Plan, version int) (result, bool) {
	switch p.Outcome {
	case OutcomeWait:
		return waitingResult(p.Reason, p.Message), true
	case OutcomeStop:
		return stalledResult(p.Reason, p.Message), false
	}
	return readyResult(fmt.Sprintf("the path holds what is declared (KV version %d)", version)), false
}

// observeOnlyOutcome reports what a real run would do. A plan that waits or
// stops keeps a real run's Ready, Reconciling and Stalled, so Argo CD and
// kstatus read it as they would a real run's. When it still writes some keys
// (a stall on one key does not freeze the path, issue 12), Drifted is True
// and says what, then why the rest waits, and the planned changes count them
// (issue 23, item 5: the migration's Shadow step sees them); when it writes
// nothing, Drifted is Unknown with its reason and no planned change is
// reported (issue 12: observe-only never reports stale plans).
func observeOnlyOutcome(p Plan, version int) outcome {
	if p.Outcome != OutcomeApply {
		res, backoff := planResult(p, version)
		out := outcome{result: res, backoff: backoff, version: version}
		if !p.Empty() {
			yes := true
			out.drifted, out.driftMessage, out.plan = &yes, heldSummary(p), &p
		}
		return out
	}
	if p.Empty() {
		no := false
		res := readyResult(fmt.Sprintf("the path holds what is declared (KV version %d)", version))
		res.drifted = &no
		return outcome{result: res, plan: &p, version: version}
	}
	yes := true
	summary := p.summary()
	return outcome{result: result{reason: ohmlabv1alpha1.ReasonObserveOnly, message: summary.withHead("observe-only: a real run would make "),
		drifted: &yes, driftMessage: summary, finished: true}, plan: &p, version: version}
}

// heldSummary is the Drifted message of a plan that writes some keys and
// holds the others back: the summary, then the wait or the stall, for
// example "1 create-field (b); the rest waits: RefPending: waiting for
// ohmlab/x#k (path missing)". It lists what the wait or the stall lists.
func heldSummary(p Plan) Message {
	rest := "the rest waits"
	if p.Outcome == OutcomeStop {
		rest = "the rest stalls"
	}
	return p.Message.withHead(fmt.Sprintf("%s; %s: %s: ", p.Summary(), rest, p.Reason))
}

// KVReader is the part of vaultkv.KV that observing needs: reads only
// (Preview takes nothing more, so it cannot write).
type KVReader interface {
	Read(ctx context.Context, path string) (*vaultkv.Secret, error)
	ReadVersion(ctx context.Context, path string, version int) (*vaultkv.Secret, error)
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

// deleteRefused is the stall of an object asking for deletionPolicy Delete
// on a target that does not allow it (product document, "Deletion").
func deleteRefused(seed *ohmlabv1alpha1.VaultSeed, allowDelete bool) (result, bool) {
	if seed.Spec.DeletionPolicy != ohmlabv1alpha1.DeletionPolicyDelete || allowDelete {
		return result{}, false
	}
	return stalledResult(ohmlabv1alpha1.ReasonForbidden, textMessage(
		"deletionPolicy Delete is not allowed: the controller's chart must set targets.vault.allowDelete: true "+
			"(and vault-operator ohmlab.controller.allowDelete: true, which grants the delete in Vault), or set deletionPolicy: Retain; "+
			"until then nothing is written to the path and the object has no finalizer")), true
}

// observeVault reads the path and every path it references, one request each,
// and the older versions a prune or a carry compares with (versionReads).
func observeVault(ctx context.Context, kv KVReader, path string, refPaths []string, d Desired) (Observed, error) {
	own, err := kv.Read(ctx, path)
	if err != nil {
		return Observed{}, err
	}
	// On a later failure the path is still returned: what was read of it
	// is reported (recordsOn).
	o := Observed{Path: own, Refs: make(map[string]*vaultkv.Secret, len(refPaths)), Written: map[int]*vaultkv.Secret{own.Version: own}}
	for _, p := range refPaths {
		if o.Refs[p], err = kv.Read(ctx, p); err != nil {
			return Observed{Path: own}, err
		}
	}
	for _, v := range versionReads(d, own) {
		if o.Written[v], err = kv.ReadVersion(ctx, path, v); err != nil {
			return Observed{Path: own}, err
		}
	}
	return o, nil
}

// apply writes a plan: metadata (owner marker, and the record of the data
// write, intent.go) first, then the data with check-and-set, then the
// rotation token, so that a token is recorded only once its keys are
// written. It returns whether the plan's writes are to be
// reported (all done, or the data write landed before a later step
// failed), and the path's KV version as it leaves it: the version written,
// or the version read when nothing was.
func (r *Reconciler) apply(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, p Plan, read *vaultkv.Secret) (bool, vaultkv.Written, error) {
	path := seed.Spec.Path
	unchanged := vaultkv.Written{Version: p.CAS, Created: p.Base}
	mark := p.Mark
	var record intent
	if p.Data != nil {
		record = intentOf(ctx, p, seed)
		mark = withIntent(p, record)
	}
	if mark != nil {
		markFn := r.KV.Mark
		if p.creates() && read.NoMetadata {
			// The path has no metadata at all: its marker creates them in
			// one request (a new path: one read, two writes). Anywhere
			// else the marker is merged, keeping what others put there.
			markFn = r.KV.MarkNew
		}
		if err := markFn(ctx, path, mark); err != nil {
			return false, unchanged, err
		}
	}
	written := unchanged
	if p.Data != nil {
		w, err := r.KV.Write(ctx, path, p.Data, p.CAS)
		if err != nil {
			r.void(ctx, path, record, err)
			return false, unchanged, err
		}
		written = w
		if r.referenced(ctx, path) {
			r.sources.wrote(path, w.Version, p.Data)
		} else {
			r.sources.forget(path)
		}
		r.Metrics.wrote(r.Target, seed.Namespace, seed.Name)
		r.notifyDependents(ctx, path)
	}
	if !p.Empty() {
		ctrl.LoggerFrom(ctx).Info("wrote the path", "path", path, "changes", p.Summary(), "version", written.Version)
	}
	if p.RecordToken != "" {
		if err := r.KV.Mark(ctx, path, map[string]string{ohmlabv1alpha1.RotationTokenMetadataKey: p.RecordToken}); err != nil {
			return p.Data != nil, written, fmt.Errorf("recording rotation token %q after rotating: %w", p.RecordToken, err)
		}
	}
	return true, written, nil
}

// backendOutcome reports an error of Vault: refused (Forbidden), not
// answering (BackendUnavailable) or another error (BackendError), all
// retried with backoff.
func backendOutcome(err error) outcome {
	reason := ohmlabv1alpha1.ReasonBackendError
	switch {
	case errors.Is(err, vaultkv.ErrForbidden):
		reason = ohmlabv1alpha1.ReasonForbidden
	case errors.Is(err, vaultkv.ErrUnavailable):
		reason = ohmlabv1alpha1.ReasonBackendUnavailable
	}
	return outcome{result: waitingResult(reason, textMessage(err.Error())), backoff: true, timedOut: vaultkv.IsTimeout(err)}
}

// unreported is what a reconcile wrote to Vault but could not record in
// status (the status write failed): the next status write carries it.
type unreported struct {
	uid         types.UID
	managedKeys []ohmlabv1alpha1.ManagedKey
}

// report writes status (only when it changed), emits events and sets the
// object's metrics. Events and metrics of what was written come first, so
// a failing status write loses none of them.
func (r *Reconciler) report(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, out outcome) error {
	r.emit(ctx, seed, out)
	if r.ObserveOnly {
		var counts map[string]int
		if out.plan != nil {
			counts = out.plan.Counts()
		}
		r.Metrics.setPlanned(r.Target, seed.Namespace, seed.Name, counts)
	}
	r.Metrics.setReady(r.Target, seed.Namespace, seed.Name, out.reason, out.ready)

	key := client.ObjectKeyFromObject(seed)
	updated := seed.DeepCopy()
	out.apply(&updated.Status, seed.Generation, r.ObserveOnly)
	if v, ok := requestedAt(seed); ok {
		// This reconcile handled the request (read its sources from
		// Vault): a person, or kubectl wait, can tell.
		updated.Status.LastHandledReconcileAt = v
	}
	updated.Status.ManagedKeys = r.managed(seed)
	p := out.plan
	switch {
	case r.ObserveOnly:
	case p != nil && (out.applied || p.Data == nil):
		updated.Status.ManagedKeys = managedStatus(*p, updated.Status.ManagedKeys, out.applied, vaultkv.Written{Version: out.version, Created: out.created})
	case out.path != nil:
		updated.Status.ManagedKeys = recordsOn(out.path, seeds.Owner(seed), updated.Status.ManagedKeys)
	}
	switch {
	case p != nil:
		updated.Status.Version = int64(out.version)
	case out.path != nil && !r.ObserveOnly:
		updated.Status.Version = int64(out.path.Version)
	}
	if equality.Semantic.DeepEqual(seed.Status, updated.Status) {
		r.unreported.Delete(key)
		return nil
	}
	// The optimistic lock makes a status computed from a copy that someone
	// else changed since (another process, a spec edit) fail instead of
	// replacing what they wrote; the next reconcile computes it again, with
	// what was written to Vault kept in unreported.
	if err := r.Client.Status().Patch(ctx, updated, client.MergeFromWithOptions(seed, client.MergeFromWithOptimisticLock{})); err != nil {
		if out.applied {
			r.unreported.Store(key, unreported{uid: seed.UID, managedKeys: updated.Status.ManagedKeys})
		}
		return fmt.Errorf("patching status: %w", err)
	}
	r.recordWrite(ctx, seed.ResourceVersion, updated)
	r.unreported.Delete(key)
	return nil
}

// managedStatus is status.managedKeys after a plan: the keys it wrote at the
// version of its write, the others at the version they were written before,
// carried forward to the version the plan read (Plan.Carried) and on to the
// version of its write, which holds their value unchanged. Each record
// carries its version's created_time; a record of an earlier release
// without one takes the version's when the plan read that version on the
// path this object owns.
func managedStatus(p Plan, before []ohmlabv1alpha1.ManagedKey, applied bool, written vaultkv.Written) []ohmlabv1alpha1.ManagedKey {
	records := make(map[string]ohmlabv1alpha1.ManagedKey, len(before))
	for _, m := range before {
		m.StoredAsName = false
		if m.Version > 0 && m.Version == int64(p.CAS) && m.CreatedTime == "" {
			m.CreatedTime = createdTime(p.Base)
		}
		records[m.Key] = m
	}
	for _, k := range p.Carried {
		records[k] = ohmlabv1alpha1.ManagedKey{Key: k, Version: int64(p.CAS), CreatedTime: createdTime(p.Base)}
	}
	rewrote := applied && p.Data != nil
	wrote := map[string]bool{}
	if rewrote {
		for _, a := range p.Actions {
			if a.Key != "" {
				wrote[a.Key] = true
			}
		}
	}
	out := make([]ohmlabv1alpha1.ManagedKey, 0, len(p.ManagedKeys))
	for _, k := range p.ManagedKeys {
		m, recorded := records[k]
		if wrote[k] || rewrote && m.Version > 0 && m.Version == int64(p.CAS) {
			m = ohmlabv1alpha1.ManagedKey{Version: int64(written.Version), CreatedTime: createdTime(written.Created)}
		}
		m.Key = k
		// Version 0 was recorded by the first release: the key stays
		// managed, at a version nobody can tell.
		if m.Version > 0 || recorded {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// emit records a Normal event for what was written and for the keys a prune
// kept, and a Warning event and a log line when the object enters a failing
// state (once per transition).
func (r *Reconciler) emit(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, out outcome) {
	if p := out.plan; p != nil && out.applied {
		if !p.Empty() {
			r.event(seed, corev1.EventTypeNormal, eventReason(*p), "Write", writeNote(*p, out.version))
		}
		if len(p.Kept) > 0 {
			r.event(seed, corev1.EventTypeNormal, "Kept", "Prune", keptMessage(p.Kept).withHead("kept: "))
		}
	}
	if !out.failing() {
		return
	}
	if old := findCondition(seed, ohmlabv1alpha1.ConditionReady); old != nil && old.Reason == out.reason {
		return
	}
	r.event(seed, corev1.EventTypeWarning, out.reason, "Reconcile", out.message)
	ctrl.LoggerFrom(ctx).Info("the object is not ready", "path", seed.Spec.Path, "reason", out.reason, "message", out.message.capped(maxConditionMessage))
}

// event records an event regarding seed, its note capped to what the API
// server accepts: a longer Event would be refused, and never show.
func (r *Reconciler) event(seed *ohmlabv1alpha1.VaultSeed, eventType, reason, action string, note Message) {
	r.Recorder.Eventf(seed, nil, eventType, reason, action, "%s", note.capped(maxEventNote))
}

// writeNote is the note of the event of a write: what the plan changed and
// the KV version it wrote.
func writeNote(p Plan, version int) Message {
	return p.summary().withTail(fmt.Sprintf(" (KV version %d)", version))
}

// eventReason names what a plan mainly did.
func eventReason(p Plan) string {
	c := p.Counts()
	switch {
	case c[ActionCreate] > 0:
		return "Created"
	case c[ActionRotate] > 0 || c[ActionRecordToken] > 0:
		return "Rotated"
	case c[ActionAdopt] > 0:
		return "Adopted"
	}
	return "Updated"
}

func findCondition(seed *ohmlabv1alpha1.VaultSeed, typ string) *metav1.Condition {
	for i := range seed.Status.Conditions {
		if seed.Status.Conditions[i].Type == typ {
			return &seed.Status.Conditions[i]
		}
	}
	return nil
}

// problemsReason is InvalidSpec when any problem is, else the first
// problem's reason (InvalidRotation).
func problemsReason(ps []templating.Problem) string {
	for _, p := range ps {
		if p.Reason == templating.ReasonInvalidSpec {
			return ohmlabv1alpha1.ReasonInvalidSpec
		}
	}
	return ps[0].Reason
}

// problemsMessage is the Stalled message of an invalid object, which only
// an object that did not pass the webhook has (product document,
// "Conditions": InvalidSpec, InvalidRotation): its problems, then what to do.
func problemsMessage(ps []templating.Problem) Message {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return listMessage("", lines, "; ", "; fix the object's spec and apply it (ohmlab validate finds this before merge); until then nothing is written to the path")
}

// rewriteFirstReleaseStatus writes status.managedKeys of an object stored
// by the first release, a list of names, in today's shape, each key with an
// unknown version (issue 23). A status patch computed from the decoded
// object would leave the list as stored: the decoded names equal their
// rewritten form. This patch carries the whole list, locked on the
// resourceVersion read so that a stale copy never replaces a newer list.
func (r *Reconciler) rewriteFirstReleaseStatus(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) error {
	if !slices.ContainsFunc(seed.Status.ManagedKeys, func(m ohmlabv1alpha1.ManagedKey) bool { return m.StoredAsName }) {
		return nil
	}
	base := seed.DeepCopy()
	base.Status.ManagedKeys = nil
	if err := r.Client.Status().Patch(ctx, seed, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("rewriting status.managedKeys of %s, stored by the first release as names: %w", klog.KObj(seed), err)
	}
	r.recordWrite(ctx, base.ResourceVersion, seed)
	ctrl.LoggerFrom(ctx).Info("rewrote status.managedKeys, stored by the first release as names: their versions are unknown, so a prune keeps them", "keys", len(seed.Status.ManagedKeys))
	return nil
}

// syncFinalizer adds the finalizer to an object whose path must be deleted
// with it, and removes it from any other.
func (r *Reconciler) syncFinalizer(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) error {
	want := seed.Spec.DeletionPolicy == ohmlabv1alpha1.DeletionPolicyDelete && r.AllowDelete && !r.ObserveOnly
	if controllerutil.ContainsFinalizer(seed, ohmlabv1alpha1.Finalizer) == want {
		return nil
	}
	before := seed.DeepCopy()
	if want {
		controllerutil.AddFinalizer(seed, ohmlabv1alpha1.Finalizer)
	} else {
		controllerutil.RemoveFinalizer(seed, ohmlabv1alpha1.Finalizer)
	}
	// The optimistic lock makes a patch computed from a stale copy fail
	// instead of dropping a finalizer someone else added meanwhile.
	if err := r.Client.Patch(ctx, seed, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating the finalizer of %s: %w", klog.KObj(seed), err)
	}
	r.recordWrite(ctx, before.ResourceVersion, seed)
	return nil
}

// recordWrite remembers obj, written on the copy at resourceVersion base,
// until the cache holds it. The watch's event of the write may have come
// before it was recorded: the cached copy, read once after, says so.
func (r *Reconciler) recordWrite(ctx context.Context, base string, obj *ohmlabv1alpha1.VaultSeed) {
	r.lastWrites.wrote(base, obj)
	cur := &ohmlabv1alpha1.VaultSeed{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err == nil {
		r.lastWrites.cached(cur)
	}
}

// finalize removes the path of a deleted object that carries the finalizer,
// when the path carries this object's owner marker, then the finalizer.
func (r *Reconciler) finalize(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(seed, ohmlabv1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(seed)
	if seed.Spec.DeletionPolicy == ohmlabv1alpha1.DeletionPolicyDelete && r.AllowDelete && !r.ObserveOnly {
		if err := r.deletePath(ctx, seed); err != nil {
			out := backendOutcome(err)
			if rerr := r.report(ctx, seed, out); rerr != nil {
				return ctrl.Result{}, rerr
			}
			return ctrl.Result{RequeueAfter: r.backoff.When(key)}, nil
		}
	}
	before := seed.DeepCopy()
	controllerutil.RemoveFinalizer(seed, ohmlabv1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, seed, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("removing the finalizer of %s: %w", klog.KObj(seed), err)
	}
	r.backoff.Forget(key)
	return ctrl.Result{}, nil
}

func (r *Reconciler) deletePath(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) error {
	s, err := r.KV.Read(ctx, seed.Spec.Path)
	if err != nil {
		return err
	}
	if owner := s.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey]; owner != seeds.Owner(seed) {
		ctrl.LoggerFrom(ctx).Info("not deleting a path this object does not own", "path", seed.Spec.Path, "owner", owner)
		return nil
	}
	if err := r.KV.Delete(ctx, seed.Spec.Path); err != nil {
		return err
	}
	r.sources.forget(seed.Spec.Path)
	r.event(seed, corev1.EventTypeNormal, "Deleted", "Delete", textMessage("deleted the path and all its versions"))
	ctrl.LoggerFrom(ctx).Info("deleted the path", "path", seed.Spec.Path)
	return nil
}
