package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ohmlab/ohmlab-controller/planner/plantest"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/bcrypt"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/templating/keypairtest"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// The shared fixtures, under this file's names.
type m = plantest.M

const (
	testNamespace  = plantest.Namespace
	testName       = plantest.Name
	testOwner      = plantest.Owner
	otherOwner     = plantest.OtherOwner
	ownPath        = plantest.OwnPath
	pgPath         = plantest.PgPath
	pgRef          = plantest.PgRef
	ownerKey       = plantest.OwnerKey
	tokenKey       = plantest.TokenKey
	storedPassword = plantest.StoredPassword
	storedClient   = plantest.StoredClient
)

var (
	keycloak     = plantest.Keycloak
	keycloakKeys = plantest.KeycloakKeys
	seeded       = plantest.Seeded
	deepCopy     = plantest.DeepCopy
	md           = plantest.MD
	ours         = plantest.Ours
	handMade     = plantest.HandMade
)

// constReader is an endless stream of one byte: every generated value is a
// pure function of its template (<random:N> of byte 0 is N times "A").
type constReader byte

func (c constReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}

type failingReader struct{}

var errNoRandomness = errors.New("no randomness")

func (failingReader) Read([]byte) (int, error) { return 0, errNoRandomness }

// testGen is the generator of the table tests: deterministic, cheap bcrypt.
func testGen() templating.Generator {
	return templating.Generator{Rand: constReader(0), BcryptCost: bcrypt.MinCost}
}

// chachaGen draws realistic random values, the same for the same seed.
func chachaGen(seed byte) templating.Generator {
	var s [32]byte
	s[0] = seed
	return templating.Generator{Rand: rand.NewChaCha8(s), BcryptCost: bcrypt.MinCost}
}

