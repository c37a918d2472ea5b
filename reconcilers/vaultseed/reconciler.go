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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
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
)

// Reconciler reconciles the VaultSeed objects of one target.
type Reconciler struct {
	// Client reads objects from the manager's cache and writes status.
	Client client.Client
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
	// ResyncPeriod is how often every object is reconciled again (a little
	// jitter is added).
	ResyncPeriod time.Duration
	// Timeout bounds one reconcile.
	Timeout time.Duration

	backoff    workqueue.TypedRateLimiter[types.NamespacedName]
	dependents chan event.TypedGenericEvent[*ohmlabv1alpha1.VaultSeed]
}

// outcome is what one reconcile of a live object found and did.
type outcome struct {
	result
	// plan is the plan that was applied (or, in observe-only mode, would
	// be); nil when planning did not happen.
	plan *Plan
	// version is the KV version read or written; with plan.ManagedKeys it
	// goes to status when plan is set.
	version int
	// backoff asks for a retry with backoff (the object waits).
	backoff bool
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	seed := &ohmlabv1alpha1.VaultSeed{}
	if err := r.Client.Get(ctx, req.NamespacedName, seed); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget(r.Target, req.Namespace, req.Name)
			r.backoff.Forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !seed.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, seed)
	}
	if err := r.syncFinalizer(ctx, seed); err != nil {
		return ctrl.Result{}, err
	}
	out, err := r.sync(ctx, seed)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.report(ctx, seed, out); err != nil {
		return ctrl.Result{}, err
	}
	if out.backoff {
		return ctrl.Result{RequeueAfter: r.backoff.When(req.NamespacedName)}, nil
	}
	r.backoff.Forget(req.NamespacedName)
	return ctrl.Result{RequeueAfter: wait.Jitter(r.ResyncPeriod, 0.1)}, nil
}

// sync observes, plans and applies. The error is for failures of the
// Kubernetes API or of value generation; Vault's answers are outcomes.
func (r *Reconciler) sync(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed) (outcome, error) {
	obj, analysis := seeds.Analyse(seed)
	if len(analysis.Problems) > 0 {
		return outcome{result: stalledResult(problemsReason(analysis.Problems), problemsMessage(analysis.Problems))}, nil
	}
	ring, err := r.cycle(ctx, seed, obj)
	if err != nil {
		return outcome{}, err
	}
	if ring != "" {
		return outcome{result: stalledResult(ohmlabv1alpha1.ReasonRefCycle, ring)}, nil
	}
	if seed.Spec.DeletionPolicy == ohmlabv1alpha1.DeletionPolicyDelete && !r.AllowDelete {
		return outcome{result: stalledResult(ohmlabv1alpha1.ReasonForbidden,
			"deletionPolicy Delete is not allowed: the controller's chart must set targets.vault.allowDelete: true")}, nil
	}
	desired := Desired{Owner: seeds.Owner(seed), Analysis: analysis, Prune: seed.Spec.Prune, ManagedKeys: seed.Status.ManagedKeys}
	if seed.Spec.Rotate != nil {
		desired.RotationToken = seed.Spec.Rotate.Token
	}
	for range maxCASAttempts {
		observed, err := r.observe(ctx, seed.Spec.Path, analysis.RefPaths)
		if err != nil {
			return backendOutcome(err), nil
		}
		p, err := plan(desired, observed, r.Generator)
		if err != nil {
			return outcome{}, err
		}
		switch p.Outcome {
		case OutcomeWait:
			return outcome{result: waitingResult(p.Reason, p.Message), backoff: true}, nil
		case OutcomeStop:
			if p.Reason == ohmlabv1alpha1.ReasonOwnedByAnother {
				return outcome{result: result{reason: p.Reason, message: p.Message, finished: true}}, nil
			}
			return outcome{result: stalledResult(p.Reason, p.Message)}, nil
		}
		if r.ObserveOnly {
			return observeOnlyOutcome(p, observed.Path.Version), nil
		}
		version, err := r.apply(ctx, seed, p)
		if errors.Is(err, vaultkv.ErrCASMismatch) {
			ctrl.LoggerFrom(ctx).Info("the path changed while reconciling; reading it again", "path", seed.Spec.Path)
			continue
		}
		if err != nil {
			return backendOutcome(err), nil
		}
		return outcome{result: readyResult(fmt.Sprintf("the path holds what is declared (KV version %d)", version)), plan: &p, version: version}, nil
	}
	return outcome{result: waitingResult(ohmlabv1alpha1.ReasonProgressing,
		fmt.Sprintf("the path changed during each of %d attempts; retrying", maxCASAttempts)), backoff: true}, nil
}

