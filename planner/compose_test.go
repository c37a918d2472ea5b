package planner

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
	"github.com/ohmlab/ohmlab-controller/vaultkv/fake"
)

// harborPath is a second source path of the composed key.
const harborPath = "ohmlab/platforms/production/core/harbor"

// composedData composes a key of the own path and two of other paths.
func composedData() m {
	return m{"db": m{
		"user": "keycloak",
		"url":  "postgres://<ref:" + ownPath + "#db.user>:<ref:" + pgRef + ">@<ref:" + harborPath + "#db.host>:5432/app",
	}}
}

func harborSecret(host any) *vaultkv.Secret {
	return &vaultkv.Secret{Exists: true, Version: 7, Data: m{"db": m{"host": host}}}
}

// TestPlanComposed: a composed key is kept equal to the composition of
// its current sources exactly as a copy is kept equal to its source.
func TestPlanComposed(t *testing.T) {
	const url = "postgres://keycloak:pg-source@db.internal:5432/app"
	sources := func(pw, host any) map[string]*vaultkv.Secret {
		return map[string]*vaultkv.Secret{pgPath: pgSecret(pw), harborPath: harborSecret(host)}
	}
	managed := []string{"db.url", "db.user"}
	runPlanCases(t, []planCase{
		{
			name: "absent path: created from its sources, the own path's user created in the same plan",
			spec: spec{data: composedData()},
			path: &vaultkv.Secret{},
			refs: sources("pg-source", "db.internal"),
			want: Plan{
				Actions:     []Action{actCreate, create("db.url"), create("db.user")},
				Mark:        md(ownerKey, testOwner),
				Data:        m{"db": m{"user": "keycloak", "url": url}},
				ManagedKeys: managed,
			},
		},
		{
			name: "equal to the composition of its sources: nothing",
			spec: spec{data: composedData(), managed: managed},
			path: ours(5, m{"db": m{"user": "keycloak", "url": url}}),
			refs: sources("pg-source", "db.internal"),
			want: Plan{CAS: 5, ManagedKeys: managed},
		},
		{
			name: "a source rotated: update-field with the new composition",
			spec: spec{data: composedData(), managed: managed},
			path: ours(5, m{"db": m{"user": "keycloak", "url": url}}),
			refs: sources("rotated", "db.internal"),
			want: Plan{
				Actions:     []Action{update("db.url")},
				Data:        m{"db": m{"user": "keycloak", "url": "postgres://keycloak:rotated@db.internal:5432/app"}},
				CAS:         5,
				ManagedKeys: managed,
			},
		},
		{
			name: "a hand edit is put back",
			spec: spec{data: composedData(), managed: managed},
			path: ours(5, m{"db": m{"user": "keycloak", "url": "postgres://someone:typed@elsewhere/app"}}),
			refs: sources("pg-source", "db.internal"),
			want: Plan{
				Actions:     []Action{update("db.url")},
				Data:        m{"db": m{"user": "keycloak", "url": url}},
				CAS:         5,
				ManagedKeys: managed,
			},
		},
		{
			name: "the own path's source edited by hand (a plain key, kept): the composition follows it",
			spec: spec{data: composedData(), managed: managed},
			path: ours(5, m{"db": m{"user": "admin", "url": url}}),
			refs: sources(1234, "db.internal"),
			want: Plan{
				Actions:     []Action{update("db.url")},
				Data:        m{"db": m{"user": "admin", "url": "postgres://admin:1234@db.internal:5432/app"}},
				CAS:         5,
				ManagedKeys: managed,
			},
		},
		{
			name: "the composed key on the path while a source is missing: kept, RefPending, the rest maintained",
			spec: spec{data: composedData(), managed: managed},
			path: ours(5, m{"db": m{"url": url}}),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("rotated")},
			want: Plan{
				Outcome: OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending, Message: Text("waiting for " + harborPath + "#db.host (path missing)"),
				Actions:     []Action{create("db.user")},
				Data:        m{"db": m{"user": "keycloak", "url": url}},
				CAS:         5,
				ManagedKeys: managed,
			},
		},
		{
			name: "a source key that is a map: stalled on it, naming the reference; the rest is written",
			spec: spec{data: m{"url": "pg://<ref:" + pgPath + "#users>@<ref:" + harborPath + "#db>", "g": "<hex:4>"}},
			path: ours(5, m{}),
			refs: sources("pg-source", "db.internal"),
			want: Plan{
				Outcome: OutcomeStop, Reason: ohmlabv1alpha1.ReasonInvalidSpec,
				Message: Text("url: <ref:" + pgPath + "#users> names users, which is a map on " + pgPath + ", not a value: a reference copies one value; name one of its keys (<ref:" + pgPath + "#users.<key>>); " +
					"url: <ref:" + harborPath + "#db> names db, which is a map on " + harborPath + ", not a value: a reference copies one value; name one of its keys (<ref:" + harborPath + "#db.<key>>)"),
				Actions:     []Action{create("g")},
				Data:        m{"g": generated(t, 0, "<hex:4>")},
				CAS:         5,
				ManagedKeys: []string{"g"},
			},
		},
	})
}

