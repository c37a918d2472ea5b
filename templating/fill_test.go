package templating

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/bcrypt"
)

const (
	zeroRandom8 = "AAAAAAAA"
	zeroUUID    = "00000000-0000-4000-8000-000000000000"
)

func fillGenerator() Generator {
	return Generator{Rand: constReader(0), BcryptCost: bcrypt.MinCost}
}

// allKinds declares every kind of leaf.
func allKinds() map[string]any {
	return map[string]any{
		"user": "admin", "n": json.Number("3"), "b": true, "ph": "",
		"pw": "<random:8>", "hx": "<hex:4>", "id": "<uuid>",
		"as": "<age:secret>", "ap": "<age:public>", "ss": "<ssh:private>", "sp": "<ssh:public>",
		"h": "<bcrypt:pw>", "x": "<ref:m/other#k>", "self": "<ref:m/own#pw>",
	}
}

func mustHash(t *testing.T, src string) string {
	t.Helper()
	h, err := fillGenerator().Bcrypt(src)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// normaliseHashes replaces every bcrypt value of got that verifies against
// the source named by want ("bcrypt:<source value>") with want's value.
func normaliseHashes(a Analysis, got, want map[string]any) {
	for k, v := range got {
		w, ok := want[k].(string)
		if a.Leaves[k].Kind != KindBcrypt || !ok || !strings.HasPrefix(w, "bcrypt:") {
			continue
		}
		if bcrypt.CompareHashAndPassword([]byte(v.(string)), []byte(strings.TrimPrefix(w, "bcrypt:"))) == nil {
			got[k] = w
		}
	}
}

// newPrivate and itsPublic stand for a new private key of a key pair and
// its public key in TestFill (TestKeyPairFill checks the pairs).
const newPrivate, itsPublic = "<new private key>", "<its public key>"

// normalisePairs replaces each private key of got and its public key by
// newPrivate and itsPublic, once it has checked that they belong together.
func normalisePairs(t *testing.T, a Analysis, got map[string]any) {
	t.Helper()
	for p, ks := range privateKeys(a) {
		private, ok := got[ks[0]].(string)
		if !ok {
			continue
		}
		want, err := p.derive(private)
		if err != nil {
			t.Errorf("%s: %v", ks[0], err)
		}
		got[ks[0]] = newPrivate
		for k, l := range a.Leaves {
			if l.Kind == p.public && got[k] == want {
				got[k] = itsPublic
			}
		}
	}
}

func TestFill(t *testing.T) {
	type m = map[string]any
	hashStored := mustHash(t, "stored-pw")
	hashOld := mustHash(t, "old")
	hash1234 := mustHash(t, "1234")
	seqSSH, seqSSHPublic := sshKeyFromSeed(t, 1)
	complete := func() m {
		return m{
			"user": "admin", "n": json.Number("3"), "b": true, "ph": "",
			"pw": "stored-pw", "hx": "abcd", "id": "11111111-1111-4111-8111-111111111111",
			"as": seqAgeSecret, "ap": seqAgePublic, "ss": seqSSH, "sp": seqSSHPublic, "h": hashStored, "x": "copied", "self": "stored-pw",
		}
	}
	with := func(base m, kv ...any) m {
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(base, kv[i].(string))
				continue
			}
			base[kv[i].(string)] = kv[i+1]
		}
		return base
	}
	create := func(k string) Change { return Change{Key: k, Action: ActionCreateField} }
	update := func(k string) Change { return Change{Key: k, Action: ActionUpdateField} }
	rotate := func(k string) Change { return Change{Key: k, Action: ActionRotate} }
	tests := []struct {
		name string
		data m
		in   FillInput
		want FillResult
	}{
		{
			name: "empty path: everything is created",
			data: allKinds(),
			in:   FillInput{Refs: map[string]string{"x": "copied"}},
			want: FillResult{
				Values: m{
					"user": "admin", "n": json.Number("3"), "b": true, "ph": "",
					"pw": zeroRandom8, "hx": "0000", "id": zeroUUID, "as": newPrivate, "ap": itsPublic, "ss": newPrivate, "sp": itsPublic,
					"h": "bcrypt:" + zeroRandom8, "x": "copied", "self": zeroRandom8,
				},
				Changes: []Change{create("ap"), create("as"), create("b"), create("h"), create("hx"), create("id"), create("n"), create("ph"), create("pw"), create("self"), create("sp"), create("ss"), create("user"), create("x")},
			},
		},
		{
			name: "complete path: nothing changes",
			data: allKinds(),
			in:   FillInput{Current: complete(), Refs: map[string]string{"x": "copied"}},
			want: FillResult{Values: m{}},
		},
		{
			name: "plain values present with other values are left alone",
			data: allKinds(),
			in:   FillInput{Current: with(complete(), "user", "someone", "ph", "typed by hand", "n", "x", "b", 1.0), Refs: map[string]string{"x": "copied"}},
			want: FillResult{Values: m{}},
		},
		{
			name: "generated values present with other values are left alone",
			data: allKinds(),
			in:   FillInput{Current: with(complete(), "hx", "not hex", "id", 7.0), Refs: map[string]string{"x": "copied"}},
			want: FillResult{Values: m{}},
		},
		{
			name: "missing keys only",
			data: allKinds(),
			in:   FillInput{Current: with(complete(), "user", nil, "hx", nil, "ph", nil), Refs: map[string]string{"x": "copied"}},
			want: FillResult{Values: m{"user": "admin", "hx": "0000", "ph": ""}, Changes: []Change{create("hx"), create("ph"), create("user")}},
		},
		{
			name: "rotation regenerates and its dependants follow",
			data: allKinds(),
			in:   FillInput{Current: complete(), Regenerate: []string{"pw", "id"}, Refs: map[string]string{"x": "copied"}},
			want: FillResult{
				Values:  m{"pw": zeroRandom8, "id": zeroUUID, "h": "bcrypt:" + zeroRandom8, "self": zeroRandom8},
				Changes: []Change{update("h"), rotate("id"), rotate("pw"), update("self")},
			},
		},
		{
			name: "rotating a missing key creates it",
			data: m{"pw": "<random:8>"},
			in:   FillInput{Regenerate: []string{"pw"}},
			want: FillResult{Values: m{"pw": zeroRandom8}, Changes: []Change{create("pw")}},
		},
		{
			name: "references follow their source, compared as strings",
			data: m{"x": "<ref:m/o#a>", "y": "<ref:m/o#b>", "z": "<ref:m/o#c>"},
			in:   FillInput{Current: m{"x": "old", "y": json.Number("42"), "z": true}, Refs: map[string]string{"x": "new", "y": "42", "z": "true"}},
			want: FillResult{Values: m{"x": "new"}, Changes: []Change{update("x")}},
		},
		{
			name: "a hash that stopped matching is rewritten",
			data: allKinds(),
			in:   FillInput{Current: with(complete(), "h", hashOld), Refs: map[string]string{"x": "copied"}},
			want: FillResult{Values: m{"h": "bcrypt:stored-pw"}, Changes: []Change{update("h")}},
		},
		{
			name: "a stored value that is no hash is rewritten",
			data: allKinds(),
			in:   FillInput{Current: with(complete(), "h", 12.0), Refs: map[string]string{"x": "copied"}},
			want: FillResult{Values: m{"h": "bcrypt:stored-pw"}, Changes: []Change{update("h")}},
		},
		{
			name: "a missing hash of a present source is created",
			data: allKinds(),
			in:   FillInput{Current: with(complete(), "h", nil), Refs: map[string]string{"x": "copied"}},
			want: FillResult{Values: m{"h": "bcrypt:stored-pw"}, Changes: []Change{create("h")}},
		},
		{
			name: "hash of a number, through its string",
			data: m{"pin": 1234.0, "h": "<bcrypt:pin>"},
			in:   FillInput{Current: m{"pin": json.Number("1234"), "h": hash1234}},
			want: FillResult{Values: m{}},
		},
		{
			name: "hash of a reference whose source changed",
			data: m{"x": "<ref:m/o#k>", "h": "<bcrypt:x>"},
			in:   FillInput{Current: m{"x": "old", "h": hashOld}, Refs: map[string]string{"x": "new"}},
			want: FillResult{Values: m{"x": "new", "h": "bcrypt:new"}, Changes: []Change{update("h"), update("x")}},
		},
		{
			name: "hash of a placeholder filled by hand",
			data: m{"ph": "", "h": "<bcrypt:ph>"},
			in:   FillInput{Current: m{"ph": "typed"}},
			want: FillResult{Values: m{"h": "bcrypt:typed"}, Changes: []Change{create("h")}},
		},
		{
			name: "chain of references to the own path, in dependency order",
			data: m{"a": "<ref:m/own#b>", "b": "<ref:m/own#c>", "c": "<random:8>", "d": "<bcrypt:a>"},
			in:   FillInput{},
			want: FillResult{Values: m{"a": zeroRandom8, "b": zeroRandom8, "c": zeroRandom8, "d": "bcrypt:" + zeroRandom8}, Changes: []Change{create("a"), create("b"), create("c"), create("d")}},
		},
		{
			name: "reference to a placeholder of the own path filled by hand",
			data: m{"ph": "", "c": "<ref:m/own#ph>"},
			in:   FillInput{Current: m{"ph": "typed"}},
			want: FillResult{Values: m{"c": "typed"}, Changes: []Change{create("c")}},
		},
		{
			name: "new key next to hand-made keys of a map",
			data: m{"admin": m{"user": "admin"}},
			in:   FillInput{Current: m{"admin.other": "hand-made", "x": "y"}},
			want: FillResult{Values: m{"admin.user": "admin"}, Changes: []Change{create("admin.user")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Analyse(Object{Path: own, Data: tt.data})
			if a.Problems != nil {
				t.Fatalf("analysis: %v", a.Problems)
			}
			before := Flatten(tt.in.Current)
			got, err := fillGenerator().Fill(t.Context(), a, tt.in)
			if err != nil {
				t.Fatalf("Fill: %v", err)
			}
			normaliseHashes(a, got.Values, tt.want.Values)
			normalisePairs(t, a, got.Values)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Fill (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, Flatten(tt.in.Current)); diff != "" {
				t.Errorf("Fill changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestFillErrors(t *testing.T) {
	type m = map[string]any
	tests := []struct {
		name     string
		analysis Analysis // when Leaves is nil: Analyse(data)
		data     m
		gen      Generator
		in       FillInput
		wantErr  string
	}{
		{name: "analysis with problems", data: m{"a": nil, "b": "<hex:3>"}, wantErr: "templating: Fill needs an analysis without problems, this one has 2"},
		{name: "regenerate a plain key", data: m{"a": "x"}, in: FillInput{Regenerate: []string{"a"}}, wantErr: "templating: cannot regenerate a: not a generated key of the object"},
		{name: "regenerate an undeclared key", data: m{"a": "x"}, in: FillInput{Regenerate: []string{"b"}}, wantErr: "templating: cannot regenerate b: not a generated key of the object"},
		{name: "randomness fails", data: m{"a": "<uuid>"}, gen: Generator{Rand: &bytesThenFail{}}, wantErr: "templating: reading randomness: broken reader"},
		{name: "bcrypt fails", data: m{"pw": "x", "h": "<bcrypt:pw>"}, gen: Generator{BcryptCost: 40}, wantErr: "templating: bcrypt: crypto/bcrypt: cost 40 is outside allowed inclusive range 4..31"},
		{name: "leaf of no kind", analysis: Analysis{Leaves: map[string]Leaf{"a": {}}}, wantErr: "templating: unknown leaf kind  at a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.analysis
			if a.Leaves == nil {
				a = Analyse(Object{Path: own, Data: tt.data})
			}
			g := tt.gen
			if g.Rand == nil {
				g.Rand = constReader(0)
			}
			got, err := g.Fill(t.Context(), a, tt.in)
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(FillResult{}, got); diff != "" {
				t.Errorf("result with an error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFillHoldsBackKeysThatCannotBeComputed: a key that cannot be computed
// is held back with its error and the other keys are still filled (issue
// 12, "A stall on one key does not freeze the path").
func TestFillHoldsBackKeysThatCannotBeComputed(t *testing.T) {
	type m = map[string]any
	tests := []struct {
		name       string
		data       m
		in         FillInput
		wantValues m
		wantHeld   []Held
	}{
		{name: "hash of a placeholder not filled in, on a new path", data: m{"ph": "", "h": "<bcrypt:ph>", "u": "admin"},
			wantValues: m{"ph": "", "u": "admin"}, wantHeld: []Held{{"h", &EmptySourceError{Key: "h", Source: "ph"}}}},
		{name: "hash of an emptied key", data: m{"pw": "<random:8>", "h": "<bcrypt:pw>"}, in: FillInput{Current: m{"pw": ""}},
			wantValues: m{}, wantHeld: []Held{{"h", &EmptySourceError{Key: "h", Source: "pw"}}}},
		{name: "reference not resolved, a deleted key still comes back", data: m{"x": "<ref:m/o#k>", "g": "<hex:4>"}, in: FillInput{Current: m{"x": "old"}},
			wantValues: m{"g": "0000"}, wantHeld: []Held{{"x", &EmptySourceError{Key: "x", Source: "m/o#k"}}}},
		{name: "reference resolved empty", data: m{"x": "<ref:m/o#k>"}, in: FillInput{Refs: map[string]string{"x": ""}},
			wantValues: m{}, wantHeld: []Held{{"x", &EmptySourceError{Key: "x", Source: "m/o#k"}}}},
		{name: "reference to an empty placeholder of the own path", data: m{"ph": "", "c": "<ref:m/own#ph>"},
			wantValues: m{"ph": ""}, wantHeld: []Held{{"c", &EmptySourceError{Key: "c", Source: "ph"}}}},
		{name: "hash of a value over 72 bytes", data: m{"pw": "", "h": "<bcrypt:pw>"}, in: FillInput{Current: m{"pw": strings.Repeat("s", 73)}},
			wantValues: m{}, wantHeld: []Held{{"h", &InvalidValueError{Key: "pw", Reason: "is longer than 72 bytes, the most bcrypt accepts"}}}},
		{name: "a value where the declared tree has a map", data: m{"admin": m{"user": "admin"}, "other": "x"}, in: FillInput{Current: m{"admin": "hand-made"}},
			wantValues: m{"other": "x"}, wantHeld: []Held{{"admin.user", &ShapeConflictError{Key: "admin.user", Conflict: "admin"}}}},
		{name: "a map where the declared tree has a value", data: m{"admin": "<uuid>"}, in: FillInput{Current: m{"admin.z": "1", "admin.b.c": "2"}},
			wantValues: m{}, wantHeld: []Held{{"admin", &ShapeConflictError{Key: "admin", Conflict: "admin.b.c"}}}},
		{name: "a key deriving from a held key that the path lacks is held too", data: m{"admin": m{"pw": "<hex:4>"}, "h": "<bcrypt:admin.pw>"}, in: FillInput{Current: m{"admin": "hand-made"}},
			wantValues: m{}, wantHeld: []Held{{"admin.pw", &ShapeConflictError{Key: "admin.pw", Conflict: "admin"}}, {"h", &EmptySourceError{Key: "h", Source: "admin.pw"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Analyse(Object{Path: own, Data: tt.data})
			if a.Problems != nil {
				t.Fatalf("analysis: %v", a.Problems)
			}
			got, err := Generator{Rand: constReader(0), BcryptCost: 4}.Fill(t.Context(), a, tt.in)
			if err != nil {
				t.Fatalf("Fill: %v", err)
			}
			if diff := cmp.Diff(tt.wantValues, got.Values); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHeld, got.Held, cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
			for _, h := range got.Held {
				if !holdable(h.Err) {
					t.Errorf("held %s with %T, not one of the per-key errors", h.Key, h.Err)
				}
			}
		})
	}
}

func TestFillUsesHashCache(t *testing.T) {
	a := Analyse(Object{Path: own, Data: map[string]any{"pw": "x", "h": "<bcrypt:pw>"}})
	g := fillGenerator()
	g.Cache = NewHashCache(constReader(3))
	in := FillInput{Object: "ns/o", Current: map[string]any{"pw": "secret", "h": mustHash(t, "secret")}}
	for i := range 3 {
		got, err := g.Fill(t.Context(), a, in)
		if err != nil {
			t.Fatal(err)
		}
		if got.Changes != nil {
			t.Errorf("resync %d changes %v", i, got.Changes)
		}
	}
	if g.Cache.Len() != 1 {
		t.Errorf("cache holds %d pairs, want 1", g.Cache.Len())
	}
}

// A hash Fill generates is recorded under its object and key, so the next
// resync does not bcrypt-compare it.
func TestFillRecordsGeneratedHash(t *testing.T) {
	a := Analyse(Object{Path: own, Data: map[string]any{"pw": "<random:12>", "h": "<bcrypt:pw>"}})
	g := fillGenerator()
	g.Cache = NewHashCache(constReader(3))
	got, err := g.Fill(t.Context(), a, FillInput{Object: "ns/o"})
	if err != nil {
		t.Fatal(err)
	}
	pw, h := got.Values["pw"].(string), got.Values["h"].(string)
	held := g.Cache.objects["ns/o"]
	if i := slotIndex(held, "h"); i < 0 || held[i].digest != g.Cache.digest(h, pw) {
		t.Errorf("the generated pair is not recorded under ns/o h (slots %d)", g.Cache.Len())
	}
}

// TestFillTakesCheckedPairs: a pair the caller knows to match costs no
// bcrypt compare; any other pair of the same key is compared (issue 25).
// fake is no bcrypt hash: a fill that kept it took it from Checked.
func TestFillTakesCheckedPairs(t *testing.T) {
	secret := mustHash(t, "secret")
	long := strings.Repeat("a", MaxBcryptInput+1)
	tests := []struct {
		name         string
		pw           string // the source's template
		current      map[string]any
		regenerate   []string
		checked      map[string]BcryptPair
		wantChanges  []Change
		wantHeld     []string
		wantCompares uint64
	}{
		{name: "the pair checked", pw: "x", current: map[string]any{"pw": "secret", "h": fake},
			checked: map[string]BcryptPair{"h": {fake, "secret"}}},
		{name: "the hash changed since", pw: "x", current: map[string]any{"pw": "secret", "h": secret},
			checked: map[string]BcryptPair{"h": {fake, "secret"}}, wantCompares: 1},
		{name: "the source changed since", pw: "x", current: map[string]any{"pw": "other", "h": secret},
			checked:     map[string]BcryptPair{"h": {secret, "secret"}},
			wantChanges: []Change{{Key: "h", Action: ActionUpdateField}}, wantCompares: 1},
		{name: "the source rotated by this fill", pw: "<random:8>", current: map[string]any{"pw": "secret", "h": fake},
			regenerate: []string{"pw"}, checked: map[string]BcryptPair{"h": {fake, "secret"}},
			wantChanges: []Change{{Key: "h", Action: ActionUpdateField}, {Key: "pw", Action: ActionRotate}}},
		{name: "a pair checked for another key", pw: "x", current: map[string]any{"pw": "secret", "h": secret},
			checked: map[string]BcryptPair{"other": {secret, "secret"}}, wantCompares: 1},
		{name: "no pair checked", pw: "x", current: map[string]any{"pw": "secret", "h": fake},
			wantChanges: []Change{{Key: "h", Action: ActionUpdateField}}, wantCompares: 1},
		{name: "a source over 72 bytes is held, checked or not", pw: "x", current: map[string]any{"pw": long, "h": fake},
			checked: map[string]BcryptPair{"h": {fake, long}}, wantHeld: []string{"h"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Analyse(Object{Path: own, Data: map[string]any{"pw": tt.pw, "h": "<bcrypt:pw>"}})
			g := fillGenerator()
			g.Cache = NewHashCache(constReader(3))
			got, err := g.Fill(t.Context(), a, FillInput{Object: "ns/o", Current: tt.current, Regenerate: tt.regenerate, Checked: tt.checked})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantChanges, got.Changes); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			var held []string
			for _, h := range got.Held {
				held = append(held, h.Key)
			}
			if diff := cmp.Diff(tt.wantHeld, held); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
			if n := g.Cache.Compares(); n != tt.wantCompares {
				t.Errorf("%d bcrypt compares, want %d", n, tt.wantCompares)
			}
		})
	}
}

// applyFill writes r into tree and returns the flattened result.
func applyFill(tree map[string]any, r FillResult) map[string]any {
	for k, v := range r.Values {
		SetPath(tree, k, v)
	}
	return Flatten(tree)
}

func TestFillIsQuietOnceApplied(t *testing.T) {
	data := allKinds()
	data["nested"] = map[string]any{"a": "<hex:8>", "b": map[string]any{"c": "<ref:m/own#nested.a>"}}
	a := Analyse(Object{Path: own, Data: data, Rotate: &Rotate{Token: "t"}})
	g := Generator{Rand: chacha(9), BcryptCost: bcrypt.MinCost}
	refs := map[string]string{"x": "copied"}
	tree := map[string]any{}
	first, err := g.Fill(t.Context(), a, FillInput{Refs: refs})
	if err != nil {
		t.Fatal(err)
	}
	current := applyFill(tree, first)
	if len(first.Changes) != len(a.Keys) {
		t.Errorf("first Fill changed %d keys, want all %d", len(first.Changes), len(a.Keys))
	}
	second, err := g.Fill(t.Context(), a, FillInput{Current: current, Refs: refs})
	if err != nil {
		t.Fatal(err)
	}
	if second.Changes != nil {
		t.Errorf("a resync changes %v", second.Changes)
	}
	// A rotation, applied, is quiet too, and everything derived followed.
	rotated, err := g.Fill(t.Context(), a, FillInput{Current: current, Regenerate: a.RotationKeys, Refs: refs})
	if err != nil {
		t.Fatal(err)
	}
	current = applyFill(tree, rotated)
	if current["self"] != current["pw"] || current["nested.b.c"] != current["nested.a"] {
		t.Errorf("references to the own path did not follow the rotation")
	}
	if pub, _ := AgePublic(current["as"].(string)); pub != current["ap"] {
		t.Errorf("age public did not follow the rotation")
	}
	if pub, _ := SSHPublic(current["ss"].(string)); pub != current["sp"] {
		t.Errorf("ssh public did not follow the rotation")
	}
	if bcrypt.CompareHashAndPassword([]byte(current["h"].(string)), []byte(current["pw"].(string))) != nil {
		t.Errorf("hash did not follow the rotation")
	}
	third, err := g.Fill(t.Context(), a, FillInput{Current: current, Refs: refs})
	if err != nil {
		t.Fatal(err)
	}
	if third.Changes != nil {
		t.Errorf("a resync after rotation changes %v", third.Changes)
	}
}

// TestFillNeverReplacesWhatFlattenHides: a key whose name has a dot (written
// by another tool, or by `vault kv patch P a.b=x`) and an empty map are not
// in Flatten's view of the path; Fill, given them as Hidden, creates no key
// in their place nor at the dotted key path a dotted name spells, and the
// tree written back with SetPath still holds every one of them.
func TestFillNeverReplacesWhatFlattenHides(t *testing.T) {
	type m = map[string]any
	conflict := func(k, c string) []Held { return []Held{{k, &ShapeConflictError{Key: k, Conflict: c}}} }
	tests := []struct {
		name       string
		data       m // declared
		path       m // on the path
		regenerate []string
		wantValues m
		wantHeld   []Held
	}{
		{name: "a leaf where the path holds a map of dotted keys only", data: m{"app": "<random:8>"},
			path:       m{"app": m{"spring.datasource.password": "typed"}},
			wantValues: m{}, wantHeld: conflict("app", `app."spring.datasource.password"`)},
		{name: "a leaf where a dotted key is deeper in the map", data: m{"app": "<random:8>", "other": "x"},
			path:       m{"app": m{"db": m{"spring.x": "typed"}}},
			wantValues: m{"other": "x"}, wantHeld: conflict("app", `app.db."spring.x"`)},
		{name: "a leaf where the map holds only an empty map", data: m{"app": "<random:8>"},
			path:       m{"app": m{"x": m{}}},
			wantValues: m{}, wantHeld: conflict("app", "app.x")},
		{name: "a leaf where a mixed map is: its visible key is named", data: m{"app": "<random:8>"},
			path:       m{"app": m{"name": "n", "spring.x": "typed"}},
			wantValues: m{}, wantHeld: conflict("app", "app.name")},
		{name: "a plain value where the path holds a map of dotted keys", data: m{"app": "plain"},
			path:       m{"app": m{"a.b": "typed"}},
			wantValues: m{}, wantHeld: conflict("app", `app."a.b"`)},
		{name: "a key that a dotted name at the top spells", data: m{"a": m{"b": "<hex:4>"}},
			path:       m{"a.b": "typed"},
			wantValues: m{}, wantHeld: conflict("a.b", `"a.b"`)},
		{name: "a key under the dotted key path of a dotted name", data: m{"a": m{"b": m{"c": "<hex:4>"}}},
			path:       m{"a.b": "typed"},
			wantValues: m{}, wantHeld: conflict("a.b.c", `"a.b"`)},
		{name: "a leaf above the dotted key path of a dotted name", data: m{"a": "<hex:4>"},
			path:       m{"a.b": "typed"},
			wantValues: m{}, wantHeld: conflict("a", `"a.b"`)},
		{name: "a key beside a dotted key in its map is created", data: m{"app": m{"pw": "<hex:4>"}},
			path:       m{"app": m{"spring.x": "typed"}},
			wantValues: m{"app.pw": "0000"}},
		{name: "a key elsewhere than a dotted name spells is created", data: m{"x": "<hex:4>", "a": m{"c": "<hex:4>"}},
			path:       m{"a.b": "typed"},
			wantValues: m{"x": "0000", "a.c": "0000"}},
		{name: "a leaf where the path holds an empty map takes its place", data: m{"app": "<hex:4>"},
			path:       m{"app": m{}},
			wantValues: m{"app": "0000"}},
		{name: "a key under an empty map fills it", data: m{"app": m{"pw": "<hex:4>"}},
			path:       m{"app": m{}},
			wantValues: m{"app.pw": "0000"}},
		{name: "a rotation rewrites the nested key, the dotted one beside it stays", data: m{"a": m{"b": "<hex:4>"}},
			path: m{"a": m{"b": "old"}, "a.b": "typed"}, regenerate: []string{"a.b"},
			wantValues: m{"a.b": "0000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Analyse(Object{Path: own, Data: tt.data, Rotate: rotateFor(tt.regenerate)})
			if a.Problems != nil {
				t.Fatalf("analysis: %v", a.Problems)
			}
			hidden := Hidden(tt.path)
			got, err := Generator{Rand: constReader(0), BcryptCost: 4}.Fill(t.Context(), a, FillInput{Current: Flatten(tt.path), Hidden: hidden, Regenerate: tt.regenerate})
			if err != nil {
				t.Fatalf("Fill: %v", err)
			}
			if diff := cmp.Diff(tt.wantValues, got.Values); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHeld, got.Held, cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
			// The tree written back keeps what Flatten hides, value for
			// value (an empty map that a key fills is no longer empty).
			tree := CloneTree(tt.path)
			for k, v := range got.Values {
				SetPath(tree, k, v)
			}
			want := hiddenValues(tt.path)
			for name := range want {
				for k := range got.Values {
					if k == name || strings.HasPrefix(k, name+".") {
						delete(want, name) // an empty map that the key took or filled
					}
				}
			}
			gotHidden := hiddenValues(tree)
			for name, v := range want {
				if diff := cmp.Diff(v, gotHidden[name]); diff != "" {
					t.Errorf("%s after the write (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

// rotateFor is a rotation of keys, nil without keys.
func rotateFor(keys []string) *Rotate {
	if len(keys) == 0 {
		return nil
	}
	return &Rotate{Token: "t", Keys: keys}
}

// hiddenValues is the value of each key of tree that Flatten hides, by its
// HiddenKey.Name for a dotted name and by its path for an empty map,
// found by a walk of its own.
func hiddenValues(tree map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			name := k
			if strings.Contains(k, ".") {
				name = `"` + k + `"`
			}
			if prefix != "" {
				name = prefix + "." + name
			}
			sub, isMap := v.(map[string]any)
			switch {
			case strings.Contains(k, "."), isMap && len(sub) == 0:
				out[name] = v
			case isMap:
				walk(name, sub)
			}
		}
	}
	walk("", tree)
	return out
}

func TestDerivesFrom(t *testing.T) {
	a := Analyse(Object{Path: own, Data: map[string]any{
		"pw": "<random:8>", "h": "<bcrypt:pw>", "self": "<ref:m/own#pw>", "other": "<ref:m/other#k>",
		"as": "<age:secret>", "ap": "<age:public>", "ss": "<ssh:private>", "sp": "<ssh:public>", "plain": "x",
	}})
	if a.Problems != nil {
		t.Fatalf("analysis: %v", a.Problems)
	}
	want := map[string]string{"h": "pw", "self": "pw", "ap": "as", "sp": "ss"}
	for _, k := range a.Keys {
		if got := a.DerivesFrom(k); got != want[k] {
			t.Errorf("DerivesFrom(%s) = %q, want %q", k, got, want[k])
		}
	}
}
