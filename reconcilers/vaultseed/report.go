package vaultseed

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/planner"
)

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
	r.Metrics.setReady(r.Target, seed.Namespace, seed.Name, out.Reason, out.Ready)
	if at, ok := recordedRotation(out); ok {
		r.Metrics.rotatedAt(r.Target, seed.Namespace, seed.Name, at)
	}

	updated := seed.DeepCopy()
	out.Apply(&updated.Status, seed.Generation, r.ObserveOnly)
	if v, ok := requestedAt(seed); ok {
		// This reconcile handled the request (read its sources from
		// Vault): a person, or kubectl wait, can tell.
		updated.Status.LastHandledReconcileAt = v
	}
	managed, _ := r.store.managed(seed)
	updated.Status.ManagedKeys, updated.Status.Version = r.statusRecords(seed, out, managed)
	if equality.Semantic.DeepEqual(seed.Status, updated.Status) {
		r.store.setUnreported(seed, nil, false)
		return nil
	}
	// The optimistic lock makes a status computed from a copy that someone
	// else changed since (another process, a spec edit) fail instead of
	// replacing what they wrote; the next reconcile computes it again, with
	// what was written to Vault kept in the store.
	if err := r.Client.Status().Patch(ctx, updated, client.MergeFromWithOptions(seed, client.MergeFromWithOptimisticLock{})); err != nil {
		if out.applied {
			r.store.setUnreported(seed, updated.Status.ManagedKeys, true)
		}
		return fmt.Errorf("patching status: %w", err)
	}
	r.recordWrite(ctx, seed.ResourceVersion, updated)
	r.store.setUnreported(seed, nil, false)
	return nil
}

// statusRecords are status.managedKeys and status.version after the
// outcome: what an applied plan wrote (planner.ManagedStatus), or, when no
// plan was applied, the records the path as read still shows.
func (r *Reconciler) statusRecords(seed *ohmlabv1alpha1.VaultSeed, out outcome, managed []ohmlabv1alpha1.ManagedKey) ([]ohmlabv1alpha1.ManagedKey, int64) {
	keys, version := managed, seed.Status.Version
	p := out.plan
	switch {
	case r.ObserveOnly:
	case p != nil && (out.applied || p.Data == nil):
		keys = planner.ManagedStatus(*p, managed, out.applied, out.written)
	case out.path != nil:
		keys = planner.RecordsOn(out.path, seeds.Owner(seed), managed)
	}
	switch {
	case p != nil:
		version = int64(out.written.Version)
	case out.path != nil && !r.ObserveOnly:
		version = int64(out.path.Version)
	}
	return keys, version
}

// emit is the one place that reports writes: a Normal event and the write
// metric for what was written (and for a write of the object that landed
// unreported), a Normal event for the keys a prune kept, and a Warning
// event and a log line when the object enters a failing state (once per
// transition).
func (r *Reconciler) emit(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, out outcome) {
	if l := out.late; l != nil {
		// Its own action: the events API folds events of one object, reason
		// and action into one series that keeps the first note, and this
		// reconcile's own write may have the same reason.
		r.reportWrite(seed, l.Plan, l.Version, "ReportLateWrite")
		ctrl.LoggerFrom(ctx).Info("an unreported write had landed", "path", seed.Spec.Path, "version", l.Version, "changes", l.Plan.Summary())
		r.notifyDependents(ctx, seed.Spec.Path)
	}
	if p := out.plan; p != nil && out.applied {
		switch {
		case p.Data != nil:
			r.reportWrite(seed, *p, out.written.Version, "Write")
		case !p.Empty():
			r.event(seed, corev1.EventTypeNormal, p.EventReason(), "Write", p.WriteNote(out.written.Version))
		}
		if len(p.Kept) > 0 {
			r.event(seed, corev1.EventTypeNormal, ohmlabv1alpha1.EventReasonKept, "Prune", planner.KeptMessage(p.Kept).WithHead("kept: "))
		}
	}
	if !out.Failing() {
		return
	}
	if old := findCondition(seed, ohmlabv1alpha1.ConditionReady); old != nil && old.Reason == out.Reason {
		return
	}
	r.event(seed, corev1.EventTypeWarning, out.Reason, "Reconcile", out.Message)
	ctrl.LoggerFrom(ctx).Info("the object is not ready", "path", seed.Spec.Path, "reason", out.Reason, "message", out.Message.Capped(planner.MaxConditionMessage))
}

// reportWrite is the event (of action) and the write metric of a data write.
func (r *Reconciler) reportWrite(seed *ohmlabv1alpha1.VaultSeed, p planner.Plan, version int, action string) {
	r.Metrics.wrote(r.Target, seed.Namespace, seed.Name)
	r.event(seed, corev1.EventTypeNormal, p.EventReason(), action, p.WriteNote(version))
}

// event records an event regarding seed, its note capped to what the API
// server accepts: a longer Event would be refused, and never show.
func (r *Reconciler) event(seed *ohmlabv1alpha1.VaultSeed, eventType, reason, action string, note planner.Message) {
	r.Recorder.Eventf(seed, nil, eventType, reason, action, "%s", note.Capped(planner.MaxEventNote))
}

// recordedRotation is the time the path records for its last rotation
// after the outcome: the applied plan's, else the path's as read; false
// when none is known.
func recordedRotation(out outcome) (time.Time, bool) {
	var at string
	if out.path != nil {
		at = out.path.CustomMetadata[ohmlabv1alpha1.RotatedAtMetadataKey]
	}
	if p := out.plan; p != nil && out.applied {
		if v := p.Mark[ohmlabv1alpha1.RotatedAtMetadataKey]; v != "" {
			at = v
		}
		if p.RecordRotatedAt != "" {
			at = p.RecordRotatedAt
		}
	}
	t, err := time.Parse(time.RFC3339, at)
	return t, err == nil
}

func findCondition(seed *ohmlabv1alpha1.VaultSeed, typ string) *metav1.Condition {
	for i := range seed.Status.Conditions {
		if seed.Status.Conditions[i].Type == typ {
			return &seed.Status.Conditions[i]
		}
	}
	return nil
}

// recordWrite remembers obj, written on the copy at resourceVersion base,
// until the cache holds it. The watch's event of the write may have come
// before it was recorded: the cached copy, read once after, says so.
func (r *Reconciler) recordWrite(ctx context.Context, base string, obj *ohmlabv1alpha1.VaultSeed) {
	r.store.wrote(base, obj)
	cur := &ohmlabv1alpha1.VaultSeed{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err == nil {
		r.store.cached(cur)
	}
}
