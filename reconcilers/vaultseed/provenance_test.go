package vaultseed

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	. "github.com/onsi/gomega"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// Real-server tests of issue 23, item 2: prune provenance survives Vault's
// version history.

// keptVersions is the max_versions of the tests' mounts and paths: fewer
// than the versions the tests make.
const keptVersions = 3

// limitedMount enables a KV v2 mount for the test, with max_versions set on
// the mount when onMount, and returns the path of name on it.
func limitedMount(t *testing.T, f *fixture, name string, onMount bool) string {
	t.Helper()
	mount := fmt.Sprintf("kv%d-%d", keptVersions, time.Now().UnixNano()%1000000)
	if err := vault.Client.Sys().Mount(mount, &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatalf("enabling the KV v2 mount %s: %v", mount, err)
	}
	t.Cleanup(func() { _ = vault.Client.Sys().Unmount(mount) })
	if onMount {
		if _, err := vault.Client.Logical().Write(mount+"/config", map[string]any{"max_versions": keptVersions}); err != nil {
			t.Fatalf("setting max_versions on the mount %s: %v", mount, err)
		}
	}
	return mount + "/platforms/" + f.ns + "/core/" + name
}

// limitPath sets max_versions in the path's metadata, keeping its
// custom_metadata.
func limitPath(t *testing.T, path string) {
	t.Helper()
	mount, rest, _ := strings.Cut(path, "/")
	err := vault.Client.KVv2(mount).PatchMetadata(context.Background(), rest, vaultapi.KVMetadataPatchInput{MaxVersions: new(keptVersions)})
	if err != nil {
		t.Fatalf("setting max_versions on %s: %v", path, err)
	}
}

// keyNames are the dotted keys of a data tree, sorted: what a test asserts
// on, so that a failure prints no value.
func keyNames(data map[string]any) []string {
	return slices.Sorted(maps.Keys(templating.Flatten(data)))
}

// handEditOther writes another key of the path by hand (one more version)
// and returns the version.
func handEditOther(t *testing.T, path string, i int) int {
	t.Helper()
	cur := readPath(t, path)
	cur.Data["other"] = fmt.Sprintf("typed-by-a-person-%d", i)
	return handWrite(t, path, cur.Data)
}

// TestPruneAfterMoreVersionsThanVaultKeeps: a key the controller wrote and
// nobody changed is pruned after more hand edits of another key than Vault
// keeps versions, each seen by a resync, whether max_versions is set on the
// mount or on the path. A key a person changed keeps its record (so it is
// never pruned: once that version is gone the controller cannot tell), and
// quiet resyncs read no older version.
func TestPruneAfterMoreVersionsThanVaultKeeps(t *testing.T) {
	for _, onMount := range []bool{true, false} {
		name := "max_versions on the path"
		if onMount {
			name = "max_versions on the mount"
		}
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			f := startController(t, controllerOptions{resync: time.Second})
			path := limitedMount(t, f, "app", onMount)
			obj := f.seed("app", path, `{"keep": "<random:8>", "old": "<random:8>", "typed": "<random:8>"}`)
			obj.Spec.Prune = true
			f.create(obj)
			f.waitReady("app")
			if !onMount {
				limitPath(t, path)
			}
			cur := readPath(t, path)
			cur.Data["typed"] = "typed-by-a-person"
			handWrite(t, path, cur.Data)
			for i := range 2 * keptVersions {
				v := handEditOther(t, path, i)
				g.Eventually(func() int64 { return f.get("app").Status.Version }).WithTimeout(time.Minute).
					Should(Equal(int64(v)), "a resync reads version %d", v)
			}
			g.Expect(stamped(t, f.get("app").Status.ManagedKeys)).To(ContainElement(ohmlabv1alpha1.ManagedKey{Key: "typed", Version: 1}), "changed by a person: its record stays")
			before := f.kv.Counts()
			time.Sleep(3 * time.Second) // three resync periods
			after := f.kv.Counts()
			g.Expect(after["read-version"]).To(Equal(before["read-version"]), "quiet resyncs read no older version")
			g.Expect(after["write"]).To(Equal(before["write"]), "quiet resyncs write nothing")
			f.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Data.Raw = []byte(`{"keep": "<random:8>"}`) })

			obj = f.waitReady("app")
			got := readPath(t, path)
			g.Expect(keyNames(got.Data)).NotTo(ContainElement("old"), "unchanged since the controller wrote it, %d versions ago: pruned", 2*keptVersions+2)
			g.Expect(got.Data["typed"]).To(Equal("typed-by-a-person"), "what a person typed is never pruned")
			g.Expect(got.Data["other"]).To(Equal(fmt.Sprintf("typed-by-a-person-%d", 2*keptVersions-1)), "the last hand edit")
			g.Expect(stamped(t, obj.Status.ManagedKeys)).To(Equal([]ohmlabv1alpha1.ManagedKey{{Key: "keep", Version: int64(got.Version)}}))
			g.Eventually(func() []string { return f.events("app") }).Should(ContainElement(
				"Normal Kept: kept: cannot tell: version 1 can no longer be read (deleted, destroyed or past max_versions): typed"), "old is not kept")
			assertNoValueEmitted(t, f, got.Data)
		})
	}
}

