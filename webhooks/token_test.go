package webhooks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

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

// TestAStoredTokenVaultRefusesRatchets is the upgrade of docs/users/upgrading.md,
// "A rotation token Vault refuses", on a real API server: objects stored
// under the released CRD with such tokens keep their other writes under
// today's CRD (a label, a finalizer, the status), since CRD validation
// ratcheting admits an unchanged invalid value, while a new bad token is
// refused and a good one admitted.
func TestAStoredTokenVaultRefusesRatchets(t *testing.T) {
	ctx := context.Background()
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	if err := cp.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	crdSpec := func(dir string) apiextensionsv1.CustomResourceDefinitionSpec {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(harness.RepoRoot(), dir, "ohmlab.fr_vaultseeds.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatal(err)
		}
		return crd.Spec
	}
	tab := seed("probe", "ohmlab/platforms/p/core/probe", `{"k":"<random:8>"}`)
	tab.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "2026-11-29\tx"}
	// install serves spec's schema, and waits until the API server judges a
	// tab in a token as that schema does.
	install := func(spec apiextensionsv1.CustomResourceDefinitionSpec, refusesTab bool) {
		t.Helper()
		var crd apiextensionsv1.CustomResourceDefinition
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: "vaultseeds.ohmlab.fr"}, &crd); err != nil {
			t.Fatal(err)
		}
		crd.Spec = spec
		if err := cp.Client.Update(ctx, &crd); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := cp.Client.Create(ctx, tab.DeepCopy(), client.DryRunAll)
			return (err != nil) == refusesTab, nil
		})
		if err != nil {
			t.Fatalf("the API server never served the CRD (a tab refused: %v): %v", refusesTab, err)
		}
	}

	install(crdSpec("config/crd/released"), false)
	stored := map[string]string{"tab": "2026-11-29\trotate", "newline": "2026-11-29\n", "513 bytes": strings.Repeat("€", 171)}
	for name, token := range stored {
		obj := seed(strings.ReplaceAll(name, " ", "-"), "ohmlab/platforms/p/core/"+strings.ReplaceAll(name, " ", "-"), `{"k":"<random:8>"}`)
		obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: token}
		if err := cp.Client.Create(ctx, obj); err != nil {
			t.Fatalf("the released CRD refused the token with a %s: %v", name, err)
		}
	}
	install(crdSpec("config/crd/bases"), true)

	for name := range stored {
		t.Run(name, func(t *testing.T) {
			key := client.ObjectKey{Namespace: ns, Name: strings.ReplaceAll(name, " ", "-")}
			update := func(what string, change func(*ohmlabv1alpha1.VaultSeed), status bool) error {
				t.Helper()
				var obj ohmlabv1alpha1.VaultSeed
				if err := cp.Client.Get(ctx, key, &obj); err != nil {
					t.Fatal(err)
				}
				change(&obj)
				if status {
					return cp.Client.Status().Update(ctx, &obj)
				}
				return cp.Client.Update(ctx, &obj)
			}
			for _, w := range []struct {
				what   string
				change func(*ohmlabv1alpha1.VaultSeed)
				status bool
			}{
				{"a label", func(o *ohmlabv1alpha1.VaultSeed) { o.Labels = map[string]string{"team": "core"} }, false},
				{"a finalizer", func(o *ohmlabv1alpha1.VaultSeed) { o.Finalizers = []string{ohmlabv1alpha1.Finalizer} }, false},
				{"the status", func(o *ohmlabv1alpha1.VaultSeed) {
					o.Status.ObservedGeneration = o.Generation
					o.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: ohmlabv1alpha1.ReasonInvalidRotation,
						Message: "spec.rotate.token " + templating.TokenPrintableMessage, LastTransitionTime: metav1.Now()}}
				}, true},
				{"the finalizer removed", func(o *ohmlabv1alpha1.VaultSeed) { o.Finalizers = nil }, false},
			} {
				if err := update(w.what, w.change, w.status); err != nil {
					t.Errorf("%s on an object stored with the old token: %v", w.what, err)
				}
			}
			err := update("another bad token", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Rotate.Token = "2026-11-30\t" }, false)
			if !contains(fieldMessages(err, "spec.rotate.token"), templating.TokenPrintableMessage) {
				t.Errorf("a new token with a tab: %v; want it refused with %q", err, templating.TokenPrintableMessage)
			}
			if err := update("a good token", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Rotate.Token = "2026-11-30" }, false); err != nil {
				t.Errorf("a good token: %v", err)
			}
		})
	}
}
