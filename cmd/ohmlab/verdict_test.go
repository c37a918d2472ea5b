package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
	"github.com/ohmlab/ohmlab-controller/webhooks"
)

// verdict is what a user learns about one object, from either path: its
// problems as "<key>: <message>", and its warnings.
type verdict struct {
	Allowed  bool
	Problems []string
	Warnings []string
}

// webhookVerdict asks the admission handler about obj, created while the
// manager's cache holds existing.
func webhookVerdict(t *testing.T, existing []string, obj string) verdict {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := ohmlabv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, doc := range existing {
		s := &ohmlabv1alpha1.VaultSeed{}
		if err := yaml.Unmarshal([]byte(doc), s); err != nil {
			t.Fatal(err)
		}
		b.WithObjects(s)
	}
	for field, fn := range seedindex.Indexes {
		b.WithIndex(&ohmlabv1alpha1.VaultSeed{}, field, fn)
	}
	j, err := yaml.YAMLToJSON([]byte(obj))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Metadata struct{ Namespace, Name string }
	}
	if err := json.Unmarshal(j, &meta); err != nil {
		t.Fatal(err)
	}
	wh := webhooks.NewWebhook(scheme, b.Build(), []string{"vo"})
	resp := wh.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Create, Namespace: meta.Metadata.Namespace, Name: meta.Metadata.Name,
		Object: runtime.RawExtension{Raw: j},
	}})
	v := verdict{Allowed: resp.Allowed, Warnings: resp.Warnings}
	if !resp.Allowed {
		// The API's Invalid status: one cause per problem, its key the
		// field, its message the error type then the problem.
		d := resp.Result.Details
		if d == nil || d.Name != meta.Metadata.Name || resp.Result.Reason != metav1.StatusReasonInvalid {
			t.Fatalf("refusal %+v: want the Invalid status naming %s", resp.Result, meta.Metadata.Name)
		}
		for _, c := range d.Causes {
			v.Problems = append(v.Problems, c.Field+": "+strings.TrimPrefix(c.Message, field.ErrorTypeInvalid.String()+": "))
		}
	}
	return v
}

// cliVerdict runs `ohmlab validate --output json -` over existing and obj,
// and returns its verdict on obj (named name) with a summary of its
// problems ("<key> <reason>").
func cliVerdict(t *testing.T, existing []string, obj, name string) (verdict, []string) {
	t.Helper()
	got := runCLI(t, strings.Join(append(existing, obj), "\n---\n"), "validate", "--output", "json", "-")
	var rep report
	if err := json.Unmarshal([]byte(got.Stdout), &rep); err != nil {
		t.Fatalf("exit code %d, stdout is not JSON: %v\n%s%s", got.Code, err, got.Stdout, got.Stderr)
	}
	var summary []string
	v := verdict{Allowed: true}
	for _, f := range rep.Problems {
		if f.Name == name {
			v.Allowed = false
			v.Problems = append(v.Problems, f.Problem.String())
			summary = append(summary, f.Key+" "+f.Reason)
		}
	}
	for _, f := range rep.Warnings {
		if f.Name == name {
			v.Warnings = append(v.Warnings, f.Problem.String())
		}
	}
	return v, summary
}