// TestPruneCannotTellOnceTheVersionIsGone: more hand edits between two
// reconciles than Vault keeps versions: the version the controller wrote is
// gone, so the key is kept, and the event says the controller cannot tell
// rather than that the key changed.
func TestPruneCannotTellOnceTheVersionIsGone(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	path := limitedMount(t, f, "app", true)
	obj := f.seed("app", path, `{"keep": "<random:8>", "old": "<random:8>"}`)
	obj.Spec.Prune = true
	f.create(obj)
	f.waitReady("app")
	for i := range keptVersions + 1 {
		handEditOther(t, path, i)
	}
	f.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Data.Raw = []byte(`{"keep": "<random:8>"}`) })

	obj = f.waitReady("app")
	got := readPath(t, path)
	g.Expect(keyNames(got.Data)).To(ContainElement("old"), "version 1 is gone: the controller cannot tell that old is its own")
	g.Expect(managedNames(obj)).To(Equal([]string{"keep"}), "kept keys are no longer managed")
	g.Eventually(func() []string { return f.events("app") }).Should(ContainElement(
		"Normal Kept: kept: cannot tell: version 1 can no longer be read (deleted, destroyed or past max_versions): old"))
	assertNoValueEmitted(t, f, got.Data)
}

// TestPruneAfterCopiesFollowedASource: a copy following a rotated source
// rewrites the path more times than Vault keeps versions; a key the
// controller wrote before and nobody changed is still pruned, and carrying
// it through the controller's own writes reads no older version.
func TestPruneAfterCopiesFollowedASource(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	src := f.path("src")
	path := limitedMount(t, f, "app", true)
	source := f.seed("src", src, `{"password": "<random:16>"}`)
	source.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "0"}
	f.create(source)
	f.waitReady("src")
	obj := f.seed("app", path, `{"copy": "<ref:`+src+`#password>", "old": "<random:8>"}`)
	obj.Spec.Prune = true
	f.create(obj)
	f.waitReady("app")
	reads := f.kv.Counts()["read-version"]
	for i := range 2 * keptVersions {
		version := readPath(t, path).Version
		f.update("src", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Rotate.Token = fmt.Sprint(i + 1) })
		g.Eventually(func() int { return readPath(t, path).Version }).WithTimeout(time.Minute).
			Should(BeNumerically(">", version), "the copy follows rotation %d", i+1)
	}
	g.Eventually(func() int64 { return f.get("app").Status.Version }).WithTimeout(time.Minute).Should(Equal(int64(readPath(t, path).Version)))
	g.Expect(f.kv.Counts()["read-version"]).To(Equal(reads), "carried through the controller's own writes without reading")
	f.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Data.Raw = []byte(`{"copy": "<ref:` + src + `#password>"}`) })

	f.waitReady("app")
	got := readPath(t, path)
	g.Expect(keyNames(got.Data)).NotTo(ContainElement("old"), "unchanged since the controller wrote it: pruned")
	g.Expect(f.events("app")).NotTo(ContainElement(HavePrefix("Normal Kept")))
	assertNoValueEmitted(t, f, got.Data)
}
