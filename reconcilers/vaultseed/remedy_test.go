package vaultseed

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv/fake"
)

// TestStalledMessagesSayWhatToDo: the message of each reason an object
// stalls with before it writes anything (product document, "Conditions":
// the reasons and what to do) says what the user can do, as the Stalled
// condition, its Warning event and `ohmlab plan` carry it. The stalls on
// one key of a path that is read are TestPlanHoldsBackOnlyKeysThatCannotBeComputed's.
func TestStalledMessagesSayWhatToDo(t *testing.T) {
	seed := func(name, data string) *ohmlabv1alpha1.VaultSeed {
		return &ohmlabv1alpha1.VaultSeed{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vo", Name: name},
			Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: "ohmlab/p/" + name, Data: &apiextensionsv1.JSON{Raw: []byte(data)}},
		}
	}
	rotation := seed("rotation", `{"password":"<random:8>"}`)
	rotation.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1", Keys: []string{"nope"}}
	// Stored before the CRD refused it: Vault refuses it in custom_metadata.
	tab := seed("tab", `{"password":"<random:8>"}`)
	tab.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "2026-11-29\n"}
	deleting := seed("deleting", `{"a":"<random:8>"}`)
	deleting.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	objs := []*ohmlabv1alpha1.VaultSeed{
		seed("dotted", `{"ok":"x","a.b":"<random:8>"}`),
		rotation,
		tab,
		seed("ring-a", `{"x":"<ref:ohmlab/p/ring-b#y>"}`),
		seed("ring-b", `{"y":"<ref:ohmlab/p/ring-a#x>"}`),
		deleting,
		seed("owned", `{"a":""}`),
		seed("deleted", `{"a":""}`),
	}
	ctx := context.Background()
	kv := fake.New()
	for _, p := range []string{"ohmlab/p/owned", "ohmlab/p/deleted"} {
		if _, err := kv.Write(ctx, p, map[string]any{"a": "typed-by-hand"}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Mark(ctx, "ohmlab/p/owned", map[string]string{ohmlabv1alpha1.OwnerMetadataKey: "elsewhere/other"}); err != nil {
		t.Fatal(err)
	}
	kv.SoftDelete("ohmlab/p/deleted")
	type stall struct{ Reason, Message string }
	want := map[string]stall{
		"dotted": {ohmlabv1alpha1.ReasonInvalidSpec, `a.b: key name "a.b" contains a dot: nest maps instead; ` +
			"fix the object's spec and apply it (ohmlab validate finds this before merge); until then nothing is written to the path"},
		"rotation": {ohmlabv1alpha1.ReasonInvalidRotation, `nope: rotate.keys names "nope", which data does not declare; ` +
			"fix the object's spec and apply it (ohmlab validate finds this before merge); until then nothing is written to the path"},
		"tab": {ohmlabv1alpha1.ReasonInvalidRotation, "spec.rotate.token " + templating.TokenPrintableMessage + "; " +
			"fix the object's spec and apply it (ohmlab validate finds this before merge); until then nothing is written to the path"},
		"ring-a": {ohmlabv1alpha1.ReasonRefCycle, "reference cycle: ohmlab/p/ring-a -> ohmlab/p/ring-b -> ohmlab/p/ring-a; " +
			"change or remove a <ref:> of one of these objects to break it; until then nothing is written to these paths"},
		"ring-b": {ohmlabv1alpha1.ReasonRefCycle, "reference cycle: ohmlab/p/ring-a -> ohmlab/p/ring-b -> ohmlab/p/ring-a; " +
			"change or remove a <ref:> of one of these objects to break it; until then nothing is written to these paths"},
		"deleting": {ohmlabv1alpha1.ReasonForbidden, "deletionPolicy Delete is not allowed: the controller's chart must set targets.vault.allowDelete: true " +
			"(and vault-operator ohmlab.controller.allowDelete: true, which grants the delete in Vault), or set deletionPolicy: Retain; " +
			"until then nothing is written to the path and the object has no finalizer"},
		"owned": {ohmlabv1alpha1.ReasonOwnedByAnother, "the path is owned by elsewhere/other (custom_metadata ohmlab.fr/owner): delete one of the two objects, " +
			"or hand the path over with: vault kv metadata patch -remove-custom-metadata=ohmlab.fr/owner ohmlab/p/owned"},
		"deleted": {ohmlabv1alpha1.ReasonPathDeleted, "the latest version (1) of the path is deleted: undelete it (vault kv undelete -versions=1 ohmlab/p/deleted), " +
			"or delete the path's metadata (vault kv metadata delete ohmlab/p/deleted) to have it created anew"},
	}
	previews, err := planner.PreviewSeeds(ctx, kv, analyseAll(objs), planner.PreviewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]stall{}
	for _, p := range previews {
		// An object that stops before Vault is read has no plan: Drifted
		// carries the Stalled condition's reason and message.
		if !p.Stalled || p.Drifted.Status != metav1.ConditionUnknown {
			t.Errorf("%s: not stalled: %+v", p.Name, p.Drifted)
		}
		got[p.Name] = stall{p.Drifted.Reason, p.Drifted.Message}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stall messages (-want +got):\n%s", diff)
	}
}
