package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
	"github.com/ohmlab/ohmlab-controller/webhooks"
)

const ns = "vault-operator-system"

func newScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := ohmlabv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// cache returns a fake cache holding objs, with seeds' indexes. Every List
// it answers appends its field selector to listed; listErr fails them all.
func cache(t testing.TB, listed *[]string, listErr error, objs ...*ohmlabv1alpha1.VaultSeed) client.Reader {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(newScheme(t))
	for _, o := range objs {
		b.WithObjects(o.DeepCopy())
	}
	for field, fn := range seedindex.Indexes {
		b.WithIndex(&ohmlabv1alpha1.VaultSeed{}, field, fn)
	}
	b.WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		lo := (&client.ListOptions{}).ApplyOptions(opts)
		if listed != nil && lo.FieldSelector != nil {
			*listed = append(*listed, lo.FieldSelector.String())
		}
		if listErr != nil {
			return listErr
		}
		return c.List(ctx, list, opts...)
	}})
	return b.Build()
}

func seed(name, path, data string) *ohmlabv1alpha1.VaultSeed {
	s := &ohmlabv1alpha1.VaultSeed{
		TypeMeta:   metav1.TypeMeta{APIVersion: ohmlabv1alpha1.GroupVersion.String(), Kind: "VaultSeed"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: path, DeletionPolicy: ohmlabv1alpha1.DeletionPolicyRetain},
	}
	if data != "" {
		s.Spec.Data = &apiextensionsv1.JSON{Raw: []byte(data)}
	}
	return s
}

