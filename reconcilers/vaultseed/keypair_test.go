package vaultseed

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/templating/keypairtest"
)

// TestKeyPairSeededRepairedAndRotated: a path seeded with a key pair holds
// two keys that belong together, whatever happens to the public key, and a
// rotation makes a new pair once per token (product document, "Templates",
// "Seed once", "Rotation").
func TestKeyPairSeededRepairedAndRotated(t *testing.T) {
	for _, kind := range keypairtest.Kinds {
		t.Run(kind.Name, func(t *testing.T) {
			g := NewWithT(t)
			f := startController(t, controllerOptions{resync: time.Second})
			path := f.path("deploy")
			obj := f.seed("deploy", path, `{"user": "git", "deploy": {"private": "`+kind.Private+`", "public": "`+kind.Public+`"}}`)
			obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1", Keys: []string{"deploy.private"}}
			f.create(obj)
			ready := f.waitReady("deploy")

			seeded := readPath(t, path)
			g.Expect(seeded.Version).To(Equal(1), "one data write creates the path")
			private, _ := leaf(seeded.Data, "deploy.private").(string)
			public := leaf(seeded.Data, "deploy.public")
			g.Expect(public).To(Equal(kind.PublicOf(g, private)), "the public key belongs to the private key")
			g.Expect(managedNames(ready)).To(Equal([]string{"deploy.private", "deploy.public", "user"}))
			g.Eventually(func() []string { return f.events("deploy") }).Should(ContainElement(
				HavePrefix("Normal Created: 1 create, 3 create-field (deploy.private, deploy.public, user)")))

			withPublic := func(public any) map[string]any {
				deploy := map[string]any{"private": private}
				if public != nil {
					deploy["public"] = public
				}
				return map[string]any{"user": "git", "deploy": deploy}
			}
			for _, edit := range []struct {
				name   string
				public any
			}{
				{name: "the public key deleted by hand comes back equal"},
				{name: "a public key edited by hand is put back", public: public.(string) + " person@host"},
			} {
				v := handWrite(t, path, withPublic(edit.public))
				g.Eventually(func() int { return readPath(t, path).Version }).WithTimeout(10*time.Second).Should(Equal(v+1), edit.name)
				after := readPath(t, path)
				g.Expect(leaf(after.Data, "deploy.public")).To(Equal(public), edit.name)
				g.Expect(leaf(after.Data, "deploy.private")).To(Equal(private), "the private key is never rewritten but by rotation")
			}

			// Rotation: a new pair, once per token.
			before := readPath(t, path).Version
			f.update("deploy", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Rotate.Token = "t2" })
			g.Eventually(func() int { return readPath(t, path).Version }).WithTimeout(10 * time.Second).Should(Equal(before + 1))
			f.waitReady("deploy")
			g.Consistently(func() int { return readPath(t, path).Version }).WithTimeout(3*time.Second).Should(Equal(before+1),
				"one KV version per token, none on later resyncs")
			rotated := readPath(t, path)
			newPrivate, _ := leaf(rotated.Data, "deploy.private").(string)
			g.Expect(newPrivate).NotTo(Equal(private), "the private key is regenerated")
			g.Expect(leaf(rotated.Data, "deploy.public")).To(Equal(kind.PublicOf(g, newPrivate)), "the public key follows its private key")
			g.Expect(leaf(rotated.Data, "deploy.public")).NotTo(Equal(public))
			g.Expect(rotated.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.RotationTokenMetadataKey, "t2"))
			g.Eventually(func() []string { return f.events("deploy") }).Should(ContainElement(
				HavePrefix("Normal Rotated: 1 update-field (deploy.public), 1 rotate (deploy.private), 1 record-token")))
			g.Expect(f.emissions("deploy", "Normal", "Rotated")).To(Equal(1))
			// The creation, two repairs, one rotation.
			g.Expect(f.value("ohmlab_data_writes_total", map[string]string{"name": "deploy"})).To(Equal(float64(4)))

			assertNoValueEmitted(t, f, seeded.Data)
			assertNoValueEmitted(t, f, rotated.Data)
		})
	}
}

// TestKeyPairObserveOnly: observe-only plans a key pair without writing it,
// and reports what it would do by key, never by value.
func TestKeyPairObserveOnly(t *testing.T) {
	for _, kind := range keypairtest.Kinds {
		t.Run(kind.Name, func(t *testing.T) {
			g := NewWithT(t)
			f := startController(t, controllerOptions{observeOnly: true, resync: time.Second})
			path := f.path("deploy")
			handWrite(t, path, map[string]any{"user": "git"})
			before := readPath(t, path)
			f.create(f.seed("deploy", path, `{"user": "git", "deploy": {"private": "`+kind.Private+`", "public": "`+kind.Public+`"}}`))

			obj := f.waitReason("deploy", ohmlabv1alpha1.ReasonObserveOnly, 20*time.Second)
			g.Expect(condition(obj, ohmlabv1alpha1.ConditionDrifted).Message).To(Equal("1 adopt, 2 create-field (deploy.private, deploy.public)"))
			g.Consistently(func() kvPath { return readPath(t, path) }).WithTimeout(3*time.Second).Should(Equal(before),
				"observe-only writes nothing")
			g.Expect(f.kv.Counts()["write"]).To(Equal(0))
			assertNoValueEmitted(t, f, before.Data)
		})
	}
}
