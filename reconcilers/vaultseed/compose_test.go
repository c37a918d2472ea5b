package vaultseed

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// TestComposedValueFollowsItsSources: a connection string composed of
// text, a key of its own path and a generated password of another object's
// path is written equal to its composition, follows the password when its
// object rotates it, and a hand edit of it is put back in one write.
func TestComposedValueFollowsItsSources(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{resync: time.Second})
	src, dst := f.path("db"), f.path("app")
	db := f.seed("db", src, `{"password": "<random:24>"}`)
	db.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1"}
	f.create(db)
	f.create(f.seed("app", dst, `{"user": "app", "url": "postgres://<ref:`+dst+`#user>:<ref:`+src+`#password>@db:5432/app?x=<<y>"}`))
	f.waitReady("db")
	f.waitReady("app")
	// composedOf says whether the url is the composition with password;
	// a failure prints neither value.
	composedOf := func(password any) func() bool {
		return func() bool {
			return readPath(t, dst).Data["url"] == fmt.Sprintf("postgres://app:%s@db:5432/app?x=<y>", password)
		}
	}
	password := readPath(t, src).Data["password"]
	g.Expect(password).To(MatchRegexp(`^[A-Za-z0-9]{24}$`))
	g.Expect(composedOf(password)()).To(BeTrue(), "the url is its composition")

	// The source's object rotates the password: the composed key follows.
	f.update("db", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Rotate.Token = "t2" })
	g.Eventually(func() bool { return readPath(t, src).Data["password"] != password }).WithTimeout(10*time.Second).Should(BeTrue(), "the password rotates")
	rotated := readPath(t, src).Data["password"]
	g.Eventually(composedOf(rotated)).WithTimeout(10*time.Second).Should(BeTrue(), "the url follows the rotated password")

	// A hand edit of the composed key is put back, in one write.
	v := handWrite(t, dst, map[string]any{"user": "app", "url": "postgres://someone:typed-by-hand@elsewhere/app"})
	g.Eventually(composedOf(rotated)).WithTimeout(10*time.Second).Should(BeTrue(), "the hand edit is put back")
	g.Consistently(func() int { return readPath(t, dst).Version }).WithTimeout(3*time.Second).Should(Equal(v+1), "one write puts it back, none after")
	assertNoValueEmitted(t, f, readPath(t, dst).Data)
	assertNoValueEmitted(t, f, readPath(t, src).Data)
}