func raw(t testing.TB, o *ohmlabv1alpha1.VaultSeed) runtime.RawExtension {
	t.Helper()
	if o == nil {
		return runtime.RawExtension{}
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

func request(t testing.TB, op admissionv1.Operation, subResource string, obj, old *ohmlabv1alpha1.VaultSeed) admission.Request {
	t.Helper()
	o := obj
	if o == nil {
		o = old
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:         "1",
		Operation:   op,
		SubResource: subResource,
		Namespace:   o.Namespace,
		Name:        o.Name,
		Object:      raw(t, obj),
		OldObject:   raw(t, old),
	}}
}

func TestValidator(t *testing.T) {
	const secret = "s3cr3t-typed-by-hand"
	invalid := seed("bad", "ohmlab/bad", `{"a.b":"`+secret+`","t":"<random:0>"}`)
	// The API's Invalid status: the object named, each key a cause.
	const invalidMessage = `VaultSeed.ohmlab.fr "bad" is invalid: [a.b: Invalid value: key name "a.b" contains a dot: nest maps instead, t: Invalid value: <random:N> needs a decimal length N from 1 to 4096, found "<random:0>"]`
	deleting := invalid.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	released := deleting.DeepCopy()
	deleting.Finalizers = []string{ohmlabv1alpha1.Finalizer}
	labelled := invalid.DeepCopy()
	labelled.Labels = map[string]string{"team": "core"}
	pruned := invalid.DeepCopy()
	pruned.Spec.Prune = true
	elsewhere := invalid.DeepCopy()
	elsewhere.Namespace = "elsewhere"
	moved := seed("a", "ohmlab/moved", "")
	longer := seed("a", "ohmlab/a", `{"p":"<random:32>"}`)
	withRotate := seed("r", "ohmlab/r", `{"p":"`+secret+`"}`)
	withRotate.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "1"}

	tests := []struct {
		name         string
		op           admissionv1.Operation
		subResource  string
		obj, old     *ohmlabv1alpha1.VaultSeed
		cached       []*ohmlabv1alpha1.VaultSeed
		listErr      error
		wantAllowed  bool
		wantCode     int32
		wantMessage  string
		wantWarnings []string
	}{
		{name: "a valid object is admitted", op: admissionv1.Create,
			obj: seed("a", "ohmlab/a", `{"p":"<random:24>","h":"<bcrypt:p>"}`), wantAllowed: true, wantCode: http.StatusOK},
		{name: "an invalid object is refused with every problem", op: admissionv1.Create,
			obj: invalid, wantCode: http.StatusUnprocessableEntity, wantMessage: invalidMessage},
		{name: "a second object on one path is refused", op: admissionv1.Create,
			obj: seed("b", "ohmlab/a", ""), cached: []*ohmlabv1alpha1.VaultSeed{seed("a", "ohmlab/a", "")},
			wantCode: http.StatusUnprocessableEntity, wantMessage: `VaultSeed.ohmlab.fr "b" is invalid: spec.path: Invalid value: path ohmlab/a is also declared by vault-operator-system/a`},
		{name: "an object closing a reference ring is refused", op: admissionv1.Create,
			obj: seed("c", "ohmlab/c", `{"k":"<ref:ohmlab/a#k>"}`),
			cached: []*ohmlabv1alpha1.VaultSeed{
				seed("a", "ohmlab/a", `{"k":"<ref:ohmlab/b#k>"}`),
				seed("b", "ohmlab/b", `{"k":"<ref:ohmlab/c#k>"}`),
			},
			wantCode: http.StatusUnprocessableEntity, wantMessage: `VaultSeed.ohmlab.fr "c" is invalid: k: Invalid value: reference cycle: ohmlab/a -> ohmlab/b -> ohmlab/c -> ohmlab/a`},
		{name: "a legal but surprising spec is admitted with a warning", op: admissionv1.Create,
			obj: withRotate, wantAllowed: true, wantCode: http.StatusOK,
			wantWarnings: []string{"spec.rotate: rotate has no keys and data declares no generated key (<random:N>, <hex:N>, <password:N>, <vault-password:policy>, <uuid>, <age:secret>, <ssh:private>): a new token regenerates nothing"}},
		{name: "a change of spec.path is refused", op: admissionv1.Update,
			obj: moved, old: seed("a", "ohmlab/a", ""), cached: []*ohmlabv1alpha1.VaultSeed{seed("a", "ohmlab/a", "")},
			wantCode:    http.StatusUnprocessableEntity,
			wantMessage: `VaultSeed.ohmlab.fr "a" is invalid: spec.path: Invalid value: changed from ohmlab/a to ohmlab/moved: spec.path is immutable, delete the object and create another`},
		{name: "an update is not a duplicate of its cached self, and warns about a value the controller keeps", op: admissionv1.Update,
			obj: longer, old: seed("a", "ohmlab/a", `{"p":"<random:24>"}`), cached: []*ohmlabv1alpha1.VaultSeed{seed("a", "ohmlab/a", `{"p":"<random:24>"}`)},
			wantAllowed: true, wantCode: http.StatusOK,
			wantWarnings: []string{"p: now declared as <random:32>, but the controller seeds once and keeps the value already on the path: list the key in rotate.keys and change rotate.token to regenerate it"}},
		{name: "a spec update of an invalid object is refused", op: admissionv1.Update,
			obj: pruned, old: invalid, cached: []*ohmlabv1alpha1.VaultSeed{invalid},
			wantCode: http.StatusUnprocessableEntity, wantMessage: invalidMessage},
		{name: "a metadata-only update of an invalid object passes", op: admissionv1.Update,
			obj: labelled, old: invalid, cached: []*ohmlabv1alpha1.VaultSeed{invalid}, wantAllowed: true, wantCode: http.StatusOK},
		{name: "a status update of an invalid object passes", op: admissionv1.Update, subResource: "status",
			obj: pruned, old: invalid, wantAllowed: true, wantCode: http.StatusOK},
		{name: "removing the finalizer of an invalid object being deleted passes", op: admissionv1.Update,
			obj: released, old: deleting, wantAllowed: true, wantCode: http.StatusOK},
		{name: "a deletion passes", op: admissionv1.Delete,
			old: invalid, wantAllowed: true, wantCode: http.StatusOK},
		{name: "an object outside the watched namespaces is not analysed", op: admissionv1.Create,
			obj: elsewhere, listErr: errors.New("must not list"), wantAllowed: true, wantCode: http.StatusOK},
		{name: "a related object whose data cannot be decoded is an error naming it, not an admission", op: admissionv1.Create,
			obj: seed("c", "ohmlab/c", `{"k":"<ref:ohmlab/b#k>"}`), cached: []*ohmlabv1alpha1.VaultSeed{seed("b", "ohmlab/b", `["<ref:ohmlab/c#k>"]`)},
			wantCode:    http.StatusInternalServerError,
			wantMessage: "Internal error occurred: analysing the VaultSeeds related to vault-operator-system/c: vault-operator-system/b: spec.data is not a JSON object"},
		{name: "a template with white space around it is admitted with a warning", op: admissionv1.Create,
			obj: seed("a", "ohmlab/a", `{"k":"<random:8> "}`), wantAllowed: true, wantCode: http.StatusOK,
			wantWarnings: []string{"k: is plain text, not the template <random:8>: with the white space around it the controller writes the text as it is; remove the white space to generate the value"}},
		{name: "a cache that cannot be read is an error, not an admission", op: admissionv1.Create,
			obj: seed("a", "ohmlab/a", ""), listErr: errors.New("cache down"),
			wantCode: http.StatusInternalServerError, wantMessage: "Internal error occurred: listing the VaultSeeds on ohmlab/a: cache down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh := webhooks.NewWebhook(newScheme(t), cache(t, nil, tt.listErr, tt.cached...), []string{ns})
			resp := wh.Handle(context.Background(), request(t, tt.op, tt.subResource, tt.obj, tt.old))
			got := struct {
				Allowed  bool
				Code     int32
				Message  string
				Warnings []string
			}{resp.Allowed, resp.Result.Code, resp.Result.Message, resp.Warnings}
			want := got
			want.Allowed, want.Code, want.Message, want.Warnings = tt.wantAllowed, tt.wantCode, tt.wantMessage, tt.wantWarnings
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			if strings.Contains(got.Message, secret) || strings.Contains(strings.Join(got.Warnings, "\n"), secret) {
				t.Errorf("the response holds a value: %+v", got)
			}
		})
	}
}

