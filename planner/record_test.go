package planner

import (
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner/plantest"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// manyKeys are n key names of about 40 bytes.

func TestIntentMetadataRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		w         Record
		wantParts int
		want      Record
	}{
		{
			name:      "a rotation",
			w:         Record{Version: 7, Token: "2026-10-12", Actions: map[string][]string{ActionRotate: {"admin.password"}, ActionRecordToken: {}}},
			wantParts: 1,
		},
		{
			name:      "key names past one value continue under numbered keys",
			w:         Record{Version: 2, Actions: map[string][]string{ActionCreate: {}, ActionCreateField: plantest.ManyKeys(40)}},
			wantParts: 4,
		},
		{
			name:      "non-ASCII key names are escaped, so that the values are printable",
			w:         Record{Version: 3, Actions: map[string][]string{ActionCreateField: {"mot-de-passe-été", "clé-🔑"}}},
			wantParts: 1,
		},
		{
			name:      "key names past every part: a record without them",
			w:         Record{Version: 9, Token: "t2", Actions: map[string][]string{ActionCreateField: plantest.ManyKeys(200)}},
			wantParts: 1,
			want:      Record{Version: 9, Token: "t2", Unlisted: true, Keys: keysDigest(plantest.ManyKeys(200))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := tt.w.metadata()
			if len(md) != tt.wantParts {
				t.Errorf("%d custom_metadata keys, want %d", len(md), tt.wantParts)
			}
			if err := vaultkv.ValidateMetadata(md); err != nil {
				t.Error(err)
			}
			for k, v := range md {
				if strings.IndexFunc(v, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsPrint(r) }) >= 0 {
					t.Errorf("the value of %s is not printable ASCII", k)
				}
			}
			want := tt.want
			if want.Version == 0 {
				want = tt.w
			}
			got, ok := RecordOn(md)
			if !ok {
				t.Fatal("the record does not read back")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordedIntent(t *testing.T) {
	long := Record{Version: 4, Actions: map[string][]string{ActionCreateField: plantest.ManyKeys(40)}}.metadata()
	short := Record{Version: 5, Actions: map[string][]string{ActionUpdateField: {"a"}}}.metadata()
	// A shorter record merged over a longer one leaves its later parts.
	over := map[string]string{}
	for k, v := range long {
		over[k] = v
	}
	for k, v := range short {
		over[k] = v
	}
	tests := []struct {
		name   string
		md     map[string]string
		want   Record
		wantOK bool
	}{
		{name: "none", md: map[string]string{ohmlabv1alpha1.OwnerMetadataKey: "ns/app"}},
		{name: "a shorter record over a longer one", md: over, want: Record{Version: 5, Actions: map[string][]string{ActionUpdateField: {"a"}}}, wantOK: true},
		{name: "a part missing", md: map[string]string{intentKey(0): long[intentKey(0)], intentKey(2): long[intentKey(2)]}},
		{name: "edited by hand", md: map[string]string{ohmlabv1alpha1.WriteMetadataKey: "7;t2;admin.password"}},
		{name: "no version", md: map[string]string{ohmlabv1alpha1.WriteMetadataKey: `{"token":"t2"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RecordOn(tt.md)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestIntentReported(t *testing.T) {
	w := Record{Version: 6, Status: 5, Actions: map[string][]string{ActionCreateField: {"a"}, ActionRotate: {"b"}, ActionDeleteField: {"gone"}}}
	mk := func(kv ...any) []ohmlabv1alpha1.ManagedKey {
		var out []ohmlabv1alpha1.ManagedKey
		for i := 0; i < len(kv); i += 2 {
			out = append(out, ohmlabv1alpha1.ManagedKey{Key: kv[i].(string), Version: int64(kv[i+1].(int))})
		}
		return out
	}
	tests := []struct {
		name          string
		w             Record
		statusVersion int64
		managed       []ohmlabv1alpha1.ManagedKey
		want          bool
	}{
		{name: "status.version before it, keys at an older version", w: w, statusVersion: 5, managed: mk("a", 5, "b", 5, "gone", 3)},
		{name: "status.version at it", w: w, statusVersion: 6, want: true},
		{name: "status.version past it", w: w, statusVersion: 9, want: true},
		{name: "status lost or cleared: version 0 after a later write", w: w, want: true},
		{name: "status.version older than the version it was planned on", w: w, statusVersion: 4, want: true},
		{name: "managed keys at its version, the pruned one gone", w: w, statusVersion: 5, managed: mk("a", 6, "b", 6), want: true},
		{name: "managed keys at its version, the pruned one still listed", w: w, statusVersion: 5, managed: mk("a", 6, "b", 6, "gone", 3)},
		{name: "an unlisted record, status.version as its writer planned", w: Record{Version: 6, Status: 5, Unlisted: true}, statusVersion: 5},
		{name: "an unlisted record, status.version at it", w: Record{Version: 6, Status: 5, Unlisted: true}, statusVersion: 6, want: true},
		{name: "a new object's first write: no status before, none since", w: Record{Version: 2, Actions: map[string][]string{ActionAdopt: {}, ActionCreateField: {"a"}}}, statusVersion: 0},
		{name: "planned with status.version 3 while a person had written 4 and 5", w: Record{Version: 6, Status: 3, Unlisted: true}, statusVersion: 3},
		{name: "the writer lost the answer and reported the version it read", w: Record{Version: 6, Status: 3, Unlisted: true}, statusVersion: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.reported(tt.statusVersion, tt.managed); got != tt.want {
				t.Errorf("reported = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIntentLandedIn(t *testing.T) {
	at := func(version int, data m) *vaultkv.Secret {
		return &vaultkv.Secret{Exists: true, Version: version, Data: data}
	}
	create := Record{Version: 1, Actions: map[string][]string{ActionCreate: {}, ActionCreateField: {"admin.password", "user"}}}
	rotation := Record{Version: 5, Token: "t2", Actions: map[string][]string{ActionRotate: {"admin.password"}, ActionRecordToken: {}}}
	prune := Record{Version: 3, Actions: map[string][]string{ActionDeleteField: {"old"}, ActionCreateField: {"new"}}}
	t0 := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	stamped := func(version int, created time.Time, data m) *vaultkv.Secret {
		return &vaultkv.Secret{Exists: true, Version: version, Created: created, Data: data}
	}
	based := rotation
	based.Base, based.Until = CreatedTime(t0), t0.Add(2*time.Minute).Format(time.RFC3339Nano)
	tests := []struct {
		name            string
		w               Record
		written, before *vaultkv.Secret
		want            bool
	}{
		{name: "a create", w: create, written: at(1, m{"admin": m{"password": "x"}, "user": "admin"}), want: true},
		{name: "a person created the path instead, with a key of their own", w: create,
			written: at(1, m{"admin": m{"password": "x"}, "user": "admin", "note": "typed"})},
		{name: "a person created the path instead, without a recorded key", w: create, written: at(1, m{"user": "admin"})},
		{name: "a rotation", w: rotation, written: at(5, m{"admin": m{"password": "new"}, "hand": "h"}), before: at(4, m{"admin": m{"password": "old"}, "hand": "h"}), want: true},
		{name: "a person's write instead of the rotation: the rotated key unchanged", w: rotation,
			written: at(5, m{"admin": m{"password": "old"}, "hand": "edited"}), before: at(4, m{"admin": m{"password": "old"}, "hand": "h"})},
		{name: "a person's write instead of the rotation: another key changed too", w: rotation,
			written: at(5, m{"admin": m{"password": "typed"}, "hand": "edited"}), before: at(4, m{"admin": m{"password": "old"}, "hand": "h"})},
		{name: "a prune", w: prune, written: at(3, m{"new": "n", "keep": "k"}), before: at(2, m{"old": "o", "keep": "k"}), want: true},
		{name: "the pruned key still there", w: prune, written: at(3, m{"new": "n", "old": "o"}), before: at(2, m{"old": "o"})},
		{name: "a key of the version before gone", w: prune, written: at(3, m{"new": "n"}), before: at(2, m{"old": "o", "keep": "k"})},
		{name: "the version before no longer kept", w: rotation, written: at(5, m{"admin": m{"password": "new"}}), before: &vaultkv.Secret{}},
		{name: "the version before deleted", w: rotation, written: at(5, m{"admin": m{"password": "new"}}), before: &vaultkv.Secret{Exists: true, Version: 4, Deleted: true}},
		{name: "the written version deleted", w: rotation, written: &vaultkv.Secret{Exists: true, Version: 5, Deleted: true}, before: at(4, m{"admin": m{"password": "old"}})},
		{name: "another version", w: rotation, written: at(6, m{"admin": m{"password": "new"}}), before: at(4, m{"admin": m{"password": "old"}})},
		{name: "an unlisted record without a digest (an earlier release's)", w: Record{Version: 5, Unlisted: true}, written: at(5, m{"a": "b"}), before: at(4, m{})},
		{name: "an unlisted record: the keys changed are the digest's", w: Record{Version: 5, Unlisted: true, Keys: keysDigest([]string{"a", "gone"})},
			written: at(5, m{"a": "b", "same": "s"}), before: at(4, m{"gone": "g", "same": "s"}), want: true},
		{name: "an unlisted record: a person's write changed another key too", w: Record{Version: 5, Unlisted: true, Keys: keysDigest([]string{"a"})},
			written: at(5, m{"a": "b", "typed": "t"}), before: at(4, m{})},
		{name: "planned on another life of the path: the version before has another created_time", w: based,
			written: stamped(5, t0.Add(time.Second), m{"admin": m{"password": "new"}}), before: stamped(4, t0.Add(-time.Hour), m{"admin": m{"password": "old"}})},
		{name: "planned on the version before, created in time", w: based,
			written: stamped(5, t0.Add(time.Second), m{"admin": m{"password": "new"}}), before: stamped(4, t0, m{"admin": m{"password": "old"}}), want: true},
		{name: "created after its writer gave up: a person's write", w: based,
			written: stamped(5, t0.Add(2*time.Minute+maxClockSkew+time.Second), m{"admin": m{"password": "new"}}), before: stamped(4, t0, m{"admin": m{"password": "old"}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.landedIn(tt.written, tt.before); got != tt.want {
				t.Errorf("landedIn = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIntentPlan(t *testing.T) {
	rotation := Record{Version: 5, Token: "t2", Actions: map[string][]string{ActionUpdateField: {"admin.passwordHashed"}, ActionRotate: {"admin.password"}, ActionRecordToken: {}}}
	tests := []struct {
		name          string
		w             Record
		tokenRecorded bool
		wantSummary   string
		wantReason    string
	}{
		{name: "a rotation whose token is recorded", w: rotation, tokenRecorded: true,
			wantSummary: "1 update-field (admin.passwordHashed), 1 rotate (admin.password), 1 record-token", wantReason: "Rotated"},
		{name: "a rotation whose token is not recorded yet", w: rotation,
			wantSummary: "1 update-field (admin.passwordHashed), 1 rotate (admin.password)", wantReason: "Rotated"},
		{name: "an adoption that creates keys and prunes one", w: Record{Version: 5, Actions: map[string][]string{ActionAdopt: {}, ActionCreateField: {"new"}, ActionDeleteField: {"old"}}},
			wantSummary: "1 adopt, 1 create-field (new), 1 delete-field (old)", wantReason: "Adopted"},
	}
	unlisted := Record{Version: 5, Token: "t2", Unlisted: true}
	written := &vaultkv.Secret{Exists: true, Version: 5, Data: m{"admin": m{"password": "new"}, "new": "n", "same": "s"}}
	before := &vaultkv.Secret{Exists: true, Version: 4, Data: m{"admin": m{"password": "old"}, "old": "o", "same": "s"}}
	tests = append(tests, struct {
		name          string
		w             Record
		tokenRecorded bool
		wantSummary   string
		wantReason    string
	}{name: "an unlisted rotation: its actions read off the versions", w: unlisted, tokenRecorded: true,
		wantSummary: "1 create-field (new), 1 delete-field (old), 1 rotate (admin.password), 1 record-token", wantReason: "Rotated"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.w.report(tt.tokenRecorded, written, before)
			if got := p.Summary(); got != tt.wantSummary {
				t.Errorf("summary %q, want %q", got, tt.wantSummary)
			}
			if got := p.EventReason(); got != tt.wantReason {
				t.Errorf("event reason %q, want %q", got, tt.wantReason)
			}
		})
	}
}

// TestIntentOfPlan: the record of a plan names its version, token and
// actions, and apply merges it with the owner marker in one request.
func TestIntentOfPlan(t *testing.T) {
	p := Plan{CAS: 0, Actions: []Action{actCreate, create("a"), create("b")}, Mark: md(ownerKey, testOwner, tokenKey, "t1"), Data: m{"a": "1", "b": "2"}}
	seed := &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{UID: "u1", Generation: 3}}
	deadline := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	want := Record{Version: 1, UID: "u1", Generation: 3, Until: "2026-12-06T05:00:00Z", Actions: map[string][]string{ActionCreate: {}, ActionCreateField: {"a", "b"}}}
	w := NewRecord(p, seed, deadline)
	if diff := cmp.Diff(want, w); diff != "" {
		t.Errorf("Record (-want +got):\n%s", diff)
	}
	wantMark := md(ownerKey, testOwner, tokenKey, "t1", ohmlabv1alpha1.WriteMetadataKey,
		`{"version":1,"uid":"u1","generation":3,"until":"2026-12-06T05:00:00Z","actions":{"create":[],"create-field":["a","b"]}}`)
	if diff := cmp.Diff(wantMark, p.MarkWith(w)); diff != "" {
		t.Errorf("mark (-want +got):\n%s", diff)
	}
}

// TestStaleCopyWritesNothing: a copy of the object older than the
// generation that wrote the path's last record (another process's cache
// lagging behind during a shard move) plans nothing; another object's
// record, or none, is no reason to wait.
func TestStaleCopyWritesNothing(t *testing.T) {
	record := func(uid string, generation int64) *vaultkv.Secret {
		w := Record{Version: 3, UID: uid, Generation: generation, Actions: map[string][]string{ActionRotate: {"a"}}}
		return &vaultkv.Secret{Exists: true, Version: 3, CustomMetadata: w.metadata()}
	}
	seed := &ohmlabv1alpha1.VaultSeed{}
	seed.UID, seed.Generation = "u1", 4
	tests := []struct {
		name string
		path *vaultkv.Secret
		want bool
	}{
		{name: "written by a newer generation of this object", path: record("u1", 5), want: true},
		{name: "written by this generation", path: record("u1", 4)},
		{name: "written by an older generation", path: record("u1", 3)},
		{name: "written by another object under the same name", path: record("u0", 9)},
		{name: "no record", path: &vaultkv.Secret{Exists: true, Version: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := staleCopy(seed, tt.path); got != tt.want {
				t.Errorf("staleCopy = %v, want %v", got, tt.want)
			}
		})
	}
}
