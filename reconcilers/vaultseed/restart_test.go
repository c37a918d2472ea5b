package vaultseed

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/crypto/bcrypt"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// Issue 25, item 3: after a restart, a hash that status records at a
// version whose pair the path still holds costs no bcrypt compare; every
// hash whose source or value may have changed is compared.

// hashedSeed declares a password and its bcrypt hash.
const hashedSeed = `{"password": "<random:24>", "passwordHashed": "<bcrypt:password>"}`

// restartOn stops first and starts its successor on the same objects,
// with a short resync period (the objects Ready before the start wait for
// their phase), and returns it with a count of its reads by path.
func restartOn(t *testing.T, first *fixture, between func()) (*fixture, *pathCounter) {
	t.Helper()
	first.cancel()
	if between != nil {
		between()
	}
	successor := startController(t, controllerOptions{namespace: first.ns, resync: time.Second})
	reads := &pathCounter{}
	successor.kv.setBefore(reads.hook)
	return successor, reads
}

// reconciledOnce waits until the successor has finished a reconcile of the
// path: it began a second one (a missed first read only delays this).
func reconciledOnce(t *testing.T, reads *pathCounter, path string) {
	t.Helper()
	NewWithT(t).Eventually(func() int { return reads.snapshot()["read "+path] }).
		WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeNumerically(">=", 2), "reads of %s", path)
}

// hashMatches says whether the path's hash is a bcrypt hash of its
// password, without printing either.
func hashMatches(data map[string]any) bool {
	h, _ := data["passwordHashed"].(string)
	pw, _ := data["password"].(string)
	return h != "" && bcrypt.CompareHashAndPassword([]byte(h), []byte(pw)) == nil
}

// TestRestartComparesNoHashThatCannotHaveChanged: a restarted controller
// reconciles objects it did not make or check itself, whose paths still
// hold what status records, or a hand edit of another key: no bcrypt
// compare, no write (issue 25, item 3). Before, each hash cost a compare.
func TestRestartComparesNoHashThatCannotHaveChanged(t *testing.T) {
	g := NewWithT(t)
	const n = 4
	first := startController(t, controllerOptions{})
	var paths []string
	for i := range n {
		name := fmt.Sprintf("o%d", i)
		paths = append(paths, first.path(name))
		first.create(first.seed(name, first.path(name), hashedSeed))
	}
	for i := range n {
		obj := first.waitReady(fmt.Sprintf("o%d", i))
		g.Expect(stamped(t, obj.Status.ManagedKeys)).To(ConsistOf(
			ohmlabv1alpha1.ManagedKey{Key: "password", Version: 1}, ohmlabv1alpha1.ManagedKey{Key: "passwordHashed", Version: 1}))
	}

	// Between the stop and the start, a person edits another key of o0:
	// its path moved past the recorded version, which is read to carry
	// the records, and shows the pair unchanged.
	successor, reads := restartOn(t, first, func() { handEditOther(t, paths[0], 1) })
	for _, p := range paths {
		reconciledOnce(t, reads, p)
	}
	g.Expect(successor.r.Generator.Cache.Compares()).To(BeZero(), "bcrypt compares after the restart")
	g.Expect(successor.kv.Counts()["write"]).To(BeZero())
	g.Eventually(func() []ohmlabv1alpha1.ManagedKey { return stamped(t, successor.get("o0").Status.ManagedKeys) }).Should(ConsistOf(
		ohmlabv1alpha1.ManagedKey{Key: "password", Version: 2}, ohmlabv1alpha1.ManagedKey{Key: "passwordHashed", Version: 2}),
		"o0's records carried to the hand edit's version, read to compare")
	for _, p := range paths {
		g.Expect(hashMatches(readPath(t, p).Data)).To(BeTrue(), "%s: the hash matches its password", p)
	}
}

