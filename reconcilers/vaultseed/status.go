package vaultseed

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// result is the outcome of one reconcile as the conditions report it
// (product document, "Conditions"; kstatus: Ready always present,
// Reconciling and Stalled only when True and never both).
type result struct {
	// ready is Ready's status; reason and message are Ready's, and those of
	// Reconciling or Stalled when one is set.
	ready   bool
	reason  string
	message Message
	// reconciling: the object waits for something and retries with backoff.
	reconciling bool
	// stalled: the controller cannot go on as declared; checked again at
	// every resync.
	stalled bool
	// drifted is set in observe-only mode: whether a real run would change
	// something, and driftMessage the plan's summary; nil when the
	// reconcile could not plan (Drifted Unknown).
	drifted      *bool
	driftMessage Message
	// finished: the reconcile of this generation finished or stalled, so
	// observedGeneration moves to it.
	finished bool
}

func readyResult(message string) result {
	return result{ready: true, reason: ohmlabv1alpha1.ReasonReconciled, message: textMessage(message), finished: true}
}

func waitingResult(reason string, message Message) result {
	return result{reason: reason, message: message, reconciling: true}
}

func stalledResult(reason string, message Message) result {
	return result{reason: reason, message: message, stalled: true, finished: true}
}

// failing says whether the result is one that a Warning event announces.
func (r result) failing() bool {
	return !r.ready && r.reason != ohmlabv1alpha1.ReasonObserveOnly
}

// apply writes the result into status as conditions of generation gen.
// Conditions whose status does not change keep their transition time, so a
// quiet resync changes nothing. Every condition's message is capped here.
func (r result) apply(st *ohmlabv1alpha1.VaultSeedStatus, gen int64, observeOnly bool) {
	set := func(typ string, status metav1.ConditionStatus, reason string, message Message) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: message.capped(maxConditionMessage), ObservedGeneration: gen,
		})
	}
	ready := metav1.ConditionFalse
	if r.ready {
		ready = metav1.ConditionTrue
	}
	set(ohmlabv1alpha1.ConditionReady, ready, r.reason, r.message)
	if r.reconciling {
		set(ohmlabv1alpha1.ConditionReconciling, metav1.ConditionTrue, r.reason, r.message)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, ohmlabv1alpha1.ConditionReconciling)
	}
	if r.stalled {
		set(ohmlabv1alpha1.ConditionStalled, metav1.ConditionTrue, r.reason, r.message)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, ohmlabv1alpha1.ConditionStalled)
	}
	switch {
	case !observeOnly:
		meta.RemoveStatusCondition(&st.Conditions, ohmlabv1alpha1.ConditionDrifted)
	case r.drifted != nil && *r.drifted:
		set(ohmlabv1alpha1.ConditionDrifted, metav1.ConditionTrue, ohmlabv1alpha1.ReasonObserveOnly, r.driftMessage)
	case r.drifted != nil:
		set(ohmlabv1alpha1.ConditionDrifted, metav1.ConditionFalse, ohmlabv1alpha1.ReasonInSync, textMessage("a real run would change nothing"))
	default:
		// The reconcile could not plan: what a real run would do is not
		// known, and the last plan is not reported as if it still held.
		set(ohmlabv1alpha1.ConditionDrifted, metav1.ConditionUnknown, r.reason, r.message)
	}
	if r.finished {
		st.ObservedGeneration = gen
	}
}
