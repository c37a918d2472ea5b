package planner

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// Result is the outcome of one reconcile as the conditions report it
// (product document, "Conditions"; kstatus: Ready always present,
// Reconciling and Stalled only when True and never both).
type Result struct {
	// Ready is Ready's status; Reason and Message are Ready's, and those of
	// Reconciling or Stalled when one is set.
	Ready   bool
	Reason  string
	Message Message
	// Reconciling: the object waits for something and retries.
	Reconciling bool
	// Stalled: the controller cannot go on as declared; checked again at
	// every resync.
	Stalled bool
	// Drifted is set in observe-only mode: whether a real run would change
	// something, and DriftMessage the plan's summary; nil when the
	// reconcile could not plan (Drifted Unknown).
	Drifted      *bool
	DriftMessage Message
	// Finished: the reconcile of this generation finished or stalled, so
	// observedGeneration moves to it.
	Finished bool
}

// ReadyResult is Ready with message.
func ReadyResult(message string) Result {
	return Result{Ready: true, Reason: ohmlabv1alpha1.ReasonReconciled, Message: Text(message), Finished: true}
}

// WaitingResult is Reconciling for reason.
func WaitingResult(reason string, message Message) Result {
	return Result{Reason: reason, Message: message, Reconciling: true}
}

// StalledResult is Stalled for reason.
func StalledResult(reason string, message Message) Result {
	return Result{Reason: reason, Message: message, Stalled: true, Finished: true}
}

// Failing says whether the result is one that a Warning event announces.
func (r Result) Failing() bool {
	return !r.Ready && r.Reason != ohmlabv1alpha1.ReasonObserveOnly
}

// Apply writes the result into status as conditions of generation gen.
// Conditions whose status does not change keep their transition time, so a
// quiet resync changes nothing. Every condition's message is capped here.
func (r Result) Apply(st *ohmlabv1alpha1.VaultSeedStatus, gen int64, observeOnly bool) {
	set := func(typ string, status metav1.ConditionStatus, reason string, message Message) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: message.Capped(MaxConditionMessage), ObservedGeneration: gen,
		})
	}
	ready := metav1.ConditionFalse
	if r.Ready {
		ready = metav1.ConditionTrue
	}
	set(ohmlabv1alpha1.ConditionReady, ready, r.Reason, r.Message)
	if r.Reconciling {
		set(ohmlabv1alpha1.ConditionReconciling, metav1.ConditionTrue, r.Reason, r.Message)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, ohmlabv1alpha1.ConditionReconciling)
	}
	if r.Stalled {
		set(ohmlabv1alpha1.ConditionStalled, metav1.ConditionTrue, r.Reason, r.Message)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, ohmlabv1alpha1.ConditionStalled)
	}
	switch {
	case !observeOnly:
		meta.RemoveStatusCondition(&st.Conditions, ohmlabv1alpha1.ConditionDrifted)
	case r.Drifted != nil && *r.Drifted:
		set(ohmlabv1alpha1.ConditionDrifted, metav1.ConditionTrue, ohmlabv1alpha1.ReasonObserveOnly, r.DriftMessage)
	case r.Drifted != nil:
		set(ohmlabv1alpha1.ConditionDrifted, metav1.ConditionFalse, ohmlabv1alpha1.ReasonInSync, Text("a real run would change nothing"))
	default:
		// The reconcile could not plan: what a real run would do is not
		// known, and the last plan is not reported as if it still held.
		set(ohmlabv1alpha1.ConditionDrifted, metav1.ConditionUnknown, r.Reason, r.Message)
	}
	if r.Finished {
		st.ObservedGeneration = gen
	}
}

// Result is the result of the plan applied without error at version, and
// whether the object retries with backoff. A plan that writes nothing
// because a newer generation wrote the path waits without backoff: that
// generation's arrival in the cache reconciles it.
func (p Plan) Result(version int) (res Result, backoff bool) {
	switch p.Outcome {
	case OutcomeWait:
		return WaitingResult(p.Reason, p.Message), true
	case OutcomeNewer:
		return WaitingResult(p.Reason, p.Message), false
	case OutcomeStop:
		return StalledResult(p.Reason, p.Message), false
	}
	return ReadyResult(fmt.Sprintf("the path holds what is declared (KV version %d)", version)), false
}

// ObserveOnlyResult is what observe-only mode reports of the plan: what a
// real run would do. A plan that waits or stops keeps a real run's Ready,
// Reconciling and Stalled, so Argo CD and kstatus read it as they would a
// real run's. When it still writes some keys (a stall on one key does not
// freeze the path), Drifted is True and says what, then why the rest waits,
// and the planned changes count them (the migration's Shadow step sees
// them); when it writes nothing, Drifted is Unknown with its reason and the
// plan is not shown (observe-only never reports a stale plan).
func (p Plan) ObserveOnlyResult(version int) (res Result, backoff, shown bool) {
	if p.Outcome != OutcomeApply {
		res, backoff = p.Result(version)
		if !p.Empty() {
			yes := true
			res.Drifted, res.DriftMessage = &yes, heldSummary(p)
		}
		return res, backoff, !p.Empty()
	}
	if p.Empty() {
		no := false
		res = ReadyResult(fmt.Sprintf("the path holds what is declared (KV version %d)", version))
		res.Drifted = &no
		return res, false, true
	}
	yes := true
	summary := p.SummaryMessage()
	return Result{Reason: ohmlabv1alpha1.ReasonObserveOnly, Message: summary.WithHead("observe-only: a real run would make "),
		Drifted: &yes, DriftMessage: summary, Finished: true}, false, true
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
	return p.Message.WithHead(fmt.Sprintf("%s; %s: %s: ", p.Summary(), rest, p.Reason))
}

// BackendResult reports an error of Vault: refused (Forbidden), not
// answering (BackendUnavailable) or another error (BackendError), each a
// wait retried with backoff.
func BackendResult(err error) Result {
	reason := ohmlabv1alpha1.ReasonBackendError
	switch {
	case errors.Is(err, vaultkv.ErrForbidden):
		reason = ohmlabv1alpha1.ReasonForbidden
	case errors.Is(err, vaultkv.ErrUnavailable):
		reason = ohmlabv1alpha1.ReasonBackendUnavailable
	}
	return WaitingResult(reason, Text(err.Error()))
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
	return List("", lines, "; ", "; fix the object's spec and apply it (ohmlab validate finds this before merge); until then nothing is written to the path")
}
