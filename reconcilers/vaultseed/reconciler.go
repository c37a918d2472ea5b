// Package vaultseed reconciles VaultSeed objects into Vault KV v2 paths
// (product document, "What the controller does with a path", "Deletion",
// "Conditions"). Each reconcile observes (reads the path and its reference
// sources, observe.go), plans (the planner package, a pure function),
// applies (metadata first, then data with check-and-set, apply.go) and
// reports (status, events, metrics, report.go); docs/DESIGN.md draws the
// flow of one object.
package vaultseed

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/planner"
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
	// Tenants are the tenant namespaces (targets.vault.tenants): an
	// object of one is checked against its namespace's scope before any
	// Vault request (tenancy.Check) and reconciled with its namespace's
	// client from TenantKV, never with KV.
	Tenants tenancy.Config
	// TenantKV gives each tenant namespace its own Vault client; nil, a
	// tenant's object gets an error and no Vault request.
	TenantKV KVSource
	// Selector chooses the objects of this process's shard
	// (docs/users/sharding.md); an object it does not match is left to another
	// process and forgotten here: its finalizer, status and path stay as
	// they are. nil: every object.
	Selector labels.Selector
	// Clock is the planner's clock (rotate.every, the time a rotation
	// records); nil: time.Now. Tests move it past a period.
	Clock func() time.Time
	// Brake holds back the paths that vanished from Vault when many did
	// at once (brake.go).
	Brake Brake

	// skipScopeCheck turns the reconcile-time scope check off, for the
	// tests that show Vault refusing a tenant what the check would.
	skipScopeCheck bool

	backoff    workqueue.TypedRateLimiter[types.NamespacedName]
	dependents chan event.TypedGenericEvent[*ohmlabv1alpha1.VaultSeed]
	// store is what the process knows of each object beyond the cache.
	store    store
	sources  *sources
	vanished *vanishedPaths
}

