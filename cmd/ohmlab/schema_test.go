package main

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// TestSchemaIsCheckedAsTheAPIServerDoes: each object a real kube-apiserver
// refuses for the CRD's schema, list types or CEL rules (a server-side
// dry-run create, without the webhook), `ohmlab validate` refuses on the
// same field paths. Where the webhook's verdict names the field already,
// its words stand; elsewhere the message is the API server's.
func TestSchemaIsCheckedAsTheAPIServerDoes(t *testing.T) {
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	ctx := context.Background()
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vo"}}); err != nil {
		t.Fatal(err)
	}
	const refuses = ": kubectl apply refuses it"
	long := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name string
		spec string
		// fields are the field paths the API server refuses.
		fields []string
	}{
		{name: "valid", spec: "{path: ohmlab/a, data: {k: <random:8>}, rotate: {token: t1, keys: [k]}}"},
		{name: "a token of 300 characters", spec: "{path: ohmlab/a, data: {k: <random:8>}, rotate: {token: " + long(300) + "}}",
			fields: []string{"spec.rotate.token"}},
		{name: "a key listed twice in rotate.keys, a set", spec: "{path: ohmlab/a, data: {k: <random:8>, l: <uuid>}, rotate: {token: t1, keys: [k, l, k]}}",
			fields: []string{"spec.rotate.keys[2]"}},
		{name: "an empty token", spec: "{path: ohmlab/a, data: {k: <random:8>}, rotate: {token: \"\"}}",
			fields: []string{"spec.rotate.token"}},
		{name: "a rotate block without a token or a period", spec: "{path: ohmlab/a, data: {k: <random:8>}, rotate: {keys: [k]}}",
			fields: []string{"spec.rotate"}},
		{name: "a token with a tab", spec: "{path: ohmlab/a, data: {k: <random:8>}, rotate: {token: \"a\\tb\"}}",
			fields: []string{"spec.rotate.token"}},
		{name: "a token of 300 characters with a newline", spec: "{path: ohmlab/a, data: {k: <random:8>}, rotate: {token: \"" + long(300) + "\\n\"}}",
			fields: []string{"spec.rotate.token"}},
		{name: "a deletionPolicy of another kind", spec: "{path: ohmlab/a, deletionPolicy: Orphan}",
			fields: []string{"spec.deletionPolicy"}},
		{name: "a path of one segment", spec: "{path: ohmlab}", fields: []string{"spec.path"}},
		{name: "a path over maxLength", spec: "{path: ohmlab/" + long(4096) + "}", fields: []string{"spec.path"}},
		{name: "no path", spec: "{data: {k: v}}", fields: []string{"spec.path"}},
		{name: "no spec", spec: "", fields: []string{"spec"}},
		{name: "prune not a boolean", spec: "{path: ohmlab/a, prune: \"yes\"}", fields: []string{"spec.prune"}},
		{name: "a key of rotate.keys not a string", spec: "{path: ohmlab/a, data: {k: <random:8>}, rotate: {token: t1, keys: [1]}}",
			fields: []string{"spec.rotate.keys[0]"}},
		// The too long token blocks the CEL rules, the path's among them:
		// the API server refuses the path once the rest is fixed, and
		// ohmlab validate at once, in the webhook's words.
		{name: "several at once", spec: "{path: ohmlab, deletionPolicy: Keep, data: {k: <random:8>}, rotate: {token: " + long(257) + ", keys: [k, k]}}",
			fields: []string{"spec.deletionPolicy", "spec.rotate.keys[1]", "spec.rotate.token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata: {name: a, namespace: vo}\n"
			if tt.spec != "" {
				doc += "spec: " + tt.spec + "\n"
			}

			// The API server.
			j, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(j); err != nil {
				t.Fatal(err)
			}
			err = cp.Client.Create(ctx, u, client.DryRunAll)
			server := map[string][]string{}
			if status, ok := err.(apierrors.APIStatus); ok && apierrors.IsInvalid(err) {
				for _, c := range status.Status().Details.Causes {
					if c.Field == "<nil>" {
						continue // "some validation rules were not checked": a note, no field
					}
					server[c.Field] = append(server[c.Field], c.Message)
				}
			} else if err != nil {
				t.Fatalf("the API server's answer: %v", err)
			}
			if diff := cmp.Diff(tt.fields, slices.Sorted(maps.Keys(server))); diff != "" {
				t.Fatalf("the API server refused (-table +got):\n%s\n%v", diff, err)
			}

			// ohmlab validate.
			got := runCLI(t, doc, "validate", "--output", "json", "-")
			var rep report
			if err := json.Unmarshal([]byte(got.Stdout), &rep); err != nil {
				t.Fatalf("exit code %d, stdout is not JSON: %v\n%s%s", got.Code, err, got.Stdout, got.Stderr)
			}
			if wantCode := map[bool]int{true: exitInvalid, false: exitValid}[len(tt.fields) > 0]; got.Code != wantCode {
				t.Errorf("exit code %d, want %d: %+v", got.Code, wantCode, rep.Problems)
			}
			cli := map[string]bool{}
			for _, p := range rep.Problems {
				cli[p.Key] = true
				// A problem in the API server's words is one of its causes.
				if msg, ok := strings.CutSuffix(p.Message, refuses); ok && server[p.Key] != nil && !slices.Contains(server[p.Key], msg) {
					t.Errorf("ohmlab validate: %s: %s; the API server: %q", p.Key, msg, server[p.Key])
				}
			}
			for _, f := range tt.fields {
				if !cli[f] {
					t.Errorf("ohmlab validate does not refuse %s; its problems: %+v", f, rep.Problems)
				}
			}
		})
	}
}