// TestRestartChecksEveryHashWhoseSourceMayHaveChanged: whatever happened to
// the path or to status between the stop and the start, a hash that may no
// longer match its source is compared, and rewritten when it does not
// match (product document, "References follow their source").
func TestRestartChecksEveryHashWhoseSourceMayHaveChanged(t *testing.T) {
	mustHash := func(t *testing.T, src string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(src), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	tests := []struct {
		name string
		// prepare runs with the first process up, after the object is
		// Ready; between after it stopped; after once the successor
		// reconciled the object.
		prepare, between, after func(t *testing.T, f *fixture, path string)
		// rehashed: the successor writes a new hash; else it writes
		// nothing.
		rehashed     bool
		wantCompares uint64
	}{
		{
			name: "the password edited by hand",
			between: func(t *testing.T, _ *fixture, path string) {
				data := readPath(t, path).Data
				data["password"] = "typed-by-a-person"
				handWrite(t, path, data)
			},
			rehashed: true, wantCompares: 1,
		},
		{
			name: "the hash edited by hand, to another password's",
			between: func(t *testing.T, _ *fixture, path string) {
				data := readPath(t, path).Data
				data["passwordHashed"] = mustHash(t, "another-password")
				handWrite(t, path, data)
			},
			rehashed: true, wantCompares: 1,
		},
		{
			name: "the hash edited by hand, to another hash of the same password: kept",
			between: func(t *testing.T, _ *fixture, path string) {
				data := readPath(t, path).Data
				data["passwordHashed"] = mustHash(t, data["password"].(string))
				handWrite(t, path, data)
			},
			wantCompares: 1,
		},
		{
			name: "status recorded by the first release, without versions",
			between: func(t *testing.T, f *fixture, _ string) {
				obj := f.get("app")
				patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"managedKeys":[{"key":"password"},{"key":"passwordHashed"}]}}`))
				NewWithT(t).Expect(cp.Client.Status().Patch(context.Background(), obj, patch)).To(Succeed())
			},
			wantCompares: 1,
		},
		{
			name: "the path deleted and written again by hand at the recorded version, with another password",
			between: func(t *testing.T, _ *fixture, path string) {
				data := readPath(t, path).Data
				handDelete(t, path)
				data["password"] = "typed-by-a-person"
				NewWithT(t).Expect(handWrite(t, path, data)).To(Equal(1))
			},
			rehashed: true, wantCompares: 1,
		},
		{
			// The records (version 2) outlive the path they name: it is
			// deleted, written again by hand (version 1, adopted), then
			// its password is edited by hand at version 2.
			name: "the path deleted and written again by hand, then its password edited at the recorded version",
			prepare: func(t *testing.T, f *fixture, _ string) {
				f.update("app", func(s *ohmlabv1alpha1.VaultSeed) {
					s.Spec.Data.Raw = []byte(`{"password": "<random:24>", "passwordHashed": "<bcrypt:password>", "extra": "x"}`)
				})
				obj := f.waitReady("app")
				NewWithT(t).Expect(obj.Status.Version).To(Equal(int64(2)))
			},
			between: func(t *testing.T, _ *fixture, path string) {
				data := readPath(t, path).Data
				handDelete(t, path)
				NewWithT(t).Expect(handWrite(t, path, data)).To(Equal(1))
			},
			after: func(t *testing.T, f *fixture, path string) {
				g := NewWithT(t)
				g.Eventually(func() int64 { return f.get("app").Status.Version }).Should(Equal(int64(1)), "adopted")
				data := readPath(t, path).Data
				data["password"] = "typed-by-a-person"
				g.Expect(handWrite(t, path, data)).To(Equal(2))
			},
			rehashed: true, wantCompares: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			first := startController(t, controllerOptions{})
			path := first.path("app")
			first.create(first.seed("app", path, hashedSeed))
			first.waitReady("app")
			if tt.prepare != nil {
				tt.prepare(t, first, path)
			}
			var before kvPath
			successor, reads := restartOn(t, first, func() {
				if tt.between != nil {
					tt.between(t, first, path)
				}
				before = readPath(t, path)
			})
			reconciledOnce(t, reads, path)
			if tt.after != nil {
				tt.after(t, successor, path)
				before = readPath(t, path)
			}
			if tt.rehashed {
				g.Eventually(func() bool { return readPath(t, path).Version > before.Version }).
					WithTimeout(30*time.Second).Should(BeTrue(), "a new hash is written")
				g.Eventually(func() bool { return hashMatches(readPath(t, path).Data) }).Should(BeTrue(), "the new hash matches the password")
				g.Expect(readPath(t, path).Data["password"]).To(Equal(before.Data["password"]), "the password is kept")
			} else {
				g.Expect(readPath(t, path).Version).To(Equal(before.Version), "nothing written")
				g.Expect(hashMatches(readPath(t, path).Data)).To(BeTrue(), "the hash matches the password")
			}
			successor.waitReady("app")
			g.Expect(successor.r.Generator.Cache.Compares()).To(Equal(tt.wantCompares), "bcrypt compares after the restart")
			assertNoValueEmitted(t, successor, readPath(t, path).Data)
		})
	}
}
