package webhooks_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/validate/validatetest"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/webhooks"
)

// TestTokenSpellings judges each token of validatetest.TokenCases with the
// CRD's validation (a server-side dry-run create on a real API server,
// without the webhook) and with the webhook: both must give
// templating.TokenProblem's verdict, in its messages, on
// spec.rotate.token. Vault refuses these tokens in custom_metadata
// (vaultkv's TestIntegrationFakeRefusesWhatVaultRefuses), so an object
// holding one could never be created, adopted or rotated. cmd/ohmlab's
// TestTokenSpellings does the same for `ohmlab validate`.
func TestTokenSpellings(t *testing.T) {
	ctx := context.Background()
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	if err := cp.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	wh := webhooks.NewWebhook(newScheme(t), cache(t, nil, nil), []string{ns})
	for i, tc := range validatetest.TokenCases {
		t.Run(tc.Name, func(t *testing.T) {
			if diff := cmp.Diff(tc.Messages, templating.TokenProblem(tc.Token)); diff != "" {
				t.Fatalf("templating.TokenProblem (-table +got):\n%s", diff)
			}
			obj := seed(fmt.Sprintf("t%d", i), "ohmlab/platforms/p/core/t", `{"k":"<random:8>"}`)
			obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: tc.Token}

			// The CRD, on the real API server.
			err := cp.Client.Create(ctx, obj.DeepCopy(), client.DryRunAll)
			// The API server's message is `Invalid value: "<token>": <rule's message>`.
			var got []string
			for _, m := range fieldMessages(err, "spec.rotate.token") {
				i := slices.IndexFunc(tc.Messages, func(want string) bool { return strings.HasSuffix(m, `": `+want) })
				if i < 0 {
					t.Errorf("CRD: unexpected message on spec.rotate.token: %s", m)
					continue
				}
				got = append(got, tc.Messages[i])
			}
			slices.Sort(got)
			if len(tc.Messages) == 0 && err != nil {
				t.Errorf("CRD refused a token Vault records: %v", err)
			} else if diff := cmp.Diff(tc.Messages, got); diff != "" {
				t.Errorf("CRD on spec.rotate.token (-want +got):\n%s\nerror: %v", diff, err)
			}

			// The webhook.
			want := ""
			if len(tc.Messages) > 0 {
				var causes []string
				for _, m := range tc.Messages {
					causes = append(causes, "spec.rotate.token: Invalid value: "+m)
				}
				want = fmt.Sprintf(`VaultSeed.ohmlab.fr %q is invalid: `, obj.Name) + strings.Join(causes, ", ")
				if len(causes) > 1 {
					want = fmt.Sprintf(`VaultSeed.ohmlab.fr %q is invalid: [%s]`, obj.Name, strings.Join(causes, ", "))
				}
			}
			resp := wh.Handle(ctx, request(t, admissionv1.Create, "", obj, nil))
			gotMsg := ""
			if !resp.Allowed {
				gotMsg = resp.Result.Message
			}
			if gotMsg != want {
				t.Errorf("webhook: %q\nwant %q", gotMsg, want)
			}
		})
	}
}