// outcome is what one reconcile of a live object found and did.
type outcome struct {
	planner.Result
	// plan is the plan made: applied, or in observe-only mode what a real
	// run would do; nil when planning did not happen or stopped before the
	// path was read.
	plan *planner.Plan
	// applied: the plan's writes happened, or at least its data write
	// landed before a later step failed; what it wrote is reported.
	applied bool
	// written is the KV version read or written and its created_time
	// (zero when not known).
	written vaultkv.Written
	// path is the path as read, nil when it was not: the managed keys a
	// reconcile that applied no plan reports are those it shows
	// (planner.RecordsOn).
	path *vaultkv.Secret
	// late is a write of the object that landed unreported, reported with
	// this outcome.
	late *planner.Late
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
	last := r.store.lastWrite(req.NamespacedName)
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
	r.store.latest(seed, last)
	if !r.owns(seed) {
		// Another shard's: it moved there, and that shard's process
		// reconciles it.
		return ctrl.Result{}, r.leave(ctx, req.NamespacedName, seed)
	}
	if !r.store.add(req.NamespacedName, factAttempted) {
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
	return r.reconcileLive(parent, ctx, seed)
}

// reconcileLive syncs a live object of this process and reports it.
func (r *Reconciler) reconcileLive(parent, ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(seed)
	out, err := r.sync(ctx, seed)
	if err != nil {
		return ctrl.Result{}, err
	}
	out.timedOut = out.timedOut || ctx.Err() != nil
	if r.sourcesComing(ctx, seed, out) {
		return ctrl.Result{RequeueAfter: r.backoff.When(key)}, nil
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
		return ctrl.Result{RequeueAfter: r.backoff.When(key)}, nil
	}
	r.backoff.Forget(key)
	return r.resync(key, time.Now()), nil
}

// sync observes, plans and applies, reading and planning again after a
// check-and-set conflict. The error is for failures of the Kubernetes API
// or of value generation; Vault's answers are outcomes.
func (r *Reconciler) sync(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) (outcome, error) {
	if !r.ObserveOnly {
		// Its dependents reconciled meanwhile wait for its write.
		defer r.sources.begin(seed.Spec.Path)()
	}
	in, err := r.input(ctx, seed)
	if err != nil {
		return outcome{}, err
	}
	if res, out := r.outOfScope(in, false); out {
		return outcome{Result: res}, nil
	}
	if stop := planner.Check(in); stop != nil {
		res, _ := stop.Result(0)
		return outcome{Result: res}, nil
	}
	kv, err := r.kvFor(seed.Namespace)
	if err != nil {
		return backendOutcome(err), nil
	}
	reader := r.reader(ctx, seed, kv)
	defer reader.expect(in.Analysis.RefPaths)()
	var late *planner.Late
	for range maxCASAttempts {
		out, err := r.attempt(ctx, in, reader, kv)
		// A late write found by an attempt that met a conflict is reported
		// all the same: the next attempt finds this attempt's record.
		if out.late == nil {
			out.late = late
		}
		late = out.late
		if !errors.Is(err, vaultkv.ErrCASMismatch) {
			return out, err
		}
		ctrl.LoggerFrom(ctx).Info("the path changed while reconciling; reading it again", "path", seed.Spec.Path)
	}
	return outcome{Result: planner.WaitingResult(ohmlabv1alpha1.ReasonProgressing,
		planner.Text(fmt.Sprintf("the path changed during each of %d attempts; retrying", maxCASAttempts))), backoff: true, late: late}, nil
}

// attempt is one observe, plan and apply. Its error is vaultkv.ErrCASMismatch
// when the path changed between the read and the write.
func (r *Reconciler) attempt(ctx context.Context, in planner.Input, reader planner.KVReader, kv vaultkv.KV) (outcome, error) {
	o, err := planner.Observe(ctx, reader, in)
	if err != nil {
		out := backendOutcome(err)
		out.path = o.Path
		return out, nil
	}
	p, err := r.decide(ctx, in, o, kv)
	var stopped *templating.StoppedError
	var backend *vaultkv.Error
	switch {
	case errors.As(err, &stopped) && ctx.Err() == nil:
		return outcome{Result: planner.StalledResult(ohmlabv1alpha1.ReasonGenerationTimeout, planner.Text(r.generationTimeoutMessage(in)))}, nil
	case errors.As(err, &backend):
		// Vault's answer to a <vault-password:> key, which generation asks:
		// reported as any other answer of Vault, with the key it is for.
		out := backendOutcome(err)
		out.path = o.Path
		return out, nil
	case err != nil:
		return outcome{}, err
	case p.Outcome == planner.OutcomeNewer:
		res, _ := p.Result(0)
		return outcome{Result: res}, nil
	}
	if res, out := r.outOfScope(in, p.Counts()[planner.ActionAdopt] > 0); out {
		return outcome{Result: res}, nil
	}
	r.tenantOwnerMessage(in.Seed, &p, o.Path)
	if r.ObserveOnly {
		return observeOnlyOutcome(p, o.Path), nil
	}
	if !p.Vanished {
		r.vanished.back(client.ObjectKeyFromObject(in.Seed))
	} else if out, held, err := r.brakeVanished(ctx, in); held || err != nil {
		// Decided before anything is written: status keeps its records,
		// so the path is still known as vanished at the next resync.
		return out, err
	}
	applied, written, err := r.apply(ctx, kv, in.Seed, p, o.Path)
	if errors.Is(err, vaultkv.ErrCASMismatch) {
		return outcome{late: p.Late}, err
	}
	out := outcome{plan: &p, applied: applied, written: written, path: o.Path, late: p.Late}
	if p.Vanished && applied && p.Data != nil {
		r.vanished.back(client.ObjectKeyFromObject(in.Seed))
	}
	if err != nil {
		// What was written before the failure is still reported.
		b := backendOutcome(err)
		out.Result, out.backoff, out.timedOut = b.Result, b.backoff, b.timedOut
		return out, nil
	}
	out.Result, out.backoff = p.Result(written.Version)
	if p.Outcome == planner.OutcomeWait {
		out.absentSources = absentSources(o.Refs)
	}
	return out, nil
}

// decide plans, leaving the writes that follow value generation a quarter
// of the reconcile's time. Its bcrypt work waits its namespace's turn, and
// Vault's password policies are asked with kv, the object's own Vault
// identity.
func (r *Reconciler) decide(ctx context.Context, in planner.Input, o planner.Observed, kv vaultkv.KV) (planner.Plan, error) {
	gen := r.Generator
	gen.Dry = r.ObserveOnly
	gen.Turn = in.Seed.Namespace
	gen.VaultPassword = kv.GeneratePassword
	if end, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, end.Add(-r.Timeout/4))
		defer cancel()
	}
	return planner.Decide(ctx, in, o, gen)
}

// observeOnlyOutcome reports what a real run would do (planner's
// ObserveOnlyResult), at the version read.
func observeOnlyOutcome(p planner.Plan, path *vaultkv.Secret) outcome {
	res, backoff, shown := p.ObserveOnlyResult(path.Version)
	out := outcome{Result: res, backoff: backoff, written: vaultkv.Written{Version: path.Version}}
	if shown {
		out.plan = &p
	}
	return out
}

// backendOutcome reports an error of Vault (planner.BackendResult), retried
// with backoff.
func backendOutcome(err error) outcome {
	return outcome{Result: planner.BackendResult(err), backoff: true, timedOut: vaultkv.IsTimeout(err)}
}

// generationTimeoutMessage is the stall of an object whose values were not
// computed in the time a reconcile leaves to generation. It is Stalled, not
// retried with backoff: each attempt costs the cores as much again, and
// other objects' hashes share them.
func (r *Reconciler) generationTimeoutMessage(in planner.Input) string {
	return fmt.Sprintf("computing the object's values did not finish in the %s a reconcile leaves to it (of its %s): it declares %d bcrypt hashes and key pairs "+
		"(at most %d are admitted), and bcrypt is slow by design; nothing is written to the path. Split the keys over several objects, or give the controller more CPU; "+
		"this is checked again at the next resync", r.Timeout-r.Timeout/4, r.Timeout, templating.CostlyKeys(in.Analysis), templating.MaxCostlyKeys)
}
