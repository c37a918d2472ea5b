package webhooks_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/webhooks"
)

// TestDeleteWithoutAllowDeleteWarns: deletionPolicy Delete is admitted on
// every target, with a warning where the target does not allow it.
func TestDeleteWithoutAllowDeleteWarns(t *testing.T) {
	deleting := seed("a", "ohmlab/a", `{"k":"<random:8>"}`)
	deleting.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	retaining := seed("b", "ohmlab/b", `{"k":"<random:8>"}`)
	tests := []struct {
		name         string
		obj          *ohmlabv1alpha1.VaultSeed
		opts         []webhooks.Option
		wantWarnings []string
	}{
		{name: "Delete on a target without allowDelete", obj: deleting, wantWarnings: []string{
			"spec.deletionPolicy: Delete is not allowed by this controller (its chart leaves targets.vault.allowDelete false): the object will be Stalled with reason Forbidden and its path will never be deleted; set targets.vault.allowDelete: true in the controller's chart, or use deletionPolicy: Retain"}},
		{name: "Delete on a target with allowDelete", obj: deleting, opts: []webhooks.Option{webhooks.AllowDelete(true)}},
		{name: "Retain on a target without allowDelete", obj: retaining, opts: []webhooks.Option{webhooks.AllowDelete(false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh := webhooks.NewWebhook(newScheme(t), cache(t, nil, nil), []string{ns}, tt.opts...)
			resp := wh.Handle(context.Background(), request(t, admissionv1.Create, "", tt.obj, nil))
			if !resp.Allowed {
				t.Fatalf("refused: %s", resp.Result.Message)
			}
			if diff := cmp.Diff(tt.wantWarnings, []string(resp.Warnings)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}
