package planner

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
	"github.com/ohmlab/ohmlab-controller/vaultkv/fake"
)

const rotatedAtKey = ohmlabv1alpha1.RotatedAtMetadataKey

// TestPlanRotationPeriod: rotate.every regenerates the rotation keys once
// the period has passed since the time the path records, as the planner's
// clock (Desired.Now, here testNow) tells; a new token rotates at once and
// starts the period again; a period without a recorded time starts now,
// rotating nothing.
func TestPlanRotationPeriod(t *testing.T) {
	rnd24 := generated(t, 0, "<random:24>")
	hashStored := mustBcrypt(t, storedPassword)
	every := &templating.Rotate{Every: "90d", Keys: []string{"admin.password"}}
	both := &templating.Rotate{Token: "t2", Every: "90d", Keys: []string{"admin.password"}}
	ago := func(d time.Duration) string { return testNow.Add(-d).Format(time.RFC3339) }
	const day = 24 * time.Hour
	rotated := Plan{
		Actions:         []Action{update("admin.passwordHashed"), rotate("admin.password")},
		Data:            seeded(hashOf(rnd24), "admin.password", rnd24),
		CAS:             5,
		RecordRotatedAt: testNowText,
		ManagedKeys:     keycloakKeys,
	}
	withToken := rotated
	withToken.Actions = append(withToken.Actions, actRecordToken)
	withToken.RecordToken = "t2"

	runPlanCases(t, []planCase{
		{
			name: "not crossed: one second before the period ends, nothing",
			spec: spec{data: keycloak(), rotate: every, managed: keycloakKeys},
			path: ours(5, seeded(hashStored), rotatedAtKey, ago(90*day-time.Second)),
			want: Plan{CAS: 5, ManagedKeys: keycloakKeys},
		},
		{
			name: "crossed: the period has passed, the keys rotate and the time is recorded",
			spec: spec{data: keycloak(), rotate: every, managed: keycloakKeys},
			path: ours(5, seeded(hashStored), rotatedAtKey, ago(90*day)),
			want: rotated,
		},
		{
			name: "crossed long ago (the controller was down): one rotation, the period counts from now",
			spec: spec{data: keycloak(), rotate: every, managed: keycloakKeys},
			path: ours(5, seeded(hashStored), rotatedAtKey, ago(400*day)),
			want: rotated,
		},
		{
			name: "recorded by another process: its rotation's time is on the path, nothing",
			spec: spec{data: keycloak(), rotate: every, managed: keycloakKeys},
			path: ours(6, seeded(hashStored), rotatedAtKey, ago(time.Minute)),
			want: Plan{CAS: 6, ManagedKeys: keycloakKeys},
		},
		{
			name:            "landed by another process that stopped before recording it: its time is recorded, nothing rotates again",
			spec:            spec{data: keycloak(), rotate: every, managed: keycloakKeys},
			path:            ours(6, seeded(hashStored), rotatedAtKey, ago(91*day)),
			landedRotatedAt: ago(time.Minute),
			landedAt:        6,
			want: Plan{
				Actions:         []Action{act(ActionRecordRotation, "")},
				CAS:             6,
				RecordRotatedAt: ago(time.Minute),
				Rotated:         6,
				ManagedKeys:     keycloakKeys,
			},
		},
		{
			name: "no time recorded on a path the object owns (every added later): the period starts now, nothing rotates",
			spec: spec{data: keycloak(), rotate: every, managed: keycloakKeys},
			path: ours(5, seeded(hashStored)),
			want: Plan{Actions: []Action{act(ActionRecordRotation, "")}, CAS: 5, RecordRotatedAt: testNowText, ManagedKeys: keycloakKeys},
		},
		{
			name: "a time edited by hand that does not parse: the period starts now",
			spec: spec{data: keycloak(), rotate: every, managed: keycloakKeys},
			path: ours(5, seeded(hashStored), rotatedAtKey, "last tuesday"),
			want: Plan{Actions: []Action{act(ActionRecordRotation, "")}, CAS: 5, RecordRotatedAt: testNowText, ManagedKeys: keycloakKeys},
		},
		{
			name: "created with a period: the period starts with the values, nothing rotates",
			spec: spec{data: m{"k": "<random:24>"}, rotate: &templating.Rotate{Every: "36h"}},
			path: nil,
			want: Plan{
				Actions:     []Action{actCreate, create("k")},
				Mark:        md(ownerKey, testOwner, rotatedAtKey, testNowText),
				Data:        m{"k": rnd24},
				ManagedKeys: []string{"k"},
			},
		},
		{
			name: "adopted with a period: the period starts with the adoption",
			spec: spec{data: m{"k": "<random:24>"}, rotate: &templating.Rotate{Every: "36h"}},
			path: handMade(3, m{"k": "typed"}),
			want: Plan{Actions: []Action{actAdopt}, Mark: md(ownerKey, testOwner, rotatedAtKey, testNowText), CAS: 3},
		},
		{
			name: "token and period: a new token rotates at once, before the period ends, and starts it again",
			spec: spec{data: keycloak(), rotate: both, managed: keycloakKeys},
			path: ours(5, seeded(hashStored), tokenKey, "t1", rotatedAtKey, ago(day)),
			want: withToken,
		},
		{
			name: "token and period: both due make one rotation",
			spec: spec{data: keycloak(), rotate: both, managed: keycloakKeys},
			path: ours(5, seeded(hashStored), tokenKey, "t1", rotatedAtKey, ago(100*day)),
			want: withToken,
		},
		{
			name: "token and period: the token recorded, the period crossed, a rotation without a token record",
			spec: spec{data: keycloak(), rotate: both, managed: keycloakKeys},
			path: ours(5, seeded(hashStored), tokenKey, "t2", rotatedAtKey, ago(90*day)),
			want: rotated,
		},
		{
			name: "a token alone records the time of its rotation too",
			spec: spec{data: keycloak(), rotate: &templating.Rotate{Token: "t2", Keys: []string{"admin.password"}}, managed: keycloakKeys},
			path: ours(5, seeded(hashStored), tokenKey, "t1", rotatedAtKey, ago(time.Hour)),
			want: withToken,
		},
	})
}

