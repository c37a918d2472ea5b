package vaultseed

import (
	"bytes"
	"testing"
	"time"

	"filippo.io/age"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// keyPairKind is one kind of key pair template: the two kinds go through
// the same steps (TestPlanKeyPairs, the real-server tests).
type keyPairKind struct {
	name            string
	private, public string // the templates
	// publicOf reads a private key with the pair's own library and returns
	// its public key in the template's format.
	publicOf func(g Gomega, private string) string
}

var keyPairKinds = []keyPairKind{
	{name: "age", private: "<age:secret>", public: "<age:public>", publicOf: func(g Gomega, private string) string {
		id, err := age.ParseX25519Identity(private)
		g.Expect(err).NotTo(HaveOccurred(), "age parses the secret")
		return id.Recipient().String()
	}},
	{name: "ssh", private: "<ssh:private>", public: "<ssh:public>", publicOf: func(g Gomega, private string) string {
		g.Expect(private).To(HavePrefix("-----BEGIN OPENSSH PRIVATE KEY-----\n"))
		signer, err := ssh.ParsePrivateKey([]byte(private))
		g.Expect(err).NotTo(HaveOccurred(), "ssh.ParsePrivateKey parses the private key")
		g.Expect(signer.PublicKey().Type()).To(Equal(ssh.KeyAlgoED25519))
		return string(bytes.TrimSuffix(ssh.MarshalAuthorizedKey(signer.PublicKey()), []byte("\n")))
	}},
}

// TestKeyPairSeededRepairedAndRotated: a path seeded with a key pair holds
// two keys that belong together, whatever happens to the public key, and a
// rotation makes a new pair once per token (product document, "Templates",
// "Seed once", "Rotation").
func TestKeyPairSeededRepairedAndRotated(t *testing.T) {
	for _, kind := range keyPairKinds {
		t.Run(kind.name, func(t *testing.T) {
			g := NewWithT(t)
			f := startController(t, controllerOptions{resync: time.Second})
			path := f.path("deploy")
			obj := f.seed("deploy", path, `{"user": "git", "deploy": {"private": "`+kind.private+`", "public": "`+kind.public+`"}}`)
			obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1", Keys: []string{"deploy.private"}}
			f.create(obj)
			ready := f.waitReady("deploy")

			seeded := readPath(t, path)
			g.Expect(seeded.Version).To(Equal(1), "one data write creates the path")
			private, _ := leaf(seeded.Data, "deploy.private").(string)
			public := leaf(seeded.Data, "deploy.public")
			g.Expect(public).To(Equal(kind.publicOf(g, private)), "the public key belongs to the private key")
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
			g.Expect(leaf(rotated.Data, "deploy.public")).To(Equal(kind.publicOf(g, newPrivate)), "the public key follows its private key")
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
	for _, kind := range keyPairKinds {
		t.Run(kind.name, func(t *testing.T) {
			g := NewWithT(t)
			f := startController(t, controllerOptions{observeOnly: true, resync: time.Second})
			path := f.path("deploy")
			handWrite(t, path, map[string]any{"user": "git"})
			before := readPath(t, path)
			f.create(f.seed("deploy", path, `{"user": "git", "deploy": {"private": "`+kind.private+`", "public": "`+kind.public+`"}}`))

			obj := f.waitReason("deploy", ohmlabv1alpha1.ReasonObserveOnly, 20*time.Second)
			g.Expect(condition(obj, ohmlabv1alpha1.ConditionDrifted).Message).To(Equal("1 adopt, 2 create-field (deploy.private, deploy.public)"))
			g.Consistently(func() kvPath { return readPath(t, path) }).WithTimeout(3*time.Second).Should(Equal(before),
				"observe-only writes nothing")
			g.Expect(f.kv.Counts()["write"]).To(Equal(0))
			assertNoValueEmitted(t, f, before.Data)
		})
	}
}
