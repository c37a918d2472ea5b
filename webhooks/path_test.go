package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ohmlab/ohmlab-controller/internal/validate/validatetest"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/webhooks"
)

// TestPathSpellings judges each spelling of validatetest.PathCases with the
// CRD's validation (a server-side dry-run create on a real API server,
// without the webhook) and with the webhook, as spec.path and as the path
// of a <ref:>; both must give templating's verdict and, for a refused
// path, the one message templating.PathMessage. cmd/ohmlab's
// TestPathSpellings does the same for `ohmlab validate`.
func TestPathSpellings(t *testing.T) {
	ctx := context.Background()
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	if err := cp.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	wh := webhooks.NewWebhook(newScheme(t), cache(t, nil, nil), []string{ns})
	// webhook returns the webhook's verdict on obj: "" when admitted, else
	// its message.
	webhook := func(t *testing.T, data, path string) string {
		t.Helper()
		resp := wh.Handle(ctx, request(t, admissionv1.Create, "", seed("a", path, data), nil))
		if resp.Allowed {
			return ""
		}
		return resp.Result.Message
	}
	for i, tc := range validatetest.PathCases {
		t.Run(tc.Name, func(t *testing.T) {
			if got := templating.ValidPath(tc.Path); got != tc.Valid {
				t.Fatalf("templating.ValidPath(%q) = %v, the table says %v", tc.Path, got, tc.Valid)
			}

			// The CRD, on the real API server.
			obj := seed(fmt.Sprintf("p%d", i), tc.Path, `{"k":"v"}`)
			err := cp.Client.Create(ctx, obj, client.DryRunAll)
			if tc.Valid {
				if err != nil {
					t.Errorf("CRD refused a valid path: %v", err)
				}
			} else if msgs := fieldMessages(err, "spec.path"); !contains(msgs, templating.PathMessage) {
				t.Errorf("CRD: %v; want spec.path refused with %q", err, templating.PathMessage)
			}

			// The webhook, as spec.path.
			want := ""
			if !tc.Valid {
				want = `VaultSeed.ohmlab.fr "a" is invalid: spec.path: Invalid value: ` + templating.PathMessage
			}
			if got := webhook(t, `{"k":"v"}`, tc.Path); got != want {
				t.Errorf("webhook on spec.path: %q, want %q", got, want)
			}

			// The webhook, as the path of a reference.
			if !tc.InRef() {
				return
			}
			want = ""
			if !tc.Valid {
				want = `VaultSeed.ohmlab.fr "a" is invalid: k: Invalid value: ` + validatetest.RefPathMessage(tc.Path)
			}
			if got := webhook(t, `{"k":"<ref:`+jsonString(tc.Path)+`#k>"}`, "ohmlab/platforms/p/core/self"); got != want {
				t.Errorf("webhook on a <ref:>: %q, want %q", got, want)
			}
		})
	}
}

// fieldMessages returns the messages of the causes of an API error that are
// about field.
func fieldMessages(err error, field string) []string {
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Details == nil {
		return nil
	}
	var out []string
	for _, c := range se.ErrStatus.Details.Causes {
		if c.Field == field {
			out = append(out, c.Message)
		}
	}
	return out
}

func contains(msgs []string, want string) bool {
	for _, m := range msgs {
		if m == want || strings.HasSuffix(m, ": "+want) {
			return true
		}
	}
	return false
}

// jsonString escapes s for the inside of a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
