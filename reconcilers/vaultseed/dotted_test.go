package vaultseed

// Real-server tests of keys whose name has a dot, which the planner's
// flattened view of a path does not show.

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// TestDottedKeysAreNeverOverwritten: a person (or another tool) puts
// {"app": {"spring.datasource.password": ...}} on a path; an object that
// declares a leaf app never writes over that map. It stalls on app with
// the shape-conflict message naming the dotted key, and its other keys
// are written with check-and-set around the dotted key, which stays as
// typed. With prune, a managed key pruned from under app leaves the
// dotted key in place. Once the person moves the key away, the next resync
// creates app.
func TestDottedKeysAreNeverOverwritten(t *testing.T) {
	const typed = "typed-by-a-person"
	person := map[string]any{"spring.datasource.password": typed}
	stalledOnApp := `app: cannot be created without overwriting app."spring.datasource.password" on the path, which is kept (a value on the path is never overwritten): ` +
		`move or delete that key by hand, and the next resync creates app`

	t.Run("declared leaf over a map of dotted keys", func(t *testing.T) {
		g := NewWithT(t)
		f := startController(t, controllerOptions{resync: time.Second})
		path := f.path("app")
		handWrite(t, path, map[string]any{"app": person})
		f.create(f.seed("app", path, `{"app": "<random:8>", "other": "<random:8>"}`))

		obj := f.waitReason("app", ohmlabv1alpha1.ReasonInvalidSpec, 20*time.Second)
		stalled := condition(obj, ohmlabv1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Message).To(Equal(stalledOnApp))
		got := readPath(t, path)
		g.Expect(got.Data).To(HaveKeyWithValue("app", person), "the person's map is kept as typed")
		g.Expect(got.Data).To(HaveKey("other"), "the other key is written around it")
		g.Expect(got.Version).To(Equal(2), "one write: other, with the dotted key carried back")
		g.Expect(managedNames(obj)).To(Equal([]string{"other"}))
		assertNoValueEmitted(t, f, got.Data)

		// The person moves the key to where the application reads it now:
		// the next resync creates app.
		handWrite(t, path, map[string]any{"other": got.Data["other"], "spring.datasource.password": typed})
		obj = f.waitReady("app")
		got = readPath(t, path)
		g.Expect(got.Data).To(HaveKeyWithValue("spring.datasource.password", typed))
		g.Expect(got.Data["app"]).To(HaveLen(8))
		g.Expect(managedNames(obj)).To(Equal([]string{"app", "other"}))
	})

	t.Run("with prune, a managed key pruned from under app", func(t *testing.T) {
		g := NewWithT(t)
		f := startController(t, controllerOptions{})
		path := f.path("app")
		handWrite(t, path, map[string]any{"app": person})
		obj := f.seed("app", path, `{"app": {"x": "<random:8>"}}`)
		obj.Spec.Prune = true
		f.create(obj)
		obj = f.waitReady("app")
		g.Expect(managedNames(obj)).To(Equal([]string{"app.x"}))
		g.Expect(readPath(t, path).Data["app"]).To(HaveKeyWithValue("spring.datasource.password", typed), "adopted, app.x created beside it")

		// app becomes a leaf: app.x is the controller's and is pruned, the
		// person's key under app is not, so app cannot be created.
		f.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Data.Raw = []byte(`{"app": "<random:8>"}`) })
		obj = f.waitReason("app", ohmlabv1alpha1.ReasonInvalidSpec, 20*time.Second)
		g.Expect(condition(obj, ohmlabv1alpha1.ConditionStalled).Message).To(Equal(stalledOnApp))
		got := readPath(t, path)
		g.Expect(got.Data).To(Equal(map[string]any{"app": person}), "app.x pruned, the person's key kept")
		g.Expect(obj.Status.ManagedKeys).To(BeEmpty())
		assertNoValueEmitted(t, f, got.Data)
	})
}