// generated is the value constReader(b) gives template: exact for
// <random:N>, <hex:N> and <uuid>; a fresh one for a private key
// (crypto/rand).
func generated(t testing.TB, b byte, template string) string {
	t.Helper()
	l, err := templating.ParseLeaf(template)
	if err != nil {
		t.Fatal(err)
	}
	v, err := templating.Generator{Rand: constReader(b)}.Generate(l)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustBcrypt(t testing.TB, src string) string {
	t.Helper()
	h, err := testGen().Bcrypt(src)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// publicKey is the public key of a private key of either key pair.
func publicKey(private string) (string, error) {
	if p, err := templating.AgePublic(private); err == nil {
		return p, nil
	}
	return templating.SSHPublic(private)
}

func mustPublicKey(t testing.TB, private string) string {
	t.Helper()
	p, err := publicKey(private)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Markers of an expected Data tree for values that do not come from
// Generator.Rand (bcrypt salts and private keys read crypto/rand):
// normaliseDerived replaces a got value that fits the marker by the marker.
//
// hashOf(src): a bcrypt hash of src.
func hashOf(src string) string { return "bcrypt-of:" + src }

// newPrivateKey(old): a valid private key of a key pair other than old.
func newPrivateKey(old string) string { return "private-key-other-than:" + old }

// publicKeyOf(key): the public key of the private key got holds at key.
func publicKeyOf(key string) string { return "public-key-of:" + key }

func normaliseDerived(got, want map[string]any) {
	if got == nil || want == nil {
		return
	}
	gf := templating.Flatten(got)
	for k, w := range templating.Flatten(want) {
		ws, _ := w.(string)
		gs, ok := gf[k].(string)
		if !ok {
			continue
		}
		fits := false
		switch {
		case strings.HasPrefix(ws, "bcrypt-of:"):
			fits = bcrypt.CompareHashAndPassword([]byte(gs), []byte(strings.TrimPrefix(ws, "bcrypt-of:"))) == nil
		case strings.HasPrefix(ws, "private-key-other-than:"):
			_, err := publicKey(gs)
			fits = err == nil && gs != strings.TrimPrefix(ws, "private-key-other-than:")
		case strings.HasPrefix(ws, "public-key-of:"):
			src, _ := gf[strings.TrimPrefix(ws, "public-key-of:")].(string)
			pub, err := publicKey(src)
			fits = err == nil && gs == pub
		}
		if fits {
			templating.SetPath(got, k, ws)
		}
	}
}

// spec is what a VaultSeed declares, as the tests write it.
type spec struct {
	data    m
	rotate  *templating.Rotate
	prune   bool
	managed []string
	// writtenAt is the version of the controller's last write of each
	// managed key; nil means the path's current version (nothing changed
	// since the controller wrote it).
	writtenAt map[string]int
}

func desired(t testing.TB, s spec) Desired {
	t.Helper()
	a := templating.Analyse(templating.Object{Namespace: testNamespace, Name: testName, Path: ownPath, Data: s.data, Rotate: s.rotate})
	if len(a.Problems) > 0 {
		t.Fatalf("test object has problems: %v", a.Problems)
	}
	d := Desired{Owner: testOwner, Analysis: a, Prune: s.prune, ManagedKeys: s.managed, WrittenAt: s.writtenAt, Now: testNow,
		Period: a.RotationPeriod}
	if s.rotate != nil {
		d.RotationToken = s.rotate.Token
	}
	return d
}

// testNow is the planner's clock in the table tests, and testNowText the
// time a rotation planned at it records.
var (
	testNow     = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	testNowText = "2026-12-01T09:30:00Z"
)

// observe is what the planner reads in a test: the path, its sources, and
// the versions a prune compares with: the path's own one, and written. A
// spec without writtenAt has its managed keys written at the path's
// version.
func observe(d *Desired, path *vaultkv.Secret, refs map[string]*vaultkv.Secret, written map[int]*vaultkv.Secret) Observed {
	o := Observed{Path: path, Refs: refs, Written: map[int]*vaultkv.Secret{}}
	for v, s := range written {
		o.Written[v] = s
	}
	if path != nil {
		o.Written[path.Version] = path
		if d.WrittenAt == nil {
			d.WrittenAt = map[string]int{}
			for _, k := range d.ManagedKeys {
				d.WrittenAt[k] = path.Version
			}
		}
	}
	return o
}

func pgSecret(v any) *vaultkv.Secret {
	return &vaultkv.Secret{Exists: true, Version: 2, Data: m{"users": m{"keycloak": m{"password": v}}}}
}

func act(name, key string) Action { return Action{Name: name, Key: key} }

func create(key string) Action { return act(ActionCreateField, key) }
func update(key string) Action { return act(ActionUpdateField, key) }
func rotate(key string) Action { return act(ActionRotate, key) }
func prune(key string) Action  { return act(ActionDeleteField, key) }

var (
	actCreate      = act(ActionCreate, "")
	actAdopt       = act(ActionAdopt, "")
	actRecordToken = act(ActionRecordToken, "")
)

type planCase struct {
	name    string
	spec    spec
	path    *vaultkv.Secret
	refs    map[string]*vaultkv.Secret
	written map[int]*vaultkv.Secret
	// landedToken is Observed.LandedToken, landedRotatedAt
	// Observed.LandedRotatedAt.
	landedToken, landedRotatedAt string
	// landedAt is Observed.LandedAt.
	landedAt int
	want     Plan
}

func runPlanCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := desired(t, tc.spec)
			o := observe(&d, tc.path, tc.refs, tc.written)
			o.LandedToken, o.LandedRotatedAt, o.LandedAt = tc.landedToken, tc.landedRotatedAt, tc.landedAt
			got, err := decide(t.Context(), d, o, testGen())
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			normaliseDerived(got.Data, tc.want.Data)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	rnd16 := generated(t, 0, "<random:16>")
	rnd24 := generated(t, 0, "<random:24>")
	rnd32 := generated(t, 0, "<random:32>")
	hashStored := mustBcrypt(t, storedPassword)

	fresh := m{
		"admin":   m{"username": "admin", "password": rnd24, "passwordHashed": hashOf(rnd24)},
		"clients": m{"grafana-core": m{"clientSecret": rnd32}},
		"webhook": "",
	}
	createAll := []Action{create("admin.password"), create("admin.passwordHashed"), create("admin.username"), create("clients.grafana-core.clientSecret"), create("webhook")}
	rotation := &templating.Rotate{Token: "2026-10-12", Keys: []string{"admin.password"}}

	runPlanCases(t, []planCase{
		{
			name: "absent path: create with owner marker, every declared key, CAS 0",
			spec: spec{data: keycloak()},
			path: &vaultkv.Secret{},
			want: Plan{
				Actions:     append([]Action{actCreate}, createAll...),
				Mark:        md(ownerKey, testOwner),
				Data:        fresh,
				CAS:         0,
				ManagedKeys: keycloakKeys,
			},
		},
		{
			name: "nil observed path is absent",
			spec: spec{data: keycloak()},
			path: nil,
			want: Plan{
				Actions:     append([]Action{actCreate}, createAll...),
				Mark:        md(ownerKey, testOwner),
				Data:        fresh,
				ManagedKeys: keycloakKeys,
			},
		},
		{
			name: "absent path with metadata but no version (an earlier Mark) is created again",
			spec: spec{data: keycloak()},
			path: &vaultkv.Secret{CustomMetadata: md(ownerKey, testOwner, tokenKey, "old")},
			want: Plan{
				Actions:     append([]Action{actCreate}, createAll...),
				Mark:        md(ownerKey, testOwner),
				Data:        fresh,
				ManagedKeys: keycloakKeys,
			},
		},
		{
			name: "absent path with rotate.token: the token is recorded in Mark, nothing rotates",
			spec: spec{data: keycloak(), rotate: rotation},
			path: &vaultkv.Secret{},
			want: Plan{
				Actions:     append([]Action{actCreate}, createAll...),
				Mark:        md(ownerKey, testOwner, tokenKey, "2026-10-12"),
				Data:        fresh,
				ManagedKeys: keycloakKeys,
			},
		},
		{
			name: "rotation with a nonexistent path (nil) does not rotate",
			spec: spec{data: keycloak(), rotate: &templating.Rotate{Token: "t1"}},
			path: nil,
			want: Plan{
				Actions:     append([]Action{actCreate}, createAll...),
				Mark:        md(ownerKey, testOwner, tokenKey, "t1"),
				Data:        fresh,
				ManagedKeys: keycloakKeys,
			},
		},
		{
			name: "absent path with plain values of every type: created as declared",
			spec: spec{data: m{"port": json.Number("8080"), "tls": true, "ratio": 0.5, "host": "db.local"}},
			path: &vaultkv.Secret{},
			want: Plan{
				Actions:     []Action{actCreate, create("host"), create("port"), create("ratio"), create("tls")},
				Mark:        md(ownerKey, testOwner),
				Data:        m{"port": json.Number("8080"), "tls": true, "ratio": 0.5, "host": "db.local"},
				ManagedKeys: []string{"host", "port", "ratio", "tls"},
			},
		},
		{
			name: "existing unowned complete path: adopt writes the Mark only, data untouched",
			spec: spec{data: keycloak()},
			path: handMade(7, seeded(hashStored, "webhook", "https://hooks.example/typed")),
			want: Plan{
				Actions: []Action{actAdopt},
				Mark:    md(ownerKey, testOwner),
				CAS:     7,
			},
		},
		{
			name: "existing unowned path missing keys: adopt, create only the missing keys, CAS = version read",
			spec: spec{data: keycloak()},
			path: handMade(3, m{"admin": m{"username": "root", "password": "typed-by-hand"}, "legacy": "kept"}),
			want: Plan{
				Actions: []Action{actAdopt, create("admin.passwordHashed"), create("clients.grafana-core.clientSecret"), create("webhook")},
				Mark:    md(ownerKey, testOwner),
				Data: m{
					"admin":   m{"username": "root", "password": "typed-by-hand", "passwordHashed": hashOf("typed-by-hand")},
					"clients": m{"grafana-core": m{"clientSecret": rnd32}},
					"webhook": "",
					"legacy":  "kept",
				},
				CAS:         3,
				ManagedKeys: []string{"admin.passwordHashed", "clients.grafana-core.clientSecret", "webhook"},
			},
		},
		{
			name: "existing unowned path with rotate.token set: adopt and record the token, no rotation",
			spec: spec{data: keycloak(), rotate: rotation},
			path: handMade(4, seeded(hashStored)),
			want: Plan{
				Actions: []Action{actAdopt},
				Mark:    md(ownerKey, testOwner, tokenKey, "2026-10-12"),
				CAS:     4,
			},
		},
		{
			name: "owned by us and complete: quiet resync, empty plan, nil Data, nil Mark",
			spec: spec{data: keycloak(), managed: keycloakKeys},
			path: ours(5, seeded(hashStored)),
			want: Plan{CAS: 5, ManagedKeys: keycloakKeys},
		},
		{
			name: "a hand-edited generated value is kept",
			spec: spec{data: keycloak(), managed: keycloakKeys},
			path: ours(5, seeded(hashStored, "clients.grafana-core.clientSecret", "edited-by-hand")),
			want: Plan{CAS: 5, ManagedKeys: keycloakKeys},
		},
		{
			name: "a hand-edited plain value is kept",
			spec: spec{data: keycloak(), managed: keycloakKeys},
			path: ours(5, seeded(hashStored, "admin.username", "root")),
			want: Plan{CAS: 5, ManagedKeys: keycloakKeys},
		},
		{
			name: "a plain value edited to another type is kept",
			spec: spec{data: m{"port": json.Number("8080")}, managed: []string{"port"}},
			path: ours(5, m{"port": "not a number"}),
			want: Plan{CAS: 5, ManagedKeys: []string{"port"}},
		},
		{
			name: "a placeholder filled by a person is kept",
			spec: spec{data: keycloak(), managed: keycloakKeys},
			path: ours(5, seeded(hashStored, "webhook", "https://hooks.example/typed")),
			want: Plan{CAS: 5, ManagedKeys: keycloakKeys},
		},
		{
			name: "changing a template does not touch the existing value",
			spec: spec{data: m{"pw": "<random:64>"}, managed: []string{"pw"}},
			path: ours(5, m{"pw": "short"}),
			want: Plan{CAS: 5, ManagedKeys: []string{"pw"}},
		},
		{
			name: "a deleted generated key comes back with a new value",
			spec: spec{data: keycloak(), managed: keycloakKeys},
			path: ours(5, seeded(hashStored, "clients", nil)),
			want: Plan{
				Actions:     []Action{create("clients.grafana-core.clientSecret")},
				Data:        seeded(hashStored, "clients.grafana-core.clientSecret", rnd32),
				CAS:         5,
				ManagedKeys: keycloakKeys,
			},
		},
		{
			name: "a deleted plain key and placeholder come back as declared",
			spec: spec{data: keycloak(), managed: keycloakKeys},
			path: ours(5, seeded(hashStored, "admin.username", nil, "webhook", nil)),
			want: Plan{
				Actions:     []Action{create("admin.username"), create("webhook")},
				Data:        seeded(hashStored),
				CAS:         5,
				ManagedKeys: keycloakKeys,
			},
		},
		{
			name: "a deleted generated key that a hash derives from: both are rewritten",
			spec: spec{data: keycloak(), managed: keycloakKeys},
			path: ours(5, seeded(hashStored, "admin.password", nil)),
			want: Plan{
				Actions:     []Action{create("admin.password"), update("admin.passwordHashed")},
				Data:        seeded(hashOf(rnd24), "admin.password", rnd24),
				CAS:         5,
				ManagedKeys: keycloakKeys,
			},
		},
		{
			name: "a bcrypt hash that matches its source stays (no new salt)",
			spec: spec{data: m{"pw": "", "hash": "<bcrypt:pw>"}, managed: []string{"hash", "pw"}},
			path: ours(5, m{"pw": storedPassword, "hash": hashStored}),
			want: Plan{CAS: 5, ManagedKeys: []string{"hash", "pw"}},
		},
		{
			name: "a bcrypt hash is rewritten when its source was edited by hand",
			spec: spec{data: keycloak(), managed: keycloakKeys},
			path: ours(5, seeded(hashStored, "admin.password", "edited-by-hand")),
			want: Plan{
				Actions:     []Action{update("admin.passwordHashed")},
				Data:        seeded(hashOf("edited-by-hand"), "admin.password", "edited-by-hand"),
				CAS:         5,
				ManagedKeys: keycloakKeys,
			},
		},
		{
			// vault kv patch P admin.password=x writes a top-level key
			// named "admin.password": not the nested key, and not ours.
			name: "a dotted key written by hand beside the nested one is neither read nor touched",
			spec: spec{data: m{"admin": m{"password": "", "hash": "<bcrypt:admin.password>"}, "copy": "<ref:" + ownPath + "#admin.password>"}, managed: []string{"admin.hash", "admin.password", "copy"}},
			path: ours(5, m{"admin": m{"password": storedPassword, "hash": hashStored}, "copy": storedPassword, "admin.password": "typed-flat"}),
			want: Plan{CAS: 5, ManagedKeys: []string{"admin.hash", "admin.password", "copy"}},
		},
		{
			name: "a bcrypt key holding something else than a hash is rewritten",
			spec: spec{data: keycloak(), managed: keycloakKeys},
			path: ours(5, seeded(hashStored, "admin.passwordHashed", storedPassword)),
			want: Plan{
				Actions:     []Action{update("admin.passwordHashed")},
				Data:        seeded(hashOf(storedPassword)),
				CAS:         5,
				ManagedKeys: keycloakKeys,
			},
		},
		{
			name: "a missing bcrypt of a placeholder filled by hand is created",
			spec: spec{data: m{"pw": "", "hash": "<bcrypt:pw>"}, managed: []string{"pw"}},
			path: ours(5, m{"pw": "typed-by-hand"}),
			want: Plan{
				Actions:     []Action{create("hash")},
				Data:        m{"pw": "typed-by-hand", "hash": hashOf("typed-by-hand")},
				CAS:         5,
				ManagedKeys: []string{"hash", "pw"},
			},
		},
		{
			name: "ref copy differs: update-field with the source value",
			spec: spec{data: m{"db": m{"user": "keycloak", "password": "<ref:" + pgRef + ">"}}, managed: []string{"db.password", "db.user"}},
			path: ours(5, m{"db": m{"user": "keycloak", "password": "edited-copy"}}),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source")},
			want: Plan{
				Actions:     []Action{update("db.password")},
				Data:        m{"db": m{"user": "keycloak", "password": "pg-source"}},
				CAS:         5,
				ManagedKeys: []string{"db.password", "db.user"},
			},
		},
		{
			name: "ref copy missing: create-field with the source value",
			spec: spec{data: m{"db": m{"password": "<ref:" + pgRef + ">"}}},
			path: ours(5, m{"other": "x"}),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source")},
			want: Plan{
				Actions:     []Action{create("db.password")},
				Data:        m{"db": m{"password": "pg-source"}, "other": "x"},
				CAS:         5,
				ManagedKeys: []string{"db.password"},
			},
		},
		{
			name: "ref copy equal to its source, compared as strings: nothing",
			spec: spec{data: m{"db": m{"password": "<ref:" + pgRef + ">"}}, managed: []string{"db.password"}},
			path: ours(5, m{"db": m{"password": "1234"}}),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret(json.Number("1234"))},
			want: Plan{CAS: 5, ManagedKeys: []string{"db.password"}},
		},
		{
			name: "absent path with a resolved ref: the copy is created",
			spec: spec{data: m{"db": m{"password": "<ref:" + pgRef + ">"}}},
			path: &vaultkv.Secret{},
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source")},
			want: Plan{
				Actions:     []Action{actCreate, create("db.password")},
				Mark:        md(ownerKey, testOwner),
				Data:        m{"db": m{"password": "pg-source"}},
				ManagedKeys: []string{"db.password"},
			},
		},
		{
			name: "a reference to the own path copies the value created in the same plan",
			spec: spec{data: m{"db": m{"password": "<random:16>"}, "jdbc": m{"password": "<ref:" + ownPath + "#db.password>"}}},
			path: &vaultkv.Secret{},
			want: Plan{
				Actions:     []Action{actCreate, create("db.password"), create("jdbc.password")},
				Mark:        md(ownerKey, testOwner),
				Data:        m{"db": m{"password": rnd16}, "jdbc": m{"password": rnd16}},
				ManagedKeys: []string{"db.password", "jdbc.password"},
			},
		},
		{
			name: "a hand-edited copy of the own path is put back",
			spec: spec{data: m{"db": m{"password": "<random:16>"}, "jdbc": m{"password": "<ref:" + ownPath + "#db.password>"}}, managed: []string{"db.password", "jdbc.password"}},
			path: ours(5, m{"db": m{"password": "kept-password"}, "jdbc": m{"password": "edited"}}),
			want: Plan{
				Actions:     []Action{update("jdbc.password")},
				Data:        m{"db": m{"password": "kept-password"}, "jdbc": m{"password": "kept-password"}},
				CAS:         5,
				ManagedKeys: []string{"db.password", "jdbc.password"},
			},
		},
		{
			name: "rotation: token differs, the rotation keys rotate, their hash follows, the token is recorded",
			spec: spec{data: keycloak(), rotate: rotation, managed: keycloakKeys},
			path: ours(5, seeded(hashStored), tokenKey, "2026-01-01"),
			want: Plan{
				Actions:         []Action{update("admin.passwordHashed"), rotate("admin.password"), actRecordToken},
				Data:            seeded(hashOf(rnd24), "admin.password", rnd24),
				CAS:             5,
				RecordToken:     "2026-10-12",
				RecordRotatedAt: testNowText,
				ManagedKeys:     keycloakKeys,
			},
		},
		{
			name: "rotation without keys rotates every generated key, never plain ones",
			spec: spec{data: keycloak(), rotate: &templating.Rotate{Token: "t2"}, managed: keycloakKeys},
			path: ours(5, seeded(hashStored, "webhook", "https://hooks.example/typed"), tokenKey, "t1"),
			want: Plan{
				Actions: []Action{update("admin.passwordHashed"), rotate("admin.password"), rotate("clients.grafana-core.clientSecret"), actRecordToken},
				Data: seeded(hashOf(rnd24), "admin.password", rnd24, "clients.grafana-core.clientSecret", rnd32,
					"webhook", "https://hooks.example/typed"),
				CAS:             5,
				RecordToken:     "t2",
				RecordRotatedAt: testNowText,
				ManagedKeys:     keycloakKeys,
			},
		},
		{
			name:        "rotation whose write landed with its token left to record: the token is recorded, nothing rotates again",
			spec:        spec{data: keycloak(), rotate: rotation, managed: keycloakKeys},
			path:        ours(6, seeded(hashStored), tokenKey, "2026-01-01"),
			landedToken: "2026-10-12",
			want: Plan{
				Actions:         []Action{actRecordToken},
				CAS:             6,
				RecordToken:     "2026-10-12",
				RecordRotatedAt: testNowText,
				ManagedKeys:     keycloakKeys,
			},
		},
		{
			name: "rotation: token equal to the recorded one does nothing",
			spec: spec{data: keycloak(), rotate: rotation, managed: keycloakKeys},
			path: ours(6, seeded(hashStored), tokenKey, "2026-10-12"),
			want: Plan{CAS: 6, ManagedKeys: keycloakKeys},
		},
		{
			name: "rotation of a key deleted by hand creates it (create-field, not rotate) and records the token",
			spec: spec{data: keycloak(), rotate: rotation, managed: keycloakKeys},
			path: ours(5, seeded(hashStored, "admin.password", nil), tokenKey, "t0"),
			want: Plan{
				Actions:         []Action{create("admin.password"), update("admin.passwordHashed"), actRecordToken},
				Data:            seeded(hashOf(rnd24), "admin.password", rnd24),
				CAS:             5,
				RecordToken:     "2026-10-12",
				RecordRotatedAt: testNowText,
				ManagedKeys:     keycloakKeys,
			},
		},
		{
			name: "rotation of an object without generated keys records the token only",
			spec: spec{data: m{"user": "admin"}, rotate: &templating.Rotate{Token: "t2"}, managed: []string{"user"}},
			path: ours(5, m{"user": "admin"}, tokenKey, "t1"),
			want: Plan{
				Actions:         []Action{actRecordToken},
				CAS:             5,
				RecordToken:     "t2",
				RecordRotatedAt: testNowText,
				ManagedKeys:     []string{"user"},
			},
		},
		{
			name: "prune=true removes only managed keys no longer declared; a key written by someone else stays",
			spec: spec{data: keycloak(), prune: true, managed: append([]string{"legacy", "old.nested.key"}, keycloakKeys...)},
			path: ours(5, seeded(hashStored, "legacy", "written-by-us", "old.nested.key", "written-by-us", "extra", "written-by-someone")),
			want: Plan{
				Actions:     []Action{prune("legacy"), prune("old.nested.key")},
				Data:        seeded(hashStored, "extra", "written-by-someone"),
				CAS:         5,
				ManagedKeys: keycloakKeys,
			},
		},
		{
			name: "prune=false removes nothing and keeps the undeclared managed keys listed",
			spec: spec{data: keycloak(), managed: append([]string{"legacy"}, keycloakKeys...)},
			path: ours(5, seeded(hashStored, "legacy", "written-by-us", "extra", "written-by-someone")),
			want: Plan{CAS: 5, ManagedKeys: append(keycloakKeys[:4:4], "legacy", "webhook")},
		},
		{
			name: "prune=true with empty ManagedKeys (status lost) prunes nothing",
			spec: spec{data: keycloak(), prune: true},
			path: ours(5, seeded(hashStored, "legacy", "written-by-us")),
			want: Plan{CAS: 5},
		},
		{
			name: "prune=true does not prune a managed key that is still declared, nor one already gone",
			spec: spec{data: keycloak(), prune: true, managed: append([]string{"gone"}, keycloakKeys...)},
			path: ours(5, seeded(hashStored)),
			want: Plan{CAS: 5, ManagedKeys: keycloakKeys},
		},
		{
			name: "prune=true: a managed leaf replaced by a declared map is pruned and the map created",
			spec: spec{data: m{"smtp": m{"password": "<random:16>"}}, prune: true, managed: []string{"smtp"}},
			path: ours(5, m{"smtp": "written-by-us"}),
			want: Plan{
				Actions:     []Action{create("smtp.password"), prune("smtp")},
				Data:        m{"smtp": m{"password": rnd16}},
				CAS:         5,
				ManagedKeys: []string{"smtp.password"},
			},
		},
		{
			name: "prune=true: a managed map replaced by a declared leaf is pruned and the leaf created",
			spec: spec{data: m{"smtp": "<random:16>"}, prune: true, managed: []string{"smtp.password", "smtp.user"}},
			path: ours(5, m{"smtp": m{"password": "written-by-us", "user": "written-by-us"}}),
			want: Plan{
				Actions:     []Action{create("smtp"), prune("smtp.password"), prune("smtp.user")},
				Data:        m{"smtp": rnd16},
				CAS:         5,
				ManagedKeys: []string{"smtp"},
			},
		},
		{
			name: "ManagedKeys after the plan: written keys added, hand-deleted undeclared managed keys dropped",
			spec: spec{data: keycloak(), managed: []string{"admin.password", "admin.username", "stale.key"}},
			path: ours(5, seeded(hashStored, "admin.password", nil, "clients", nil)),
			want: Plan{
				Actions: []Action{create("admin.password"), create("clients.grafana-core.clientSecret"), update("admin.passwordHashed")},
				Data:    seeded(hashOf(rnd24), "admin.password", rnd24, "clients.grafana-core.clientSecret", rnd32),
				CAS:     5,
				// admin.passwordHashed is rewritten, so it is ours now;
				// webhook was never listed and is not written.
				ManagedKeys: []string{"admin.password", "admin.passwordHashed", "admin.username", "clients.grafana-core.clientSecret"},
			},
		},
	})
}

// TestPlanKeyPairs runs for each key pair: the pairs share one rule.
func TestPlanKeyPairs(t *testing.T) {
	for _, kind := range keypairtest.Kinds {
		t.Run(kind.Name, func(t *testing.T) { planKeyPair(t, kind.Private, kind.Public) })
	}
}

func planKeyPair(t *testing.T, private, public string) {
	// Private keys come from crypto/rand, not Generator.Rand: checked by
	// shape (a valid key, other than the stored one) and by pairing.
	oldSecret := generated(t, 0, private)
	oldPublic := mustPublicKey(t, oldSecret)
	otherPublic := mustPublicKey(t, generated(t, 0, private))
	newPublic := publicKeyOf("sops.secret")
	sops := func() m { return m{"sops": m{"secret": private, "public": public}} }
	keys := []string{"sops.public", "sops.secret"}

	runPlanCases(t, []planCase{
		{
			name: "absent path: the pair is created together",
			spec: spec{data: sops()},
			path: &vaultkv.Secret{},
			want: Plan{
				Actions:     []Action{actCreate, create("sops.public"), create("sops.secret")},
				Mark:        md(ownerKey, testOwner),
				Data:        m{"sops": m{"secret": newPrivateKey(""), "public": newPublic}},
				ManagedKeys: keys,
			},
		},
		{
			name: "the public follows a rotated private key",
			spec: spec{data: sops(), rotate: &templating.Rotate{Token: "t2", Keys: []string{"sops.secret"}}, managed: keys},
			path: ours(5, m{"sops": m{"secret": oldSecret, "public": oldPublic}}, tokenKey, "t1"),
			want: Plan{
				Actions:         []Action{update("sops.public"), rotate("sops.secret"), actRecordToken},
				Data:            m{"sops": m{"secret": newPrivateKey(oldSecret), "public": newPublic}},
				CAS:             5,
				RecordToken:     "t2",
				RecordRotatedAt: testNowText,
				ManagedKeys:     keys,
			},
		},
		{
			name: "a matching pair stays",
			spec: spec{data: sops(), managed: keys},
			path: ours(5, m{"sops": m{"secret": oldSecret, "public": oldPublic}}),
			want: Plan{CAS: 5, ManagedKeys: keys},
		},
		{
			name: "a hand-edited public is put back from the stored private key",
			spec: spec{data: sops(), managed: keys},
			path: ours(5, m{"sops": m{"secret": oldSecret, "public": otherPublic}}),
			want: Plan{
				Actions:     []Action{update("sops.public")},
				Data:        m{"sops": m{"secret": oldSecret, "public": oldPublic}},
				CAS:         5,
				ManagedKeys: keys,
			},
		},
		{
			name: "a pair no longer declared is pruned together",
			spec: spec{data: m{"user": "git"}, prune: true, managed: append([]string{"user"}, keys...)},
			path: ours(5, m{"user": "git", "sops": m{"secret": oldSecret, "public": oldPublic}}),
			want: Plan{
				Actions:     []Action{prune("sops.public"), prune("sops.secret")},
				Data:        m{"user": "git"},
				CAS:         5,
				ManagedKeys: []string{"user"},
			},
		},
		{
			name: "a hand-deleted private key comes back and takes a new public with it",
			spec: spec{data: sops(), managed: keys},
			path: ours(5, m{"sops": m{"public": oldPublic}}),
			want: Plan{
				Actions:     []Action{create("sops.secret"), update("sops.public")},
				Data:        m{"sops": m{"secret": newPrivateKey(oldSecret), "public": newPublic}},
				CAS:         5,
				ManagedKeys: keys,
			},
		},
	})
}

func TestPlanRefPending(t *testing.T) {
	clients := func() m {
		return m{
			"db":      m{"user": "keycloak", "password": "<ref:" + pgRef + ">"},
			"missing": "<random:8>",
		}
	}
	for _, tc := range []struct {
		name   string
		data   m
		rotate *templating.Rotate
		path   *vaultkv.Secret
		refs   map[string]*vaultkv.Secret
		want   string
	}{
		{
			name: "source path not read (absent from Refs)",
			data: clients(),
			path: &vaultkv.Secret{},
			want: "waiting for " + pgRef + " (path missing)",
		},
		{
			name: "source path missing",
			data: clients(),
			path: ours(5, m{"db": m{"user": "keycloak"}}),
			refs: map[string]*vaultkv.Secret{pgPath: {}},
			want: "waiting for " + pgRef + " (path missing)",
		},
		{
			name: "source key missing",
			data: clients(),
			path: ours(5, m{"db": m{"user": "keycloak"}}),
			refs: map[string]*vaultkv.Secret{pgPath: {Exists: true, Version: 1, Data: m{"users": m{"grafana": m{"password": "x1y2z3w4"}}}}},
			want: "waiting for " + pgRef + " (key missing)",
		},
		{
			name: "source key missing, a dotted key at the top of the source spells it",
			data: clients(),
			path: ours(5, m{"db": m{"user": "keycloak"}}),
			refs: map[string]*vaultkv.Secret{pgPath: {Exists: true, Version: 1, Data: m{"users.keycloak.password": "x1y2z3w4"}}},
			want: "waiting for " + pgRef + ` (key missing; the path has "users.keycloak.password", a key whose name has a dot, which is not the nested users.keycloak.password)`,
		},
		{
			name: "source key missing, a dotted key inside a map of the source spells it",
			data: clients(),
			path: ours(5, m{"db": m{"user": "keycloak"}}),
			refs: map[string]*vaultkv.Secret{pgPath: {Exists: true, Version: 1, Data: m{"users": m{"keycloak.password": "x1y2z3w4"}}}},
			want: "waiting for " + pgRef + ` (key missing; the path has users."keycloak.password", a key whose name has a dot, which is not the nested users.keycloak.password)`,
		},
		{
			name: "source key empty",
			data: clients(),
			path: ours(5, m{"db": m{"user": "keycloak"}}),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("")},
			want: "waiting for " + pgRef + " (empty)",
		},
		{
			name: "source latest version soft-deleted",
			data: clients(),
			path: ours(5, m{"db": m{"user": "keycloak"}}),
			refs: map[string]*vaultkv.Secret{pgPath: {Exists: true, Deleted: true, Version: 3}},
			want: "waiting for " + pgRef + " (latest version deleted)",
		},
		{
			name: "several sources: every one named, sorted, each once",
			data: m{
				"a":  "<ref:" + pgPath + "#users.a>",
				"a2": "<ref:" + pgPath + "#users.a>",
				"b":  "<ref:ohmlab/platforms/production/core/harbor#admin>",
				"ok": "<ref:" + pgRef + ">",
			},
			path: &vaultkv.Secret{},
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source")},
			want: "waiting for ohmlab/platforms/production/core/harbor#admin (path missing), " + pgPath + "#users.a (key missing)",
		},
		{
			name: "pending also on an unowned path: nothing planned, not even the adoption",
			data: clients(),
			path: handMade(5, m{"db": m{"user": "keycloak"}}),
			want: "waiting for " + pgRef + " (path missing)",
		},
		{
			name:   "pending takes precedence over a rotation",
			data:   clients(),
			rotate: &templating.Rotate{Token: "t2"},
			path:   ours(5, m{"db": m{"user": "keycloak"}}, tokenKey, "t1"),
			want:   "waiting for " + pgRef + " (path missing)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec{data: tc.data, rotate: tc.rotate, prune: true, managed: []string{"db.user", "gone"}}
			d := desired(t, s)
			got, err := decide(t.Context(), d, observe(&d, tc.path, tc.refs, nil), testGen())
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			// The copy is missing on the path: nothing is written and the
			// managed keys stay as they are, on a path this object owns.
			// An absent path this object wrote (it has managed keys) is
			// vanished, whatever the plan does.
			want := Plan{Outcome: OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending, Message: Text(tc.want), CAS: tc.path.Version, ManagedKeys: ownedOnly(tc.path, s.managed),
				Vanished: !tc.path.Exists}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// A plan that waits for the missing copy of a reference hashes nothing: it
// writes nothing, so a hash of a password made for it would be thrown away
// (issue 25: a dependent reconciled before its source's first write cost a
// bcrypt hash). Its generator cannot hash (a cost above bcrypt's maximum):
// a plan that hashes fails.
func TestPlanWaitingForACopyHashesNothing(t *testing.T) {
	noHash := testGen()
	noHash.BcryptCost = bcrypt.MaxCost + 1
	data := m{"password": "<random:24>", "hash": "<bcrypt:password>", "previous": "<ref:" + pgRef + ">"}
	for _, tc := range []struct {
		name string
		path *vaultkv.Secret
		// hashes: the plan writes a hash, so this generator fails it.
		hashes bool
	}{
		{name: "a new path, its copy missing", path: &vaultkv.Secret{}},
		{name: "an existing path without its copy", path: ours(5, m{"password": storedPassword})},
		{name: "the copy on the path: the rest is maintained, the hash made", path: ours(5, m{"previous": "old-copy"}), hashes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := desired(t, spec{data: data})
			got, err := decide(t.Context(), d, observe(&d, tc.path, nil, nil), noHash)
			if tc.hashes {
				if err == nil {
					t.Fatalf("plan: no error from a generator that cannot hash; got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			want := Plan{Outcome: OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending, Message: Text("waiting for " + pgRef + " (path missing)"), CAS: tc.path.Version}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanStop: a path only a person can unblock (owned by another object,
// latest version deleted) gets no action at all.
// ownedOnly is managed on a path that carries this object's owner marker,
// nil on any other: none of another path's values is the controller's.
func ownedOnly(path *vaultkv.Secret, managed []string) []string {
	if path.CustomMetadata[ownerKey] != testOwner {
		return nil
	}
	return managed
}

func TestPlanStop(t *testing.T) {
	ownedBy := "the path is owned by " + otherOwner + " (custom_metadata " + ownerKey + "): delete one of the two objects, or hand the path over with: vault kv metadata patch -remove-custom-metadata=" + ownerKey + " " + ownPath
	for _, tc := range []struct {
		name   string
		data   m
		path   *vaultkv.Secret
		reason string
		want   string
	}{
		{
			name:   "path owned by another object: no actions",
			data:   keycloak(),
			path:   &vaultkv.Secret{Exists: true, Version: 5, Data: seeded("x"), CustomMetadata: md(ownerKey, otherOwner)},
			reason: ohmlabv1alpha1.ReasonOwnedByAnother,
			want:   ownedBy,
		},
		{
			name:   "marker of another object on a path without versions",
			data:   keycloak(),
			path:   &vaultkv.Secret{CustomMetadata: md(ownerKey, otherOwner)},
			reason: ohmlabv1alpha1.ReasonOwnedByAnother,
			want:   ownedBy,
		},
		{
			name:   "latest version deleted: stop, nothing regenerated",
			data:   keycloak(),
			path:   &vaultkv.Secret{Exists: true, Deleted: true, Version: 9, CustomMetadata: md(ownerKey, testOwner)},
			reason: ohmlabv1alpha1.ReasonPathDeleted,
			want:   "the latest version (9) of the path is deleted: undelete it (vault kv undelete -versions=9 " + ownPath + "), or delete the path's metadata (vault kv metadata delete " + ownPath + ") to have it created anew",
		},
		{
			name:   "latest version deleted on an unowned path: stop before adopting",
			data:   keycloak(),
			path:   &vaultkv.Secret{Exists: true, Deleted: true, Version: 2},
			reason: ohmlabv1alpha1.ReasonPathDeleted,
			want:   "the latest version (2) of the path is deleted: undelete it (vault kv undelete -versions=2 " + ownPath + "), or delete the path's metadata (vault kv metadata delete " + ownPath + ") to have it created anew",
		},
		{
			name:   "owned by another takes precedence over a pending reference",
			data:   m{"x": "<ref:" + pgRef + ">"},
			path:   &vaultkv.Secret{Exists: true, Version: 5, CustomMetadata: md(ownerKey, otherOwner)},
			reason: ohmlabv1alpha1.ReasonOwnedByAnother,
			want:   ownedBy,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec{data: tc.data, prune: true, managed: []string{"a.c"}}
			d := desired(t, s)
			got, err := decide(t.Context(), d, observe(&d, tc.path, nil, nil), testGen())
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			want := Plan{Outcome: OutcomeStop, Reason: tc.reason, Message: Text(tc.want), CAS: tc.path.Version, ManagedKeys: ownedOnly(tc.path, s.managed),
				Vanished: !tc.path.Exists}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanHoldsBackOnlyKeysThatCannotBeComputed: a key only a person can
// unblock, or a reference whose copy exists and whose source is gone, holds
// back that key; the rest of the path is still maintained (issue 12, "A
// stall on one key does not freeze the path").
func TestPlanHoldsBackOnlyKeysThatCannotBeComputed(t *testing.T) {
	longValue := strings.Repeat("L", 73)
	badAge := "AGE-SECRET-KEY-NOT-REALLY"
	hex4 := generated(t, 0, "<hex:4>")
	stop := func(msg string) Plan {
		return Plan{Outcome: OutcomeStop, Reason: ohmlabv1alpha1.ReasonInvalidSpec, Message: Text(msg)}
	}
	with := func(p Plan, cas int, actions []Action, mark map[string]string, data m, managed ...string) Plan {
		p.CAS, p.Actions, p.Mark, p.Data, p.ManagedKeys = cas, actions, mark, data, managed
		return p
	}
	fillIn := `admin.passwordHashed: cannot be computed while admin.password is empty; fill it in (echo '{"admin":{"password":"..."}}' | vault kv patch ` + ownPath + ` -)`
	runPlanCases(t, []planCase{
		{
			name: "bcrypt of a \"\" placeholder on an absent path: the path is created with the placeholder, the hash left out",
			spec: spec{data: m{"admin": m{"password": "", "passwordHashed": "<bcrypt:admin.password>", "username": "admin"}}},
			path: &vaultkv.Secret{},
			want: with(stop(fillIn), 0, []Action{actCreate, create("admin.password"), create("admin.username")}, md(ownerKey, testOwner),
				m{"admin": m{"password": "", "username": "admin"}}, "admin.password", "admin.username"),
		},
		{
			name: "bcrypt of a placeholder still \"\" on the path: nothing else to do",
			spec: spec{data: m{"admin": m{"password": "", "passwordHashed": "<bcrypt:admin.password>"}}, managed: []string{"admin.password"}},
			path: ours(5, m{"admin": m{"password": ""}}),
			want: with(stop(fillIn), 5, nil, nil, nil, "admin.password"),
		},
		{
			name: "while stalled, a reference follows its source and a deleted key comes back",
			spec: spec{data: m{"pw": "", "h": "<bcrypt:pw>", "x": "<ref:" + pgRef + ">", "g": "<hex:4>"}, managed: []string{"g", "pw", "x"}},
			path: ours(5, m{"pw": "", "x": "old-copy"}),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source")},
			want: with(stop("h: cannot be computed while pw is empty; fill it in (vault kv patch "+ownPath+" pw=...)"), 5,
				[]Action{create("g"), update("x")}, nil, m{"pw": "", "x": "pg-source", "g": hex4}, "g", "pw", "x"),
		},
		{
			name: "bcrypt source longer than 72 bytes on the path",
			spec: spec{data: keycloak(), managed: keycloakKeys},
			path: ours(5, seeded("x", "admin.password", longValue)),
			want: with(stop("admin.passwordHashed: cannot be computed: the value of admin.password on the path is longer than 72 bytes, the most bcrypt accepts; "+
				`that value is kept (a value on the path is never overwritten): replace it (echo '{"admin":{"password":"..."}}' | vault kv patch `+ownPath+` -)`), 5, nil, nil, nil, keycloakKeys...),
		},
		{
			name: "stored age secret that does not parse",
			spec: spec{data: m{"sops": m{"secret": "<age:secret>", "public": "<age:public>"}}},
			path: ours(5, m{"sops": m{"secret": badAge}}),
			want: with(stop("sops.public: cannot be computed: the value of sops.secret on the path is not an age X25519 secret key (AGE-SECRET-KEY-1…); "+
				`that value is kept (a value on the path is never overwritten): replace it (echo '{"sops":{"secret":"..."}}' | vault kv patch `+ownPath+` -)`), 5, nil, nil, nil),
		},
		{
			name: "shape conflict: declared a.b where the path holds a string at a",
			spec: spec{data: m{"a": m{"b": "<random:8>"}}},
			path: ours(5, m{"a": "written-by-someone"}),
			want: with(stop("a.b: cannot be created without overwriting a on the path, which is kept (a value on the path is never overwritten): move or delete that key by hand, and the next resync creates a.b"), 5, nil, nil, nil),
		},
		{
			name: "shape conflict: declared leaf a where the path holds a map at a",
			spec: spec{data: m{"a": "<random:8>"}},
			path: ours(5, m{"a": m{"x": "written-by-someone", "y": "too"}}),
			want: with(stop("a: cannot be created without overwriting a.x on the path, which is kept (a value on the path is never overwritten): move or delete that key by hand, and the next resync creates a"), 5, nil, nil, nil),
		},
		{
			name: "shape conflict on a hand-made path: adopted, the conflicting key held back",
			spec: spec{data: m{"a": m{"b": "plain"}}},
			path: handMade(5, m{"a": "written-by-someone"}),
			want: with(stop("a.b: cannot be created without overwriting a on the path, which is kept (a value on the path is never overwritten): move or delete that key by hand, and the next resync creates a.b"), 5, []Action{actAdopt}, md(ownerKey, testOwner), nil),
		},
		{
			name: "a reference whose source key is a map: stalled on it, not waiting; the rest is written",
			spec: spec{data: m{"db": m{"user": "keycloak", "password": "<ref:" + pgPath + "#users>"}, "missing": "<hex:4>"}, managed: []string{"db.user"}},
			path: ours(5, m{"db": m{"user": "keycloak"}}),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source")},
			want: with(stop("db.password: <ref:"+pgPath+"#users> names users, which is a map on "+pgPath+", not a value: a reference copies one value; name one of its keys (<ref:"+pgPath+"#users.<key>>)"), 5,
				[]Action{create("missing")}, nil, m{"db": m{"user": "keycloak"}, "missing": hex4}, "db.user", "missing"),
		},
		{
			name: "a reference whose source key is an empty map: the same",
			spec: spec{data: m{"db": m{"password": "<ref:" + pgPath + "#users>"}}},
			path: &vaultkv.Secret{},
			refs: map[string]*vaultkv.Secret{pgPath: {Exists: true, Version: 1, Data: m{"users": m{}}}},
			want: with(stop("db.password: <ref:"+pgPath+"#users> names users, which is a map on "+pgPath+", not a value: a reference copies one value; name one of its keys (<ref:"+pgPath+"#users.<key>>)"), 0,
				[]Action{actCreate}, md(ownerKey, testOwner), m{}),
		},
		{
			name: "a reference whose copy exists waits for its source; the rest is maintained",
			spec: spec{data: m{"db": m{"user": "keycloak", "password": "<ref:" + pgRef + ">"}, "missing": "<hex:4>"}, managed: []string{"db.password", "db.user"}},
			path: ours(5, m{"db": m{"user": "keycloak", "password": "old-copy"}}),
			want: with(Plan{Outcome: OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending, Message: Text("waiting for " + pgRef + " (path missing)")}, 5,
				[]Action{create("missing")}, nil, m{"db": m{"user": "keycloak", "password": "old-copy"}, "missing": hex4}, "db.password", "db.user", "missing"),
		},
	})
}

// TestPlanKeepsKeysThatFlattenHides: a key whose name has a dot (written
// by another tool, or by `vault kv patch P a.b=x`) or an empty map is not in
// the planner's flattened view of the path; a declared key that would
// replace it, or stand at the dotted key path it spells, is held as a shape
// conflict, and every write the plan makes carries it back as it was.
func TestPlanKeepsKeysThatFlattenHides(t *testing.T) {
	rnd8 := generated(t, 0, "<random:8>")
	hex4 := generated(t, 0, "<hex:4>")
	shape := func(key, conflict string) string {
		return key + ": cannot be created without overwriting " + conflict + " on the path, which is kept (a value on the path is never overwritten): " +
			"move or delete that key by hand, and the next resync creates " + key
	}
	stop := func(msg string, p Plan) Plan {
		p.Outcome, p.Reason, p.Message = OutcomeStop, ohmlabv1alpha1.ReasonInvalidSpec, Text(msg)
		return p
	}
	typed := m{"spring.datasource.password": "typed"}
	runPlanCases(t, []planCase{
		{
			name: "declared leaf app where the path holds a map of dotted keys only: held, nothing written",
			spec: spec{data: m{"app": "<random:8>"}},
			path: ours(5, m{"app": typed}),
			want: stop(shape("app", `app."spring.datasource.password"`), Plan{CAS: 5}),
		},
		{
			name: "the same on a hand-made path: adopted, app held, the data left alone",
			spec: spec{data: m{"app": "<random:8>"}, prune: true},
			path: handMade(5, m{"app": typed}),
			want: stop(shape("app", `app."spring.datasource.password"`), Plan{CAS: 5, Actions: []Action{actAdopt}, Mark: md(ownerKey, testOwner)}),
		},
		{
			name: "a managed key pruned from under app: pruned, app held, the dotted key written back",
			spec: spec{data: m{"app": "<random:8>"}, prune: true, managed: []string{"app.x"}},
			path: ours(5, m{"app": m{"x": "written", "spring.datasource.password": "typed"}}),
			want: stop(shape("app", `app."spring.datasource.password"`), Plan{CAS: 5, Actions: []Action{prune("app.x")}, Data: m{"app": typed}}),
		},
		{
			name: "declared a.b where a dotted key at the top spells a.b: held",
			spec: spec{data: m{"a": m{"b": "<random:8>"}, "c": "<hex:4>"}},
			path: ours(5, m{"a.b": "typed"}),
			want: stop(shape("a.b", `"a.b"`), Plan{CAS: 5, Actions: []Action{create("c")}, Data: m{"a.b": "typed", "c": hex4}, ManagedKeys: []string{"c"}}),
		},
		{
			name: "declared leaf app where the map holds only an empty map: held",
			spec: spec{data: m{"app": "<random:8>"}},
			path: ours(5, m{"app": m{"x": m{}}}),
			want: stop(shape("app", "app.x"), Plan{CAS: 5}),
		},
		{
			name: "a copy and a hash of a key held by a conflict: stalled on that key alone, not waiting",
			spec: spec{data: m{"pw": "<random:8>", "h": "<bcrypt:pw>", "c": "<ref:" + ownPath + "#pw>"}},
			path: ours(5, m{"pw": m{"x.y": "typed"}}),
			want: stop(shape("pw", `pw."x.y"`), Plan{CAS: 5}),
		},
		{
			name: "every write carries the dotted keys back: create beside them, rotate, update a copy, prune",
			spec: spec{data: m{"app": m{"pw": "<random:8>"}, "gen": "<hex:4>", "copy": "<ref:" + pgRef + ">"},
				rotate: &templating.Rotate{Token: "t2", Keys: []string{"gen"}}, prune: true, managed: []string{"copy", "gen", "old"}},
			path: ours(5, m{"app": typed, "gen": "g0", "copy": "stale", "old": "o", "a.b": "typed", "m": m{"c.d": "typed", "e": m{}}}, tokenKey, "t1"),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source")},
			want: Plan{
				Actions:         []Action{create("app.pw"), update("copy"), prune("old"), rotate("gen"), actRecordToken},
				Data:            m{"app": m{"spring.datasource.password": "typed", "pw": rnd8}, "gen": hex4, "copy": "pg-source", "a.b": "typed", "m": m{"c.d": "typed", "e": m{}}},
				CAS:             5,
				RecordToken:     "t2",
				RecordRotatedAt: testNowText,
				ManagedKeys:     []string{"app.pw", "copy", "gen"},
			},
		},
	})
}

// TestPlanPruneKeepsWhatChangedSinceTheControllerWroteIt: prune removes a
// managed key only while its value is the one the controller wrote at its
// recorded version (product document, "Pruning"; issue 12), and says why it
// keeps the others (issue 23, item 2).
func TestPlanPruneKeepsWhatChangedSinceTheControllerWroteIt(t *testing.T) {
	data := m{"kept": "<random:8>"}
	current := m{"kept": "k", "gen": "value-3", "ph": "typed-by-a-person", "gone-version": "x"}
	v3 := ours(3, m{"kept": "k", "gen": "value-3", "ph": "", "gone-version": "x"})
	managed := []string{"gen", "gone-version", "kept", "ph"}
	runPlanCases(t, []planCase{
		{
			name:    "unchanged since written: pruned; filled in or edited by a person: kept and no longer managed",
			spec:    spec{data: data, prune: true, managed: managed, writtenAt: map[string]int{"gen": 3, "ph": 3, "kept": 3, "gone-version": 2}},
			path:    ours(7, current),
			written: map[int]*vaultkv.Secret{3: v3, 2: {Exists: true, Deleted: true, Version: 2}},
			want: Plan{
				Actions:     []Action{prune("gen")},
				Data:        m{"kept": "k", "ph": "typed-by-a-person", "gone-version": "x"},
				CAS:         7,
				ManagedKeys: []string{"kept"},
				Carried:     []string{"kept"},
				Kept:        []Kept{{Key: "gone-version", Why: "cannot tell: version 2 can no longer be read (deleted, destroyed or past max_versions)"}, {Key: "ph", Why: "changed since the controller wrote it"}},
			},
		},
		{
			name: "a version that can no longer be read keeps the key: the controller cannot tell",
			spec: spec{data: data, prune: true, managed: managed, writtenAt: map[string]int{"gen": 1, "ph": 1, "kept": 3, "gone-version": 1}},
			path: ours(7, current),
			want: Plan{CAS: 7, ManagedKeys: []string{"kept"}, Kept: []Kept{
				{Key: "gen", Why: "cannot tell: version 1 can no longer be read (deleted, destroyed or past max_versions)"},
				{Key: "gone-version", Why: "cannot tell: version 1 can no longer be read (deleted, destroyed or past max_versions)"},
				{Key: "ph", Why: "cannot tell: version 1 can no longer be read (deleted, destroyed or past max_versions)"},
			}},
		},
		{
			name:    "a key recorded without its version (the first release's status) is kept: the controller cannot tell",
			spec:    spec{data: data, prune: true, managed: []string{"gen", "kept"}, writtenAt: map[string]int{"kept": 3}},
			path:    ours(7, m{"kept": "k", "gen": "value-3"}),
			written: map[int]*vaultkv.Secret{3: v3},
			want: Plan{CAS: 7, ManagedKeys: []string{"kept"}, Carried: []string{"kept"},
				Kept: []Kept{{Key: "gen", Why: "cannot tell: recorded by an earlier release without its version"}}},
		},
		{
			name: "prune false keeps every managed key without reading anything",
			spec: spec{data: data, managed: managed, writtenAt: map[string]int{"gen": 1, "ph": 1, "kept": 3, "gone-version": 1}},
			path: ours(7, current),
			want: Plan{CAS: 7, ManagedKeys: managed},
		},
	})
}

// TestPlanCarriesRecordedVersions: a managed key the plan does not write
// moves up to the version read while that version holds the value of its
// recorded one; a key someone changed, or whose version is gone, keeps its
// record (issue 23, item 2).
func TestPlanCarriesRecordedVersions(t *testing.T) {
	data := m{"a": "<random:8>", "b": "<random:8>", "c": "<random:8>", "copy": "<ref:" + pgRef + ">"}
	v3 := ours(3, m{"a": "x", "b": "written", "c": "z", "copy": "old"})
	runPlanCases(t, []planCase{
		{
			name:    "unchanged keys are carried; a key a person changed is not",
			spec:    spec{data: m{"a": "<random:8>", "b": "<random:8>"}, managed: []string{"a", "b"}, writtenAt: map[string]int{"a": 3, "b": 3}},
			path:    ours(7, m{"a": "x", "b": "edited-by-a-person"}),
			written: map[int]*vaultkv.Secret{3: v3},
			want:    Plan{CAS: 7, ManagedKeys: []string{"a", "b"}, Carried: []string{"a"}},
		},
		{
			name: "a key whose version is gone is not carried",
			spec: spec{data: m{"a": "<random:8>"}, managed: []string{"a"}, writtenAt: map[string]int{"a": 3}},
			path: ours(7, m{"a": "x"}),
			want: Plan{CAS: 7, ManagedKeys: []string{"a"}},
		},
		{
			name:    "a key at the version read stays where it is; one at a version newer than the path (written anew, or restored) is no longer managed",
			spec:    spec{data: m{"a": "<random:8>", "b": "<random:8>"}, managed: []string{"a", "b"}, writtenAt: map[string]int{"a": 7, "b": 9}},
			path:    ours(7, m{"a": "x", "b": "written"}),
			written: map[int]*vaultkv.Secret{9: ours(9, m{"a": "x", "b": "written"})},
			want:    Plan{CAS: 7, ManagedKeys: []string{"a"}},
		},
		{
			name:    "a key the plan writes is not carried: its write records it",
			spec:    spec{data: data, managed: []string{"a", "b", "c", "copy"}, writtenAt: map[string]int{"a": 3, "b": 3, "c": 5, "copy": 3}},
			path:    ours(7, m{"a": "x", "b": "written", "c": "z", "copy": "old"}),
			refs:    map[string]*vaultkv.Secret{pgPath: {Exists: true, Version: 2, Data: m{"users": m{"keycloak": m{"password": "new"}}}}},
			written: map[int]*vaultkv.Secret{3: v3},
			want: Plan{
				Actions:     []Action{update("copy")},
				Data:        m{"a": "x", "b": "written", "c": "z", "copy": "new"},
				CAS:         7,
				ManagedKeys: []string{"a", "b", "c", "copy"},
				Carried:     []string{"a", "b"},
			},
		},
	})
}

func TestVersionReads(t *testing.T) {
	a := templating.Analyse(templating.Object{Path: ownPath, Data: m{"kept": "x"}})
	path := ours(7, m{"kept": "x", "a": "1", "b": "2", "c": "3", "d": "4"})
	for _, tc := range []struct {
		name string
		d    Desired
		path *vaultkv.Secret
		want []int
	}{
		{"prune: one read per distinct version, none for the current one", Desired{Analysis: a, Prune: true, Version: 7, ManagedKeys: []string{"a", "b", "c", "d", "kept", "absent"},
			WrittenAt: map[string]int{"a": 3, "b": 3, "c": 7, "d": 5, "kept": 2, "absent": 4}}, path, []int{3, 5}},
		{"the path moved past status.version: the older versions of the keys it holds, to carry them", Desired{Analysis: a, Version: 5, ManagedKeys: []string{"a", "b", "c", "kept", "absent"},
			WrittenAt: map[string]int{"a": 3, "b": 3, "c": 7, "kept": 2, "absent": 4}}, path, []int{2, 3}},
		{"quiet resync: every record at the path's version, no read", Desired{Analysis: a, Prune: true, Version: 7, ManagedKeys: []string{"kept"}, WrittenAt: map[string]int{"kept": 7}}, path, nil},
		{"a record left behind (changed by someone) is read again only when the path moves", Desired{Analysis: a, Version: 7, ManagedKeys: []string{"a", "kept"}, WrittenAt: map[string]int{"a": 3, "kept": 7}}, path, nil},
		{"a record newer than the path (written anew, or restored) is not read: no longer managed", Desired{Analysis: a, Prune: true, Version: 5, ManagedKeys: []string{"a", "kept"}, WrittenAt: map[string]int{"a": 9, "kept": 9}}, path, nil},
		{"unknown version, no read", Desired{Analysis: a, Prune: true, ManagedKeys: []string{"a"}}, path, nil},
		{"absent path, no read", Desired{Analysis: a, Prune: true, ManagedKeys: []string{"a"}, WrittenAt: map[string]int{"a": 3}}, &vaultkv.Secret{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, versionReads(tc.d, tc.path)); diff != "" {
				t.Errorf("versionReads (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKeptMessage(t *testing.T) {
	got := KeptMessage([]Kept{
		{Key: "a", Why: keptChanged},
		{Key: "b", Why: keptVersionGone(3)},
		{Key: "c", Why: keptChanged},
		{Key: "d", Why: keptUnknownVersion},
	})
	want := "changed since the controller wrote it: a, c; cannot tell: version 3 can no longer be read (deleted, destroyed or past max_versions): b; cannot tell: recorded by an earlier release without its version: d"
	if diff := cmp.Diff(want, got.String()); diff != "" {
		t.Errorf("KeptMessage (-want +got):\n%s", diff)
	}
}

// TestManagedStatus: the keys a plan writes are recorded at the version of
// its write; carried keys at the version it read, and at the version of its
// write when it writes the data (which holds their value unchanged); a
// record left behind stays (issue 23, item 2).
func TestManagedStatus(t *testing.T) {
	before := []ohmlabv1alpha1.ManagedKey{{Key: "a", Version: 3}, {Key: "b", Version: 3}, {Key: "c", Version: 7}, {Key: "edited", Version: 2}}
	p := Plan{CAS: 7, ManagedKeys: []string{"a", "b", "c", "edited", "new"}, Carried: []string{"a", "b"}, Actions: []Action{create("new")}}
	for _, tc := range []struct {
		name    string
		p       Plan
		applied bool
		version int
		want    []ohmlabv1alpha1.ManagedKey
	}{
		{"no data write: carried to the version read", Plan{CAS: 7, ManagedKeys: []string{"a", "b", "c", "edited"}, Carried: []string{"a", "b"}}, true, 7,
			[]ohmlabv1alpha1.ManagedKey{{Key: "a", Version: 7}, {Key: "b", Version: 7}, {Key: "c", Version: 7}, {Key: "edited", Version: 2}}},
		{"a data write: carried on to its version", withData(p), true, 8,
			[]ohmlabv1alpha1.ManagedKey{{Key: "a", Version: 8}, {Key: "b", Version: 8}, {Key: "c", Version: 8}, {Key: "edited", Version: 2}, {Key: "new", Version: 8}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ManagedStatus(tc.p, before, tc.applied, vaultkv.Written{Version: tc.version})); diff != "" {
				t.Errorf("ManagedStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func withData(p Plan) Plan {
	p.Data = m{"written": "tree"}
	return p
}

func TestPlanRandError(t *testing.T) {
	g := templating.Generator{Rand: failingReader{}, BcryptCost: bcrypt.MinCost}
	got, err := decide(t.Context(), desired(t, spec{data: keycloak()}), Observed{Path: &vaultkv.Secret{}}, g)
	if !errors.Is(err, errNoRandomness) {
		t.Fatalf("err = %v, want one wrapping %v", err, errNoRandomness)
	}
	if diff := cmp.Diff(Plan{}, got); diff != "" {
		t.Errorf("plan on error (-want +got):\n%s", diff)
	}
	// A plan that generates nothing does not read Rand.
	hash := mustBcrypt(t, storedPassword)
	if _, err := decide(t.Context(), desired(t, spec{data: keycloak()}), Observed{Path: ours(1, seeded(hash))}, g); err != nil {
		t.Errorf("quiet resync read Rand: %v", err)
	}
}

func TestPlanDeterministic(t *testing.T) {
	// age secrets and bcrypt salts come from crypto/rand, not g.Rand.
	d := desired(t, spec{data: m{"a": "<random:24>", "b": "<hex:16>", "c": "<uuid>", "ph": "", "n": 3.0}})
	p1, err1 := decide(t.Context(), d, Observed{Path: &vaultkv.Secret{}}, chachaGen(1))
	p2, err2 := decide(t.Context(), d, Observed{Path: &vaultkv.Secret{}}, chachaGen(1))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if diff := cmp.Diff(p1, p2); diff != "" {
		t.Errorf("same inputs and seed, different plans (-first +second):\n%s", diff)
	}
	p3, _ := decide(t.Context(), d, Observed{Path: &vaultkv.Secret{}}, chachaGen(2))
	if cmp.Equal(p1.Data, p3.Data) {
		t.Error("another seed gave the same values")
	}
}

// noValueScenarios are plans that handle values, for the no-value and
// no-mutation tests.
func noValueScenarios(t *testing.T) []planCase {
	t.Helper()
	hash := mustBcrypt(t, "Typed-Secret-Password-1")
	typed := m{
		"admin": m{
			"username":       "Typed-Secret-Username",
			"password":       "Typed-Secret-Password-1",
			"passwordHashed": hash,
		},
		"clients": m{"grafana-core": m{"clientSecret": "Typed-Secret-Client-1"}},
		"webhook": "Typed-Secret-Webhook-1",
	}
	clone := func(d m) m { return deepCopy(d) }
	data := func() m {
		d := keycloak()
		templating.SetPath(d, "admin.username", "Declared-Plain-Username")
		templating.SetPath(d, "db.password", "<ref:"+pgRef+">")
		templating.SetPath(d, "sops.secret", "<age:secret>")
		templating.SetPath(d, "sops.public", "<age:public>")
		return d
	}
	refs := map[string]*vaultkv.Secret{pgPath: pgSecret("Source-Secret-Value-1")}
	withEdits := func(kv ...any) m {
		d := clone(typed)
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				templating.DeletePath(d, kv[i].(string))
			} else {
				templating.SetPath(d, kv[i].(string), kv[i+1])
			}
		}
		return d
	}
	rotation := &templating.Rotate{Token: "t2"}
	managed := []string{"admin.password", "legacy.key", "legacy.other"}
	return []planCase{
		{name: "create", spec: spec{data: data(), rotate: rotation}, path: &vaultkv.Secret{}, refs: refs},
		{name: "adopt and fill", spec: spec{data: data()}, path: handMade(3, withEdits("clients", nil)), refs: refs},
		{name: "rotate and prune", spec: spec{data: data(), rotate: rotation, prune: true, managed: managed},
			path: ours(4, withEdits("legacy", m{"key": "Pruned-Secret-Value-1", "other": "Pruned-Secret-Value-2"}, "kept", m{"x": "Foreign-Secret-Value"}), tokenKey, "t1"), refs: refs},
		{name: "ref update", spec: spec{data: data()}, path: ours(4, withEdits("db.password", "Stale-Copy-Value-1")), refs: refs},
		{name: "bcrypt of edited source", spec: spec{data: data()}, path: ours(4, withEdits("admin.password", "Edited-Secret-Password")), refs: refs},
		{name: "long bcrypt source", spec: spec{data: data()}, path: ours(4, withEdits("admin.password", strings.Repeat("Long-Secret-Value-", 5))), refs: refs},
		{name: "bad age secret", spec: spec{data: data()}, path: ours(4, withEdits("sops.secret", "AGE-SECRET-KEY-Broken-Secret")), refs: refs},
		{name: "shape conflict", spec: spec{data: data()}, path: ours(4, withEdits("sops", "Shape-Secret-Value")), refs: refs},
		{name: "empty bcrypt source", spec: spec{data: m{"pw": "", "h": "<bcrypt:pw>", "other": "Declared-Plain-Other"}}, path: ours(4, m{"pw": ""})},
		{name: "ref pending on empty", spec: spec{data: data()}, path: ours(4, clone(typed)), refs: map[string]*vaultkv.Secret{pgPath: pgSecret("")}},
		{name: "owned by another", spec: spec{data: data()}, path: &vaultkv.Secret{Exists: true, Version: 2, Data: clone(typed), CustomMetadata: md(ownerKey, otherOwner)}, refs: refs},
	}
}

// values returns every leaf of trees as a string, when long enough to be
// recognised (short values such as "admin" are also key names).
func values(trees ...map[string]any) []string {
	var out []string
	for _, tr := range trees {
		for _, v := range templating.Flatten(tr) {
			if s := templating.Stringify(v); len(s) >= 8 {
				out = append(out, s)
			}
		}
	}
	return out
}

func TestPlanNoValueInMessageOrSummary(t *testing.T) {
	for _, tc := range noValueScenarios(t) {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decide(t.Context(), desired(t, tc.spec), Observed{Path: tc.path, Refs: tc.refs}, chachaGen(3))
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			secrets := values(tc.spec.data, got.Data)
			if tc.path != nil {
				secrets = append(secrets, values(tc.path.Data)...)
			}
			for _, r := range tc.refs {
				secrets = append(secrets, values(r.Data)...)
			}
			if len(secrets) == 0 {
				t.Fatal("scenario holds no value to look for")
			}
			for _, text := range []string{got.Message.String(), got.Summary(), fmt.Sprint(got.Actions), strings.Join(got.ManagedKeys, ",")} {
				for _, s := range secrets {
					if strings.HasPrefix(s, "<") { // a template is no value
						continue
					}
					if strings.Contains(text, s) {
						t.Errorf("%q holds the value %q", text, s)
					}
				}
			}
			if got.Outcome == OutcomeApply && got.Summary() == "" {
				t.Errorf("scenario plans nothing: it does not exercise Summary")
			}
		})
	}
}

func TestPlanDoesNotMutateObserved(t *testing.T) {
	for _, tc := range noValueScenarios(t) {
		t.Run(tc.name, func(t *testing.T) {
			var before *vaultkv.Secret
			if tc.path != nil {
				before = &vaultkv.Secret{Exists: tc.path.Exists, Version: tc.path.Version, Deleted: tc.path.Deleted,
					Data: deepCopy(tc.path.Data), CustomMetadata: md()}
				if tc.path.Data == nil {
					before.Data = nil
				}
				for k, v := range tc.path.CustomMetadata {
					before.CustomMetadata[k] = v
				}
				if tc.path.CustomMetadata == nil {
					before.CustomMetadata = nil
				}
			}
			refsBefore := map[string]m{}
			for p, r := range tc.refs {
				refsBefore[p] = deepCopy(r.Data)
			}
			got, err := decide(t.Context(), desired(t, tc.spec), Observed{Path: tc.path, Refs: tc.refs}, chachaGen(4))
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			if diff := cmp.Diff(before, tc.path); diff != "" {
				t.Errorf("plan changed Observed.Path (-before +after):\n%s", diff)
			}
			// The plan's tree shares no map with the observed one.
			if got.Data != nil {
				for k := range templating.Flatten(got.Data) {
					templating.SetPath(got.Data, k, "overwritten")
				}
				if got.Mark != nil {
					got.Mark["x"] = "y"
				}
				if diff := cmp.Diff(before, tc.path); diff != "" {
					t.Errorf("Plan.Data aliases Observed.Path (-before +after):\n%s", diff)
				}
			}
			for p, r := range tc.refs {
				if diff := cmp.Diff(refsBefore[p], r.Data); diff != "" {
					t.Errorf("plan changed Observed.Refs[%s] (-before +after):\n%s", p, diff)
				}
			}
		})
	}
}

func TestSummary(t *testing.T) {
	keys := func(n int) []Action {
		var out []Action
		for i := 1; i <= n; i++ {
			out = append(out, create(fmt.Sprintf("k%02d", i)))
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		actions []Action
		want    string
	}{
		{name: "empty plan", want: ""},
		{name: "the product document's example", actions: []Action{actAdopt, update("keycloak.clientSecret")}, want: "1 adopt, 1 update-field (keycloak.clientSecret)"},
		{name: "adopt only", actions: []Action{actAdopt}, want: "1 adopt"},
		{
			name:    "create with its fields",
			actions: []Action{actCreate, create("a"), create("b.c"), create("d")},
			want:    "1 create, 3 create-field (a, b.c, d)",
		},
		{
			name:    "rotation, in action order whatever the input order",
			actions: []Action{actRecordToken, rotate("admin.password"), update("admin.passwordHashed")},
			want:    "1 update-field (admin.passwordHashed), 1 rotate (admin.password), 1 record-token",
		},
		{
			name:    "every action",
			actions: []Action{act(ActionDelete, ""), actRecordToken, rotate("r"), prune("p"), update("u"), create("c"), actAdopt, actCreate},
			want:    "1 create, 1 adopt, 1 create-field (c), 1 update-field (u), 1 delete-field (p), 1 rotate (r), 1 record-token, 1 delete",
		},
		{name: "ten keys are all listed", actions: keys(10), want: "10 create-field (k01, k02, k03, k04, k05, k06, k07, k08, k09, k10)"},
		{name: "eleven keys: the eleventh is counted", actions: keys(11), want: "11 create-field (k01, k02, k03, k04, k05, k06, k07, k08, k09, k10, and 1 more)"},
		{
			name:    "the cap applies per action",
			actions: append(keys(12), prune("x"), prune("y")),
			want:    "12 create-field (k01, k02, k03, k04, k05, k06, k07, k08, k09, k10, and 2 more), 2 delete-field (x, y)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Plan{Actions: tc.actions}).Summary(); got != tc.want {
				t.Errorf("Summary() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSummaryOfPlans(t *testing.T) {
	hash := mustBcrypt(t, storedPassword)
	for _, tc := range []struct {
		name string
		spec spec
		path *vaultkv.Secret
		refs map[string]*vaultkv.Secret
		want string
	}{
		{
			name: "adoption with a reference put back",
			spec: spec{data: m{"keycloak": m{"clientSecret": "<ref:" + pgRef + ">"}}},
			path: handMade(2, m{"keycloak": m{"clientSecret": "stale"}}),
			refs: map[string]*vaultkv.Secret{pgPath: pgSecret("pg-source")},
			want: "1 adopt, 1 update-field (keycloak.clientSecret)",
		},
		{
			name: "creation",
			spec: spec{data: keycloak()},
			path: &vaultkv.Secret{},
			want: "1 create, 5 create-field (admin.password, admin.passwordHashed, admin.username, clients.grafana-core.clientSecret, webhook)",
		},
		{
			name: "rotation",
			spec: spec{data: keycloak(), rotate: &templating.Rotate{Token: "t2", Keys: []string{"admin.password"}}, managed: keycloakKeys},
			path: ours(3, seeded(hash), tokenKey, "t1"),
			want: "1 update-field (admin.passwordHashed), 1 rotate (admin.password), 1 record-token",
		},
		{
			name: "quiet resync",
			spec: spec{data: keycloak(), managed: keycloakKeys},
			path: ours(3, seeded(hash)),
			want: "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decide(t.Context(), desired(t, tc.spec), Observed{Path: tc.path, Refs: tc.refs}, testGen())
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			if s := got.Summary(); s != tc.want {
				t.Errorf("Summary() = %q, want %q", s, tc.want)
			}
			if got.Empty() != (tc.want == "") {
				t.Errorf("Empty() = %v with summary %q", got.Empty(), tc.want)
			}
		})
	}
}

func TestPlanCounts(t *testing.T) {
	p := Plan{Actions: []Action{actAdopt, create("a"), create("b"), update("c")}}
	want := map[string]int{ActionAdopt: 1, ActionCreateField: 2, ActionUpdateField: 1}
	if diff := cmp.Diff(want, p.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}

// TestPlanVanished: a path read absent is vanished when status says the
// object wrote it (status.version, or managed keys), whatever else the plan
// does; the plan still creates it as a new path, and a caller decides
// whether to write it.
func TestPlanVanished(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int
		managed []string
		path    *vaultkv.Secret
		want    bool
	}{
		{name: "never written, absent: a new path", path: &vaultkv.Secret{}, want: false},
		{name: "status.version, absent", version: 4, path: &vaultkv.Secret{}, want: true},
		{name: "managed keys without status.version (a write status did not record)", managed: []string{"admin.password"}, path: &vaultkv.Secret{}, want: true},
		{name: "status.version, path not read at all", version: 4, path: nil, want: true},
		{name: "status.version, metadata kept but no version (vault kv metadata put)", version: 4, path: &vaultkv.Secret{CustomMetadata: md("team", "a")}, want: true},
		{name: "status.version, present", version: 4, path: ours(4, seeded("x")), want: false},
		{name: "status.version, present without the owner marker (put again by hand)", version: 4, path: handMade(1, m{"admin": m{"username": "admin"}}), want: false},
		{name: "status.version, latest version deleted: PathDeleted, not vanished", version: 4, path: &vaultkv.Secret{Exists: true, Deleted: true, Version: 4, CustomMetadata: md(ownerKey, testOwner)}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := desired(t, spec{data: keycloak(), managed: tc.managed})
			d.Version = tc.version
			got, err := decide(t.Context(), d, observe(&d, tc.path, nil, nil), testGen())
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			if got.Vanished != tc.want {
				t.Errorf("Vanished = %v, want %v", got.Vanished, tc.want)
			}
			if tc.path != nil && !tc.path.Exists && !got.Creates() {
				t.Errorf("the plan of an absent path does not create it: %v", got.Actions)
			}
		})
	}
}