func observeOnlyOutcome(p Plan, version int) outcome {
	if p.Empty() {
		no := false
		res := readyResult(fmt.Sprintf("the path holds what is declared (KV version %d)", version))
		res.drifted = &no
		return outcome{result: res, plan: &p, version: version}
	}
	yes := true
	summary := p.Summary()
	return outcome{result: result{reason: ohmlabv1alpha1.ReasonObserveOnly, message: "observe-only: a real run would make " + summary,
		drifted: &yes, driftMessage: summary, finished: true}, plan: &p, version: version}
}

// observe reads the path and every path it references: one request each.
func (r *Reconciler) observe(ctx context.Context, path string, refPaths []string) (Observed, error) {
	own, err := r.KV.Read(ctx, path)
	if err != nil {
		return Observed{}, err
	}
	o := Observed{Path: own, Refs: make(map[string]*vaultkv.Secret, len(refPaths))}
	for _, p := range refPaths {
		if o.Refs[p], err = r.KV.Read(ctx, p); err != nil {
			return Observed{}, err
		}
	}
	return o, nil
}

// apply writes a plan: metadata (owner marker) first, then the data with
// check-and-set, then the rotation token, so that a token is recorded only
// once its keys are written. It returns the path's KV version.
func (r *Reconciler) apply(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, p Plan) (int, error) {
	path := seed.Spec.Path
	if p.Mark != nil {
		if err := r.KV.Mark(ctx, path, p.Mark); err != nil {
			return 0, err
		}
	}
	version := p.CAS
	if p.Data != nil {
		v, err := r.KV.Write(ctx, path, p.Data, p.CAS)
		if err != nil {
			return 0, err
		}
		version = v
		r.Metrics.DataWrites.WithLabelValues(r.Target, seed.Namespace, seed.Name).Inc()
		r.notifyDependents(ctx, path)
	}
	if p.RecordToken != "" {
		if err := r.KV.Mark(ctx, path, map[string]string{ohmlabv1alpha1.RotationTokenMetadataKey: p.RecordToken}); err != nil {
			return 0, fmt.Errorf("recording rotation token %q after rotating: %w", p.RecordToken, err)
		}
	}
	if !p.Empty() {
		ctrl.LoggerFrom(ctx).Info("wrote the path", "path", path, "changes", p.Summary(), "version", version)
	}
	return version, nil
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
	return outcome{result: waitingResult(reason, err.Error()), backoff: true}
}

// report writes status (only when it changed), emits events and sets the
// object's metrics.
func (r *Reconciler) report(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, out outcome) error {
	updated := seed.DeepCopy()
	out.apply(&updated.Status, seed.Generation, r.ObserveOnly)
	if out.plan != nil {
		if !r.ObserveOnly {
			updated.Status.ManagedKeys = out.plan.ManagedKeys
		}
		updated.Status.Version = int64(out.version)
	}
	if !equality.Semantic.DeepEqual(seed.Status, updated.Status) {
		if err := r.Client.Status().Patch(ctx, updated, client.MergeFrom(seed)); err != nil {
			return fmt.Errorf("patching status: %w", err)
		}
	}
	r.emit(ctx, seed, out)
	if r.ObserveOnly && out.plan != nil {
		r.Metrics.setPlanned(seed.Namespace, seed.Name, out.plan.Counts())
	}
	r.Metrics.setReady(r.Target, seed.Namespace, seed.Name, out.reason, out.ready)
	if out.finished {
		r.Metrics.LastReconcile.WithLabelValues(r.Target, seed.Namespace, seed.Name).SetToCurrentTime()
	}
	return nil
}

// emit records a Normal event for what was written, and a Warning event and
// a log line when the object enters a failing state (once per transition).
func (r *Reconciler) emit(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, out outcome) {
	if p := out.plan; p != nil && !r.ObserveOnly && !p.Empty() {
		r.Recorder.Eventf(seed, nil, corev1.EventTypeNormal, eventReason(*p), "Write", "%s (KV version %d)", p.Summary(), out.version)
	}
	if !out.failing() {
		return
	}
	if old := findCondition(seed, ohmlabv1alpha1.ConditionReady); old != nil && old.Reason == out.reason {
		return
	}
	r.Recorder.Eventf(seed, nil, corev1.EventTypeWarning, out.reason, "Reconcile", "%s", out.message)
	ctrl.LoggerFrom(ctx).Info("the object is not ready", "path", seed.Spec.Path, "reason", out.reason, "message", out.message)
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

func problemsMessage(ps []templating.Problem) string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "; ")
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
	if err := r.Client.Patch(ctx, seed, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("updating the finalizer of %s: %w", klog.KObj(seed), err)
	}
	return nil
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
	if err := r.Client.Patch(ctx, seed, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
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
	r.Recorder.Eventf(seed, nil, corev1.EventTypeNormal, "Deleted", "Delete", "deleted the path and all its versions")
	ctrl.LoggerFrom(ctx).Info("deleted the path", "path", seed.Spec.Path)
	return nil
}
