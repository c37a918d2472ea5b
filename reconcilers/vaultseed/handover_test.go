package vaultseed

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner/plantest"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// stopAfterWrite stops its process right after its first data write lands,
// before anything else of the reconcile (the status write) can happen, as a
// process killed or losing its Lease at that moment.
type stopAfterWrite struct {
	vaultkv.KV
	stop    func()
	stopped chan struct{}
}

func (s *stopAfterWrite) Write(ctx context.Context, path string, data map[string]any, cas int) (vaultkv.Written, error) {
	v, err := s.KV.Write(ctx, path, data, cas)
	s.stop()
	close(s.stopped)
	return v, err
}

// TestSuccessorReportsAWriteItsProcessDidNot: a process stops between its
// data write and its status write; the process that takes over reports the
// write from the path's custom_metadata: its event and its counted write
// (its keys are not managed: DESIGN.md, "Provenance"), and writes no second
// version (issue 23,
// item 6). A record longer than one custom_metadata value continues under
// numbered keys, which the real Vault accepts.
func TestSuccessorReportsAWriteItsProcessDidNot(t *testing.T) {
	tests := []struct {
		name      string
		keys      []string
		wantParts int
	}{
		{name: "a few keys", keys: []string{"admin.password", "apiKey"}, wantParts: 1},
		{name: "more key names than one custom_metadata value holds", keys: plantest.ManyKeys(40), wantParts: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			startServers(t)
			tree := map[string]any{}
			for _, k := range tt.keys {
				templating.SetPath(tree, k, "<random:8>")
			}
			data, err := json.Marshal(tree)
			g.Expect(err).NotTo(HaveOccurred())

			stopping := &stopAfterWrite{KV: rootKV(t), stopped: make(chan struct{})}
			first := startController(t, controllerOptions{kv: stopping})
			stopping.stop = first.cancel
			path := first.path("app")
			first.create(first.seed("app", path, string(data)))
			select {
			case <-stopping.stopped:
			case <-time.After(20 * time.Second):
				t.Fatal("the first process never wrote the path")
			}
			written := readPath(t, path)
			g.Expect(written.Version).To(Equal(1))
			// The stopped process wrote no status.
			g.Consistently(func() []ohmlabv1alpha1.ManagedKey { return first.get("app").Status.ManagedKeys }).WithTimeout(time.Second).Should(BeEmpty())

			successor := startController(t, controllerOptions{namespace: first.ns})
			obj := successor.waitReady("app")
			g.Expect(obj.Status.ManagedKeys).To(BeEmpty(), "the stopped process saw no answer: its keys are not made managed from the record")
			g.Expect(obj.Status.Version).To(Equal(int64(1)))
			g.Expect(readPath(t, path).Version).To(Equal(1), "no second version")
			g.Expect(successor.value("ohmlab_data_writes_total", map[string]string{"name": "app"})).To(Equal(1.0), "the successor counts the write")
			g.Eventually(func() []string { return successor.events("app") }).Should(ContainElement(MatchRegexp(`^Normal Created: 1 create, %d create-field \(.*\) \(KV version 1\)$`, len(tt.keys))))
			g.Expect(successor.kv.Counts()["write"]).To(Equal(0))
			g.Expect(successor.kv.Counts()["read-version"]).To(Equal(0), "the path was created: no version before it to read")
			parts := 0
			for k := range written.Metadata {
				if strings.HasPrefix(k, ohmlabv1alpha1.WriteMetadataKey) {
					parts++
				}
			}
			g.Expect(parts).To(Equal(tt.wantParts), "custom_metadata keys of the record, as Vault accepted them")
			assertNoValueEmitted(t, successor, readPath(t, path).Data)
		})
	}
}

// TestTwoProcessesRotateOnce: two processes reconcile one object under
// different Leases, as while its shard label moves. The first to rotate
// for a new token is held between its data write and its token record
// until the other has reconciled the token too: the key is rotated once,
// one KV version, and the token recorded (issue 23, item 7).
func TestTwoProcessesRotateOnce(t *testing.T) {
	g := NewWithT(t)
	startServers(t)
	proxy := harness.KVProxyForTest(t, vault.Addr, harness.VaultMount)
	viaProxy := func() vaultkv.KV {
		// The hook holds a request for seconds: a timeout longer than the hold.
		kv, err := vaultkv.New(vaultkv.Config{Address: proxy.URL, Timeout: 30 * time.Second,
			Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: harness.VaultRootToken}})
		g.Expect(err).NotTo(HaveOccurred())
		return kv
	}
	a := startController(t, controllerOptions{kv: viaProxy()})
	startController(t, controllerOptions{kv: viaProxy(), namespace: a.ns})
	path := a.path("app")
	obj := a.seed("app", path, `{"user": "admin", "password": "<random:24>"}`)
	obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1", Keys: []string{"password"}}
	a.create(obj)
	a.waitReady("app")
	g.Eventually(func() map[string]any { return readPath(t, path).Metadata }).Should(HaveKeyWithValue(ohmlabv1alpha1.RotationTokenMetadataKey, "t1"))
	created := readPath(t, path)
	g.Expect(created.Version).To(Equal(1))

	held := proxy.Once(harness.BeforeForwarding, func(r harness.KVRequest) bool {
		return r.Path == path && r.Kind == harness.KVMetadata && r.Write() &&
			r.CustomMetadata[ohmlabv1alpha1.RotationTokenMetadataKey] == "t2" && r.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey] == ""
	}, func(harness.KVRequest) bool {
		// Until the other process has recorded the token, or 15 s.
		mount, rest, _ := strings.Cut(path, "/")
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if s, err := vault.Client.KVv2(mount).Get(context.Background(), rest); err == nil && s.CustomMetadata[ohmlabv1alpha1.RotationTokenMetadataKey] == "t2" {
				break
			}
		}
		return true
	})
	a.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Rotate.Token = "t2" })
	select {
	case <-held.Fired():
	case <-time.After(30 * time.Second):
		t.Fatal("no process recorded the token t2")
	}

	g.Eventually(func(g Gomega) {
		o := a.get("app")
		g.Expect(o.Status.ObservedGeneration).To(Equal(o.Generation))
		g.Expect(condition(o, ohmlabv1alpha1.ConditionReady).Reason).To(Equal(ohmlabv1alpha1.ReasonReconciled))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	after := readPath(t, path)
	g.Expect(after.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.RotationTokenMetadataKey, "t2"))
	g.Expect(after.Version).To(Equal(2), "one rotation: one KV version after the creation")
	g.Expect(after.Data["password"]).NotTo(Equal(created.Data["password"]), "the key was rotated")
	g.Expect(after.Data["user"]).To(Equal("admin"))
}