// TestPlanComposedRefPending: a composed key that the path lacks waits
// for each of its sources missing or empty, each named, and holds the
// whole object back, as a copy does.
func TestPlanComposedRefPending(t *testing.T) {
	for _, tc := range []struct {
		name string
		data m
		path *vaultkv.Secret
		refs map[string]*vaultkv.Secret
		want string
	}{
		{
			name: "every source path missing",
			data: composedData(),
			path: &vaultkv.Secret{},
			want: "waiting for " + harborPath + "#db.host (path missing), " + pgRef + " (path missing)",
		},
		{
			name: "one source path missing",
			data: composedData(),
			path: ours(5, m{"db": m{"user": "keycloak"}}),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source")},
			want: "waiting for " + harborPath + "#db.host (path missing)",
		},
		{
			name: "the other source's key empty, one key missing",
			data: composedData(),
			path: ours(5, m{"db": m{"user": "keycloak"}}),
			refs: map[string]*vaultkv.Secret{pgPath: {Exists: true, Version: 1, Data: m{"users": m{}}}, harborPath: harborSecret("")},
			want: "waiting for " + harborPath + "#db.host (empty), " + pgRef + " (key missing)",
		},
		{
			name: "a source's latest version deleted",
			data: composedData(),
			path: ours(5, m{"db": m{"user": "keycloak"}}),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source"), harborPath: {Exists: true, Deleted: true, Version: 3}},
			want: "waiting for " + harborPath + "#db.host (latest version deleted)",
		},
		{
			name: "the own path's source empty on the path",
			data: m{"db": m{"user": "", "url": "postgres://<ref:" + ownPath + "#db.user>:<ref:" + pgRef + ">@db"}},
			path: ours(5, m{"db": m{"user": ""}}),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source")},
			want: "waiting for " + ownPath + "#db.user (empty)",
		},
		{
			name: "the own path's source empty and another path's missing",
			data: m{"db": m{"user": "", "url": "postgres://<ref:" + ownPath + "#db.user>:<ref:" + pgRef + ">@db"}},
			path: ours(5, m{"db": m{"user": ""}}),
			want: "waiting for " + ownPath + "#db.user (empty), " + pgRef + " (path missing)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec{data: tc.data, managed: []string{"db.user"}}
			d := desired(t, s)
			got, err := decide(t.Context(), d, observe(&d, tc.path, tc.refs, nil), testGen())
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			want := Plan{Outcome: OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending, Message: Text(tc.want), CAS: tc.path.Version, ManagedKeys: ownedOnly(tc.path, s.managed),
				// A path the object wrote, read absent, has vanished.
				Vanished: !tc.path.Exists}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreviewComposed: the objects of a file are planned sources first,
// a composed key included, and a cycle between paths through a composed
// key stops both objects (RefCycle) before any read.
func TestPreviewComposed(t *testing.T) {
	obj := func(name, data string) *ohmlabv1alpha1.VaultSeed {
		return &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: ohmlabv1alpha1.VaultSeedSpec{Path: "ohmlab/" + name, Data: &apiextensionsv1.JSON{Raw: []byte(data)}}}
	}
	type row struct {
		Name, Reason, Message string
		After                 []string
	}
	for _, tc := range []struct {
		name string
		objs []*ohmlabv1alpha1.VaultSeed
		want []row
	}{
		{
			name: "a composed key is planned after its source",
			objs: []*ohmlabv1alpha1.VaultSeed{obj("app", `{"url": "pg://u:<ref:ohmlab/db#pw>@db"}`), obj("db", `{"pw": "<random:8>"}`)},
			want: []row{
				{Name: "app", Reason: ohmlabv1alpha1.ReasonObserveOnly, Message: "1 create, 1 create-field (url)", After: []string{"ns/db"}},
				{Name: "db", Reason: ohmlabv1alpha1.ReasonObserveOnly, Message: "1 create, 1 create-field (pw)"},
			},
		},
		{
			name: "a cycle through a composed key",
			objs: []*ohmlabv1alpha1.VaultSeed{obj("app", `{"url": "pg://<ref:ohmlab/db#user>:x@db", "pw": "<random:8>"}`), obj("db", `{"user": "<ref:ohmlab/app#pw>"}`)},
			want: []row{
				{Name: "app", Reason: ohmlabv1alpha1.ReasonRefCycle, Message: "reference cycle: ohmlab/app -> ohmlab/db -> ohmlab/app; change or remove a <ref:> of one of these objects to break it; until then nothing is written to these paths"},
				{Name: "db", Reason: ohmlabv1alpha1.ReasonRefCycle, Message: "reference cycle: ohmlab/app -> ohmlab/db -> ohmlab/app; change or remove a <ref:> of one of these objects to break it; until then nothing is written to these paths"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			previews, err := PreviewSeeds(context.Background(), fake.New(), analyseAll(tc.objs), PreviewOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []row
			for _, p := range previews {
				got = append(got, row{p.Name, p.Drifted.Reason, p.Drifted.Message, p.After})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("previews (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanComposedOverAPersonsValue: an earlier release stored a composed
// leaf's text as a plain value, seeded once, so a person may have typed
// the real value over it since. The key is composed while it holds that
// text or a value the controller wrote; a value typed over the text, or on
// a path the controller did not write, is kept and named, never
// overwritten.
func TestPlanComposedOverAPersonsValue(t *testing.T) {
	const url = "postgres://keycloak:pg-source@db.internal:5432/app"
	declared := composedData()["db"].(m)["url"].(string)
	refs := map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source"), harborPath: harborSecret("db.internal")}
	at := func(v int) map[string]int { return map[string]int{"db.url": v, "db.user": v} }
	stall := "db.url: holds a value the controller did not compose (typed over the text an earlier release stored, or on a path it did not write), " +
		"which is kept (a value on the path is never overwritten): delete the key (echo '{\"db\":{\"url\":null}}' | vault kv patch " + ownPath + " -) and the next resync composes it"
	managed := []string{"db.url", "db.user"}
	runPlanCases(t, []planCase{
		{
			name: "the text an earlier release stored: composed",
			spec: spec{data: composedData(), managed: managed, writtenAt: at(3)},
			path: ours(3, m{"db": m{"user": "keycloak", "url": declared}}),
			refs: refs,
			want: Plan{Actions: []Action{update("db.url")}, Data: m{"db": m{"user": "keycloak", "url": url}}, CAS: 3, ManagedKeys: managed},
		},
		{
			name:    "a value typed over that text: kept, and the stall names the key",
			spec:    spec{data: composedData(), managed: managed, writtenAt: at(3)},
			path:    ours(4, m{"db": m{"user": "keycloak", "url": "postgres://app:typed@db:5432/app"}}),
			refs:    refs,
			written: map[int]*vaultkv.Secret{3: ours(3, m{"db": m{"user": "keycloak", "url": declared}})},
			want:    Plan{Outcome: OutcomeStop, Reason: ohmlabv1alpha1.ReasonInvalidSpec, Message: Text(stall), CAS: 4, ManagedKeys: managed, Carried: []string{"db.user"}},
		},
		{
			name:    "a hand edit of what the controller composed: put back",
			spec:    spec{data: composedData(), managed: managed, writtenAt: at(3)},
			path:    ours(4, m{"db": m{"user": "keycloak", "url": "postgres://someone:typed@elsewhere/app"}}),
			refs:    refs,
			written: map[int]*vaultkv.Secret{3: ours(3, m{"db": m{"user": "keycloak", "url": url}})},
			want:    Plan{Actions: []Action{update("db.url")}, Data: m{"db": m{"user": "keycloak", "url": url}}, CAS: 4, ManagedKeys: managed, Carried: []string{"db.user"}},
		},
		{
			name: "the version the record names can no longer be read: kept",
			spec: spec{data: composedData(), managed: managed, writtenAt: at(3)},
			path: ours(9, m{"db": m{"user": "keycloak", "url": "postgres://app:typed@db:5432/app"}}),
			refs: refs,
			want: Plan{Outcome: OutcomeStop, Reason: ohmlabv1alpha1.ReasonInvalidSpec, Message: Text(stall), CAS: 9, ManagedKeys: managed},
		},
		{
			name: "no record (an object created again, or a path made by hand) but the composition itself: in sync",
			spec: spec{data: composedData()},
			path: ours(2, m{"db": m{"user": "keycloak", "url": url}}),
			refs: refs,
			want: Plan{CAS: 2},
		},
		{
			name: "a path made by hand, adopted: its value is kept",
			spec: spec{data: composedData()},
			path: handMade(2, m{"db": m{"user": "keycloak", "url": "postgres://app:typed@db:5432/app"}}),
			refs: refs,
			want: Plan{Outcome: OutcomeStop, Reason: ohmlabv1alpha1.ReasonInvalidSpec, Message: Text(stall), CAS: 2,
				Actions: []Action{{Name: ActionAdopt}}, Mark: md(ownerKey, testOwner), ManagedKeys: nil},
		},
	})
}

// TestVersionReadsOfAComposedKey: whether the controller composed a value
// is told by the version its record names, read only when the key does not
// hold its declared text and the record is older than the path.
func TestVersionReadsOfAComposedKey(t *testing.T) {
	a := templating.Analyse(templating.Object{Namespace: testNamespace, Name: testName, Path: ownPath, Data: composedData()})
	declared := composedData()["db"].(m)["url"].(string)
	d := Desired{Analysis: a, Version: 4, ManagedKeys: []string{"db.url", "db.user"}, WrittenAt: map[string]int{"db.url": 3, "db.user": 4}}
	for _, tc := range []struct {
		name string
		url  string
		want []int
	}{
		{"the declared text: nothing to read", declared, nil},
		{"another value: the record's version", "postgres://app:typed@db:5432/app", []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := versionReads(d, ours(4, m{"db": m{"user": "keycloak", "url": tc.url}}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("versionReads (-want +got):\n%s", diff)
			}
		})
	}
}
