package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// TestMetadataIsCheckedAsTheAPIServerDoes: `ohmlab validate` refuses the
// metadata a real kube-apiserver refuses when the VaultSeed is created, with
// the API server's words, and admits what it admits.
func TestMetadataIsCheckedAsTheAPIServerDoes(t *testing.T) {
	cp := harness.ControlPlaneForTest(t, harness.Options{})
	ctx := context.Background()
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vo"}}); err != nil {
		t.Fatal(err)
	}
	const refuses = ": kubectl apply refuses it"
	tests := []struct {
		name     string
		metadata string
		refused  bool
	}{
		{name: "a DNS subdomain in a namespace", metadata: "{name: db.main-1, namespace: vo, labels: {app.kubernetes.io/name: db}, annotations: {note: any text at all}}"},
		{name: "a negative generation, which the API server replaces", metadata: "{name: a, namespace: vo, generation: -1}"},
		{name: "two controller owners", metadata: "{name: a, namespace: vo, ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: \"c\\u202ex\", uid: \"1\", controller: true}, {apiVersion: v1, kind: ConfigMap, name: d, uid: \"2\", controller: true}]}", refused: true},
		{name: "an upper-case name", metadata: "{name: Db, namespace: vo}", refused: true},
		{name: "an underscore", metadata: "{name: a_b, namespace: vo}", refused: true},
		{name: "a bidirectional override", metadata: "{name: \"a\\u202eb\", namespace: vo}", refused: true},
		{name: "a zero-width space", metadata: "{name: \"a\\u200bb\", namespace: vo}", refused: true},
		{name: "a name over 253 characters", metadata: "{name: " + strings.Repeat("a", 254) + ", namespace: vo}", refused: true},
		{name: "a namespace that is not a DNS label", metadata: "{name: a, namespace: vo.x}", refused: true},
		{name: "a label value with a space", metadata: "{name: a, namespace: vo, labels: {tier: front end}}", refused: true},
		{name: "an annotation key with a space", metadata: "{name: a, namespace: vo, annotations: {bad key: x}}", refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata: " + tt.metadata + "\nspec: {path: ohmlab/x}\n"

			got := runCLI(t, doc, "validate", "--output", "json", "-")
			var rep report
			if err := json.Unmarshal([]byte(got.Stdout), &rep); err != nil {
				t.Fatalf("exit code %d, stdout is not JSON: %v\n%s%s", got.Code, err, got.Stdout, got.Stderr)
			}
			var cli []string
			for _, f := range rep.Problems {
				msg, ok := strings.CutSuffix(f.Message, refuses)
				if !ok {
					t.Errorf("problem %q does not end with %q", f.Problem, refuses)
				}
				cli = append(cli, f.Key+": "+msg)
			}

			seed := &ohmlabv1alpha1.VaultSeed{}
			if err := yaml.Unmarshal([]byte(doc), seed); err != nil {
				t.Fatal(err)
			}
			err := cp.Client.Create(ctx, seed, client.DryRunAll)
			var server []string
			if status, ok := err.(apierrors.APIStatus); ok && apierrors.IsInvalid(err) {
				for _, c := range status.Status().Details.Causes {
					server = append(server, c.Field+": "+c.Message)
				}
			}
			switch {
			case (err != nil) != tt.refused:
				t.Fatalf("the API server's answer: %v, want refused: %v", err, tt.refused)
			case (len(cli) > 0) != tt.refused:
				t.Fatalf("ohmlab validate's problems: %q, want some: %v", cli, tt.refused)
			case server == nil && tt.refused:
				// Refused before validation (a namespace that cannot
				// exist): the CLI names the field, the server the namespace.
				if !strings.Contains(cli[0], "metadata.namespace") {
					t.Errorf("ohmlab validate's problems %q, the API server refused: %v", cli, err)
				}
			default:
				if diff := cmp.Diff(server, cli); diff != "" {
					t.Errorf("problems (-API server +ohmlab validate):\n%s", diff)
				}
			}
		})
	}
}
