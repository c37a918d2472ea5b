package webhooks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/validate/validatetest"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/webhooks"
)

// TestPeriodSpellings judges each spelling of validatetest.PeriodCases
// with the CRD's rule (a server-side dry-run create on a real API server,
// without the webhook) and with the webhook: both take what
// templating.ParsePeriod takes and refuse the rest with its message, on
// spec.rotate.every. A rotate block with a period and no token is
// admitted; one with neither is refused by both.
func TestPeriodSpellings(t *testing.T) {
	ctx := context.Background()
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	if err := cp.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	wh := webhooks.NewWebhook(newScheme(t), cache(t, nil, nil), []string{ns})
	for i, tc := range validatetest.PeriodCases {
		t.Run(tc.Name, func(t *testing.T) {
			obj := seed(fmt.Sprintf("e%d", i), "ohmlab/platforms/p/core/e", `{"k":"<random:8>"}`)
			obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Every: tc.Every}

			err := cp.Client.Create(ctx, obj.DeepCopy(), client.DryRunAll)
			msgs := fieldMessages(err, "spec.rotate.every")
			switch {
			case tc.Period != 0 && err != nil:
				t.Errorf("CRD refused %q: %v", tc.Every, err)
			case tc.Period == 0 && (len(msgs) != 1 || !strings.HasSuffix(msgs[0], `": `+templating.PeriodMessage)):
				t.Errorf("CRD on spec.rotate.every: %q, want one message ending in %q (error: %v)", msgs, templating.PeriodMessage, err)
			}

			want := ""
			if tc.Period == 0 {
				want = fmt.Sprintf(`VaultSeed.ohmlab.fr %q is invalid: spec.rotate.every: Invalid value: %s`, obj.Name, templating.PeriodMessage)
			}
			resp := wh.Handle(ctx, request(t, admissionv1.Create, "", obj, nil))
			got := ""
			if !resp.Allowed {
				got = resp.Result.Message
			}
			if got != want {
				t.Errorf("webhook: %q\nwant %q", got, want)
			}
		})
	}
	t.Run("neither a token nor a period", func(t *testing.T) {
		obj := seed("e-none", "ohmlab/platforms/p/core/e", `{"k":"<random:8>"}`)
		obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Keys: []string{"k"}}
		err := cp.Client.Create(ctx, obj.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "spec.rotate: Invalid value: "+templating.RotateMessage) {
			t.Errorf("CRD: %v, want the rule's refusal", err)
		}
		want := fmt.Sprintf(`VaultSeed.ohmlab.fr %q is invalid: spec.rotate: Invalid value: %s`, obj.Name, templating.RotateMessage)
		if resp := wh.Handle(ctx, request(t, admissionv1.Create, "", obj, nil)); resp.Allowed || resp.Result.Message != want {
			t.Errorf("webhook: allowed %v, %q\nwant %q", resp.Allowed, resp.Result.Message, want)
		}
	})
}