// TestSameVerdict runs one table of input -> verdict through the admission
// handler and through `ohmlab validate`: both must refuse or admit the
// object with the same problems (key and message) and the same warnings. The existing objects
// are the ones already in the cluster (the webhook's cache); the CLI reads
// them in the same stream as the object.
func TestSameVerdict(t *testing.T) {
	seedDoc := func(name, spec string) string {
		return "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata:\n  name: " + name + "\n  namespace: vo\nspec:\n" + spec
	}
	ring := []string{
		seedDoc("r1", "  path: ohmlab/r1\n  data:\n    k: \"<ref:ohmlab/r2#k>\"\n"),
		seedDoc("r2", "  path: ohmlab/r2\n  data:\n    k: \"<ref:ohmlab/r1#k>\"\n"),
	}
	tests := []struct {
		name     string
		existing []string
		obj      string
		want     []string
		warns    bool
	}{
		{name: "valid", obj: seedDoc("x", "  path: ohmlab/x\n  data:\n    admin:\n      user: "+secret+"\n      password: \"<random:24>\"\n      hash: \"<bcrypt:admin.password>\"\n    age:\n      s: \"<age:secret>\"\n      p: \"<age:public>\"\n")},
		{name: "malformed templates", obj: seedDoc("x", "  path: ohmlab/x\n  data:\n    a: \"<random:0>\"\n    b: \"<hex:3>\"\n    c: \"<uuid:4>\"\n    d: \"<Random:8>\"\n"),
			want: []string{"a InvalidSpec", "b InvalidSpec", "c InvalidSpec", "d InvalidSpec"}},
		{name: "bad key names and leaves", obj: seedDoc("x", "  path: ohmlab/x\n  data:\n    a.b: "+secret+"\n    m:\n      \"\": x\n    l: [1, 2]\n    nil: null\n"),
			want: []string{"a.b InvalidSpec", "l InvalidSpec", "m InvalidSpec", "nil InvalidSpec"}},
		{name: "bcrypt targets and age pairs", obj: seedDoc("x", "  path: ohmlab/x\n  data:\n    h1: \"<bcrypt:missing>\"\n    h2: \"<bcrypt:h1>\"\n    long: \"<random:73>\"\n    h3: \"<bcrypt:long>\"\n    pub: \"<age:public>\"\n"),
			want: []string{"h1 InvalidSpec", "h2 InvalidSpec", "h3 InvalidSpec", "pub InvalidSpec"}},
		{name: "rotation keys", obj: seedDoc("x", "  path: ohmlab/x\n  data:\n    p: "+secret+"\n    g: \"<uuid>\"\n    m:\n      k: \"<uuid>\"\n  rotate:\n    token: \"1\"\n    keys: [p, q, m, g]\n"),
			want: []string{"m InvalidRotation", "p InvalidRotation", "q InvalidRotation"}},
		{name: "a rotate block that regenerates nothing warns", obj: seedDoc("x", "  path: ohmlab/x\n  data:\n    p: "+secret+"\n  rotate:\n    token: \"1\"\n"), warns: true},
		{name: "a rotate block without keys over key pairs warns", obj: seedDoc("x", "  path: ohmlab/x\n  data:\n    deploy:\n      private: \"<ssh:private>\"\n      public: \"<ssh:public>\"\n  rotate:\n    token: \"1\"\n"), warns: true},
		{name: "a path copied from vault kv get's Secret Path warns", obj: seedDoc("x", "  path: ohmlab/data/platforms/x\n  data:\n    k: \"<ref:ohmlab/data/platforms/y#k>\"\n"), warns: true},
		{name: "a path another object declares", existing: []string{seedDoc("a", "  path: ohmlab/x\n")}, obj: seedDoc("x", "  path: ohmlab/x\n"),
			want: []string{"spec.path DuplicatePath"}},
		{name: "closing a reference ring", existing: []string{
			seedDoc("a", "  path: ohmlab/a\n  data:\n    k: \"<ref:ohmlab/b#k>\"\n"),
			seedDoc("b", "  path: ohmlab/b\n  data:\n    k: \"<ref:ohmlab/x#k>\"\n"),
		}, obj: seedDoc("x", "  path: ohmlab/x\n  data:\n    k: \"<ref:ohmlab/a#k>\"\n"),
			want: []string{"k RefCycle"}},
		{name: "referencing a ring it is not on", existing: ring, obj: seedDoc("x", "  path: ohmlab/x\n  data:\n    k: \"<ref:ohmlab/r1#k>\"\n")},
		{name: "referencing a path no object declares", obj: seedDoc("x", "  path: ohmlab/x\n  data:\n    k: \"<ref:ohmlab/by-hand#k>\"\n")},
		{name: "everything at once", existing: append([]string{seedDoc("a", "  path: ohmlab/x\n")}, ring...),
			obj:  seedDoc("x", "  path: ohmlab/x\n  data:\n    k: \"<ref:ohmlab/r1#k>\"\n    r: \"<ref:ohmlab/x#k>\"\n    t: \"<hex:0>\"\n  rotate:\n    token: \"1\"\n    keys: [k]\n"),
			want: []string{"k InvalidRotation", "spec.path DuplicatePath", "t InvalidSpec"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh := webhookVerdict(t, tt.existing, tt.obj)
			cli, summary := cliVerdict(t, tt.existing, tt.obj, "x")
			if diff := cmp.Diff(wh, cli, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("verdicts differ (-webhook +cli):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, summary); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if got := len(wh.Warnings) > 0; got != tt.warns {
				t.Errorf("warnings %q, want some: %v", wh.Warnings, tt.warns)
			}
			if strings.Contains(strings.Join(wh.Problems, "")+strings.Join(wh.Warnings, ""), secret) {
				t.Errorf("the verdict holds a value: %+v", wh)
			}
		})
	}
}
