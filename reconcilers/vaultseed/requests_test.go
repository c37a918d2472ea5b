package vaultseed

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	. "github.com/onsi/gomega"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// A new path costs Vault one read and two writes, counted on the wire by a
// proxy in front of the real Vault (issue 25, item 2): the read is of its
// metadata (an object never written), which tells that the path has none,
// so that the owner marker (with the record of the write, and the rotation
// token only when rotate is declared) creates them in one request; then the
// data with cas=0. A dependent reconciled while
// its source's object is still writing waits for that write instead of
// reading the source before it exists: neither path is read twice.
func TestANewPathCostsOneReadAndTwoWrites(t *testing.T) {
	g := NewWithT(t)
	startServers(t)
	proxy := harness.KVProxyForTest(t, vault.Addr, harness.VaultMount)
	// The proxy holds a request for a while below: a timeout longer than
	// the hold.
	kv, err := vaultkv.New(vaultkv.Config{Address: proxy.URL, Timeout: 30 * time.Second,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: harness.VaultRootToken}})
	g.Expect(err).NotTo(HaveOccurred())
	f := startController(t, controllerOptions{kv: kv})

	// A source whose marker is held until its dependent has read its own
	// path: the dependent's reconcile then runs while the source's does.
	src, dep := f.path("src"), f.path("dep")
	seen := func(path string) <-chan struct{} {
		return proxy.Once(harness.AfterForwarding, func(r harness.KVRequest) bool {
			return r.Path == path && r.Method == http.MethodGet
		}, func(harness.KVRequest) bool { return true }).Fired()
	}
	release := make(chan struct{})
	proxy.Once(harness.BeforeForwarding, func(r harness.KVRequest) bool {
		return r.Path == src && r.Kind == harness.KVMetadata && r.Write()
	}, func(harness.KVRequest) bool { <-release; return true })
	srcRead, depRead := seen(src), seen(dep)
	f.create(f.seed("src", src, `{"password": "<random:24>", "hash": "<bcrypt:password>"}`))
	<-srcRead
	f.create(f.seed("dep", dep, `{"copy": "<ref:`+src+`#password>"}`))
	<-depRead
	// Time for the dependent to reach its source's read (without waiting,
	// it would read the source absent now and go RefPending).
	time.Sleep(500 * time.Millisecond)
	close(release)

	plain := map[string]string{
		"one":     `{"password": "<random:24>"}`,
		"hashed":  `{"password": "<random:24>", "hash": "<bcrypt:password>"}`,
		"rotated": `{"user": "admin", "password": "<random:24>"}`,
	}
	for name, data := range plain {
		obj := f.seed(name, f.path(name), data)
		if name == "rotated" {
			obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1", Keys: []string{"password"}}
		}
		f.create(obj)
	}
	names := []string{"src", "dep", "one", "hashed", "rotated"}
	for _, name := range names {
		f.waitReady(name)
	}
	// Time for a stray reconcile (a retry, a second read) to show.
	time.Sleep(2 * time.Second)

	type cost struct {
		Reads, MetadataReads, VersionReads, MetadataPatches, MetadataPosts, DataWrites, TokenRecords int
	}
	got := map[string]cost{}
	for _, r := range proxy.Seen() {
		c := got[r.Path]
		switch {
		case r.Kind == harness.KVData && r.Method == http.MethodGet && r.Version > 0:
			c.VersionReads++
		case r.Kind == harness.KVData && r.Method == http.MethodGet:
			c.Reads++
		case r.Kind == harness.KVMetadata && r.Method == http.MethodGet:
			c.MetadataReads++
		case r.Kind == harness.KVData && r.Write():
			c.DataWrites++
		case r.Kind == harness.KVMetadata && r.Method == http.MethodPatch:
			c.MetadataPatches++
		case r.Kind == harness.KVMetadata && r.Write():
			c.MetadataPosts++
		}
		if _, ok := r.CustomMetadata[ohmlabv1alpha1.RotationTokenMetadataKey]; ok {
			c.TokenRecords++
		}
		got[r.Path] = c
	}
	want := map[string]cost{}
	for _, name := range names {
		c := cost{MetadataReads: 1, MetadataPosts: 1, DataWrites: 1}
		if name == "rotated" {
			c.TokenRecords = 1 // in the marker
		}
		want[f.path(name)] = c
	}
	g.Expect(got).To(Equal(want), "Vault requests by path (a new path: 1 metadata read, 1 metadata write, 1 data write)")
	g.Expect(readPath(t, src).Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.OwnerMetadataKey, f.ns+"/src"))
	g.Expect(readPath(t, dep).Data["copy"]).To(Equal(readPath(t, src).Data["password"]))
}

// A path whose metadata a person put before its VaultSeed existed (`vault
// kv metadata put -custom-metadata=team=x -max-versions=3`, no version) keeps
// them: the owner marker is merged into custom_metadata, never replacing it
// (issue 25, item 2: Vault's data read answers the same 404 with or without
// such metadata).
func TestANewPathKeepsMetadataPutBeforeIt(t *testing.T) {
	g := NewWithT(t)
	startServers(t)
	f := startController(t, controllerOptions{})
	path := f.path("premarked")
	mount, rest, _ := strings.Cut(path, "/")
	g.Expect(vault.Client.KVv2(mount).PutMetadata(context.Background(), rest, vaultapi.KVMetadataPutInput{
		MaxVersions: 3, CustomMetadata: map[string]any{"team": "x"}})).To(Succeed())

	f.create(f.seed("premarked", path, `{"password": "<random:24>"}`))
	f.waitReady("premarked")

	got := readPath(t, path)
	g.Expect(got.Metadata).To(HaveKeyWithValue("team", "x"), "the custom_metadata a person put")
	g.Expect(got.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.OwnerMetadataKey, f.ns+"/premarked"))
	g.Expect(got.Data).To(HaveKey("password"))
	md, err := vault.Client.KVv2(mount).GetMetadata(context.Background(), rest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(md.MaxVersions).To(Equal(3))
}
