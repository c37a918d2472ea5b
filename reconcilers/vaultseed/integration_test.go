package vaultseed

import (
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/crypto/bcrypt"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// keycloakData is the product document's production-core-keycloak example.
const keycloakData = `{
  "admin": {"username": "admin", "password": "<random:24>", "passwordHashed": "<bcrypt:admin.password>"},
  "clients": {"grafana-core": {"clientSecret": "<random:32>"}},
  "webhook": ""
}`

func leaf(data map[string]any, dotted string) any {
	var v any = data
	for _, k := range strings.Split(dotted, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func TestKeycloakExampleGoesReady(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	path := f.path("keycloak")
	f.create(f.seed("production-core-keycloak", path, keycloakData))
	obj := f.waitReady("production-core-keycloak")

	got := readPath(t, path)
	g.Expect(got.Version).To(Equal(1), "one data write creates the path")
	g.Expect(leaf(got.Data, "admin.username")).To(Equal("admin"))
	g.Expect(leaf(got.Data, "admin.password")).To(MatchRegexp(`^[A-Za-z0-9]{24}$`))
	g.Expect(leaf(got.Data, "clients.grafana-core.clientSecret")).To(MatchRegexp(`^[A-Za-z0-9]{32}$`))
	g.Expect(leaf(got.Data, "webhook")).To(Equal(""))
	hash := leaf(got.Data, "admin.passwordHashed").(string)
	g.Expect(bcrypt.CompareHashAndPassword([]byte(hash), []byte(leaf(got.Data, "admin.password").(string)))).To(Succeed())
	g.Expect(got.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.OwnerMetadataKey, f.ns+"/production-core-keycloak"))

	g.Expect(managedNames(obj)).To(Equal([]string{"admin.password", "admin.passwordHashed", "admin.username", "clients.grafana-core.clientSecret", "webhook"}))
	g.Expect(obj.Status.Version).To(Equal(int64(1)))
	g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
	g.Eventually(func() []string { return f.events("production-core-keycloak") }).Should(ContainElement(
		"Normal Created: 1 create, 5 create-field (admin.password, admin.passwordHashed, admin.username, clients.grafana-core.clientSecret, webhook) (KV version 1)"))
	assertNoValueEmitted(t, f, got.Data)
}

func TestSeedOnceKeepsHandEditsAndRestoresDeletedKeys(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{resync: time.Second})
	path := f.path("app")
	f.create(f.seed("app", path, `{"user": "admin", "password": "<random:16>", "token": "<hex:8>", "webhook": ""}`))
	f.waitReady("app")
	before := readPath(t, path)

	edited := map[string]any{
		"user":     "root",          // a plain value edited by hand
		"password": "typed-by-hand", // a generated value edited by hand
		"webhook":  "https://hooks.example/x",
		// token deleted by hand
	}
	v := handWrite(t, path, edited)
	g.Eventually(func() int { return readPath(t, path).Version }).WithTimeout(10*time.Second).Should(Equal(v+1), "the deleted key comes back in one write")
	after := readPath(t, path)
	g.Expect(after.Data["user"]).To(Equal("root"))
	g.Expect(after.Data["password"]).To(Equal("typed-by-hand"))
	g.Expect(after.Data["webhook"]).To(Equal("https://hooks.example/x"))
	g.Expect(after.Data["token"]).To(MatchRegexp(`^[0-9a-f]{8}$`))
	g.Expect(after.Data["token"]).NotTo(Equal(before.Data["token"]), "a deleted generated key comes back with a new value")
	g.Consistently(func() int { return readPath(t, path).Version }).WithTimeout(3 * time.Second).Should(Equal(v + 1))
}

func TestReferencesFollowTheirSource(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{resync: time.Second})
	src, dst := f.path("keycloak"), f.path("grafana")
	f.create(f.seed("keycloak", src, `{"admin": {"password": "<random:24>"}}`))
	f.create(f.seed("grafana", dst, `{"keycloakPassword": "<ref:`+src+`#admin.password>", "hash": "<bcrypt:keycloakPassword>"}`))
	f.waitReady("keycloak")
	f.waitReady("grafana")
	password := leaf(readPath(t, src).Data, "admin.password")
	got := readPath(t, dst)
	g.Expect(got.Data["keycloakPassword"]).To(Equal(password))
	hash := got.Data["hash"].(string)

	g.Consistently(func() any { return readPath(t, dst).Data["hash"] }).WithTimeout(3*time.Second).Should(Equal(hash), "a resync never produces a new salt")

	// A hand edit of the copy is put back.
	handWrite(t, dst, map[string]any{"keycloakPassword": "edited", "hash": hash})
	g.Eventually(func() any { return readPath(t, dst).Data["keycloakPassword"] }).WithTimeout(10 * time.Second).Should(Equal(password))
	g.Expect(readPath(t, dst).Data["hash"]).To(Equal(hash), "the hash still matches its source")

	// A hand edit of the source reaches the copy, and the hash follows.
	handWrite(t, src, map[string]any{"admin": map[string]any{"password": "new-source-value"}})
	g.Eventually(func() any { return readPath(t, dst).Data["keycloakPassword"] }).WithTimeout(10 * time.Second).Should(Equal("new-source-value"))
	g.Eventually(func() error {
		h := readPath(t, dst).Data["hash"].(string)
		return bcrypt.CompareHashAndPassword([]byte(h), []byte("new-source-value"))
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

// privateKeyMarkers are what only a private key holds (the age identity's
// prefix, the PEM armour of an SSH private key): none is ever emitted.
// (The refusal of an age secret that does not parse names its prefix, so
// a test that stores one does not call assertNoValueEmitted.)
var privateKeyMarkers = []string{"AGE-SECRET-KEY-1", "PRIVATE KEY-----"}

// assertNoValueEmitted fails when a value of the path, or a line of one (a
// PEM-encoded key), or a private key's marker appears in anything the
// controller emitted: logs, events, status, metrics.
func assertNoValueEmitted(t *testing.T, f *fixture, data map[string]any) {
	t.Helper()
	emitted := f.emitted()
	for _, m := range privateKeyMarkers {
		if strings.Contains(emitted, m) {
			t.Errorf("the marker of a private key was emitted: %s", m)
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case string:
			for _, s := range append(strings.Split(v, "\n"), v) {
				if len(s) >= 8 && strings.Contains(emitted, s) {
					t.Errorf("a value of the path was emitted: %s", regexp.QuoteMeta(s[:3])+"…")
				}
			}
		}
	}
	walk(data)
}
