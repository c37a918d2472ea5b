package vaultseed

import (
	"fmt"
	"strings"
	"testing"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner"
)

// TestConditionsAndEventsAreCapped: the messages of 400 pending references
// are capped in every condition, ending with the count of the references
// left out, and in the Warning event's note.
func TestConditionsAndEventsAreCapped(t *testing.T) {
	var waiting []string
	for i := range 400 {
		waiting = append(waiting, fmt.Sprintf("ohmlab/platforms/production/core/source-%03d#password (path missing)", i))
	}
	p := planner.Plan{Outcome: planner.OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending, Message: planner.List("waiting for ", waiting, ", ", ""), Actions: []planner.Action{{Name: planner.ActionCreateField, Key: "b"}}}
	if n := len(p.Message.String()); n <= planner.MaxConditionMessage {
		t.Fatalf("the message is %d bytes: not over the bound", n)
	}
	for _, observeOnly := range []bool{false, true} {
		res, _ := p.Result(3)
		if observeOnly {
			res, _, _ = p.ObserveOnlyResult(3)
		}
		var st ohmlabv1alpha1.VaultSeedStatus
		res.Apply(&st, 1, observeOnly)
		for _, c := range st.Conditions {
			if len(c.Message) > planner.MaxConditionMessage || !strings.HasSuffix(c.Message, " more") {
				t.Errorf("observe-only %v: %s is %d bytes, ending %q", observeOnly, c.Type, len(c.Message), c.Message[max(0, len(c.Message)-30):])
			}
		}
		note := res.Message.Capped(planner.MaxEventNote)
		if len(note) > planner.MaxEventNote || !strings.HasPrefix(note, "waiting for ohmlab/") || !strings.HasSuffix(note, " more") {
			t.Errorf("observe-only %v: the event's note is %d bytes: %q", observeOnly, len(note), note)
		}
	}
}