// TestValidatorReadsOnlyRelatedPaths proves the validator lists the objects
// on its own path and on the paths reachable through references, through
// the index, and nothing else of the cache.
func TestValidatorReadsOnlyRelatedPaths(t *testing.T) {
	var listed []string
	c := cache(t, &listed, nil,
		seed("a", "ohmlab/a", `{"k":"<ref:ohmlab/b#k>","self":"<ref:ohmlab/a#k>"}`),
		seed("b", "ohmlab/b", `{"k":"<ref:ohmlab/c#k>"}`),
		seed("c", "ohmlab/c", `{"k":"<random:8>"}`),
		seed("d", "ohmlab/d", `{"k":"<ref:ohmlab/x#k>"}`),
		seed("e", "ohmlab/e", `{"k":"<ref:ohmlab/a#k>"}`),
	)
	wh := webhooks.NewWebhook(newScheme(t), c, []string{ns})
	resp := wh.Handle(context.Background(), request(t, admissionv1.Create, "", seed("x", "ohmlab/x", `{"k":"<ref:ohmlab/a#k>","l":"<ref:ohmlab/c#k>"}`), nil))
	if !resp.Allowed {
		t.Fatalf("refused: %s", resp.Result.Message)
	}
	want := []string{"spec.path=ohmlab/x", "spec.path=ohmlab/a", "spec.path=ohmlab/c", "spec.path=ohmlab/b"}
	if diff := cmp.Diff(want, listed); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
}

func TestSetupWithManager(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	tests := []struct {
		name    string
		scheme  *runtime.Scheme
		wantErr string
	}{
		{name: "registers the validator at Path", scheme: newScheme(t)},
		{name: "refuses a scheme without VaultSeed", scheme: runtime.NewScheme(),
			wantErr: "registering the VaultSeed webhook: the manager's scheme does not hold ohmlab.fr/v1alpha1, Kind=VaultSeed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: tt.scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
			if err != nil {
				t.Fatal(err)
			}
			err = webhooks.SetupWithManager(mgr, []string{ns})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, pattern := mgr.GetWebhookServer().WebhookMux().Handler(httptest.NewRequest(http.MethodPost, webhooks.Path, nil))
			if pattern != webhooks.Path {
				t.Errorf("%s is served by pattern %q", webhooks.Path, pattern)
			}
		})
	}
}