// TestPeriodRotationLandsOnce: a process rotates at the end of the period
// and stops after its data write, before recording the time. Another
// process (a restart, a second replica, a shard move), whose clock is
// later, reads the write record on the path and records that rotation's
// time instead of rotating again; after that, a quiet resync reads the path
// once and plans nothing.
func TestPeriodRotationLandsOnce(t *testing.T) {
	ctx := context.Background()
	kv := fake.New()
	seed := &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testName, UID: "u1", Generation: 1},
		Spec: ohmlabv1alpha1.VaultSeedSpec{Path: ownPath, Data: &apiextensionsv1.JSON{Raw: []byte(`{"k":"<random:24>"}`)},
			Rotate: &ohmlabv1alpha1.Rotation{Every: "1h"}},
	}
	start := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	plan := func(now time.Time) Plan {
		t.Helper()
		in := Input{Analysed: seeds.Analyse(seed), Managed: seed.Status.ManagedKeys, CheckRecord: true, Now: now, ReportWithin: time.Minute}
		o, err := Observe(ctx, kv, in)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Decide(ctx, in, o, chachaGen(byte(now.Unix())))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// apply is the reconciler's: marker and record, data, then the
	// rotation's record unless the process stops before it.
	apply := func(p Plan, stop bool) {
		t.Helper()
		md := p.Mark
		if p.Data != nil {
			md = p.MarkWith(NewRecord(p, seed, time.Now().Add(time.Minute)))
		}
		if md != nil {
			if err := kv.Mark(ctx, ownPath, md); err != nil {
				t.Fatal(err)
			}
		}
		if p.Data != nil {
			w, err := kv.Write(ctx, ownPath, p.Data, p.CAS)
			if err != nil {
				t.Fatal(err)
			}
			seed.Status.Version = int64(w.Version)
			seed.Status.ManagedKeys = ManagedStatus(p, seed.Status.ManagedKeys, true, w)
		}
		if rec := p.RotationRecord(); rec != nil && !stop {
			if err := kv.Mark(ctx, ownPath, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	value := func() any {
		s, err := kv.Read(ctx, ownPath)
		if err != nil {
			t.Fatal(err)
		}
		return s.Data["k"]
	}

	apply(plan(start), false)
	first := value()
	if p := plan(start.Add(59 * time.Minute)); !p.Empty() {
		t.Fatalf("before the period ends: %s, want nothing", p.Summary())
	}

	p := plan(start.Add(time.Hour))
	if diff := cmp.Diff([]Action{rotate("k")}, p.Actions); diff != "" {
		t.Fatalf("at the end of the period (-want +got):\n%s", diff)
	}
	apply(p, true)
	second := value()
	if second == first {
		t.Fatal("the rotation wrote the same value")
	}

	later := start.Add(time.Hour + 5*time.Minute)
	p = plan(later)
	if diff := cmp.Diff([]Action{act(ActionRecordRotation, "")}, p.Actions); diff != "" {
		t.Fatalf("the successor (-want +got):\n%s", diff)
	}
	if want := start.Add(time.Hour).Format(time.RFC3339); p.RecordRotatedAt != want {
		t.Errorf("the successor records %q, want the landed rotation's %q", p.RecordRotatedAt, want)
	}
	apply(p, false)
	if value() != second {
		t.Error("the successor rotated again")
	}

	reads := kv.Calls(vaultkv.OpRead)
	if p := plan(later.Add(time.Minute)); !p.Empty() {
		t.Errorf("the resync after: %s, want nothing", p.Summary())
	}
	if got := kv.Calls(vaultkv.OpRead) - reads; got != 1 {
		t.Errorf("the quiet resync made %d reads, want 1", got)
	}
}
