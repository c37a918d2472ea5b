package vaultseed

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// TestRefToAMapStalls: a <ref:> whose source key is a map on its source
// path waits for nothing (the source exists, the key exists), so it is not
// RefPending: the object stalls (InvalidSpec) with a message naming the
// key, the source path and what to write; its other keys are written.
// Once the reference names a value under the map, the copy is made.
func TestRefToAMapStalls(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	src, path := f.path("pg"), f.path("app")
	handWrite(t, src, map[string]any{"users": map[string]any{"keycloak": map[string]any{"password": "typed-by-a-person"}}})
	f.create(f.seed("app", path, `{"db": {"password": "<ref:`+src+`#users.keycloak>"}, "other": "<random:8>"}`))

	obj := f.waitReason("app", ohmlabv1alpha1.ReasonInvalidSpec, 20*time.Second)
	stalled := condition(obj, ohmlabv1alpha1.ConditionStalled)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(stalled.Message).To(Equal("db.password: <ref:" + src + "#users.keycloak> names users.keycloak, which is a map on " + src +
		", not a value: a reference copies one value; name one of its keys (<ref:" + src + "#users.keycloak.<key>>)"))
	g.Expect(condition(obj, ohmlabv1alpha1.ConditionReconciling)).To(BeNil(), "nothing to wait for")
	got := readPath(t, path)
	g.Expect(got.Data).To(HaveKey("other"), "the other key is written")
	g.Expect(got.Data).NotTo(HaveKey("db"))

	f.update("app", func(o *ohmlabv1alpha1.VaultSeed) {
		o.Spec.Data.Raw = []byte(`{"db": {"password": "<ref:` + src + `#users.keycloak.password>"}, "other": "<random:8>"}`)
	})
	f.waitReady("app")
	got = readPath(t, path)
	g.Expect(got.Data["db"]).To(Equal(map[string]any{"password": "typed-by-a-person"}))
	assertNoValueEmitted(t, f, got.Data)
}
