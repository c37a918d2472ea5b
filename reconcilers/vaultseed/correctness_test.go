package vaultseed

// Real-server tests of issue 12: nothing lost, nothing frozen, nothing
// stale.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// TestPruneKeepsWhatChangedSinceTheControllerWroteIt: a placeholder a
// person filled in and a generated key a person edited are kept when their
// declarations go with prune: true; an untouched generated key is removed
// (product document, "Pruning").
func TestPruneKeepsWhatChangedSinceTheControllerWroteIt(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	path := f.path("app")
	obj := f.seed("app", path, `{"keep": "x", "webhook": "", "edited": "<random:8>", "untouched": "<random:8>"}`)
	obj.Spec.Prune = true
	f.create(obj)
	f.waitReady("app")

	cur := readPath(t, path)
	cur.Data["webhook"] = "https://hooks.example/typed-by-a-person"
	cur.Data["edited"] = "edited-by-a-person"
	handWrite(t, path, cur.Data)
	f.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Data.Raw = []byte(`{"keep": "x"}`) })

	obj = f.waitReady("app")
	got := readPath(t, path)
	g.Expect(got.Data).NotTo(HaveKey("untouched"), "unchanged since the controller wrote it: pruned")
	g.Expect(got.Data).To(HaveKeyWithValue("webhook", "https://hooks.example/typed-by-a-person"))
	g.Expect(got.Data).To(HaveKeyWithValue("edited", "edited-by-a-person"))
	g.Expect(stamped(t, obj.Status.ManagedKeys)).To(Equal([]ohmlabv1alpha1.ManagedKey{{Key: "keep", Version: 3}}), "the kept keys are no longer managed; keep, unchanged, is carried to the prune's write")
	g.Expect(f.kv.Counts()["read-version"]).To(Equal(1), "one extra read: the version the controller wrote")
	g.Eventually(func() []string { return f.events("app") }).Should(ContainElement(
		"Normal Kept: kept: changed since the controller wrote it: edited, webhook"))
	assertNoValueEmitted(t, f, got.Data)
}

// TestStalledKeyDoesNotFreezeThePath: a hash of a placeholder not filled in
// yet creates the path without the hash (the placeholder included), keeps
// the rest of the path maintained while stalled, and writes the hash at the
// resync after a person fills the placeholder in (issue 12, item 3).
func TestStalledKeyDoesNotFreezeThePath(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{resync: time.Second})
	path := f.path("app")
	f.create(f.seed("app", path, `{"admin": {"username": "admin", "password": "", "passwordHashed": "<bcrypt:admin.password>"}, "copy": "<ref:`+path+`#admin.username>"}`))

	obj := f.waitReason("app", ohmlabv1alpha1.ReasonInvalidSpec, 10*time.Second)
	stalled := condition(obj, ohmlabv1alpha1.ConditionStalled)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Message).To(Equal(`admin.passwordHashed: cannot be computed while admin.password is empty; fill it in (echo '{"admin":{"password":"..."}}' | vault kv patch ` + path + ` -)`))
	want := map[string]any{"admin": map[string]any{"username": "admin", "password": ""}, "copy": "admin"}
	g.Expect(readPath(t, path).Data).To(Equal(want), "created with every key that can be computed")
	g.Expect(managedNames(obj)).To(Equal([]string{"admin.password", "admin.username", "copy"}))

	// While stalled: a copy edited by hand is put back, a deleted key comes back.
	handWrite(t, path, map[string]any{"admin": map[string]any{"password": ""}, "copy": "edited"})
	g.Eventually(func() map[string]any { return readPath(t, path).Data }).WithTimeout(10 * time.Second).Should(Equal(want))

	// A person fills the placeholder in: the hash follows at the next resync.
	handWrite(t, path, map[string]any{"admin": map[string]any{"username": "admin", "password": "typed-by-a-person"}, "copy": "admin"})
	f.waitReady("app")
	got := readPath(t, path).Data["admin"].(map[string]any)
	g.Expect(got["password"]).To(Equal("typed-by-a-person"))
	g.Expect(bcrypt.CompareHashAndPassword([]byte(got["passwordHashed"].(string)), []byte("typed-by-a-person"))).To(Succeed())
}

// TestWritesAreReportedWhenTheStatusWriteIsRefused: the API server refuses
// the object's status writes (a ValidatingAdmissionPolicy); the data write
// still gets its event and its metric, and its keys reach status.managedKeys
// at the next status write, without writing the path again (issue 12, item
// 4).
func TestWritesAreReportedWhenTheStatusWriteIsRefused(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	allow := f.refuseStatusWrites()

	path := f.path("app")
	f.create(f.seed("app", path, `{"pw": "<random:16>"}`))
	g.Eventually(func() []string { return f.events("app") }).WithTimeout(10 * time.Second).Should(ContainElement(HavePrefix("Normal Created: 1 create")))
	g.Expect(f.value("ohmlab_data_writes_total", map[string]string{"name": "app"})).To(Equal(1.0))
	g.Expect(f.get("app").Status.ManagedKeys).To(BeEmpty(), "the status write is refused")

	allow()
	obj := f.waitReady("app")
	g.Expect(stamped(t, obj.Status.ManagedKeys)).To(Equal([]ohmlabv1alpha1.ManagedKey{{Key: "pw", Version: 1}}))
	g.Expect(readPath(t, path).Version).To(Equal(1), "reported without writing the path again")
	g.Expect(f.value("ohmlab_data_writes_total", map[string]string{"name": "app"})).To(Equal(1.0))
}

// TestObserveOnlyNeverReportsAStalePlan: when an observe-only reconcile
// cannot plan, Drifted is Unknown with the reason and the planned-changes
// series are removed (issue 12, item 5).
func TestObserveOnlyNeverReportsAStalePlan(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{observeOnly: true, resync: time.Second})
	path := f.path("app")
	f.create(f.seed("app", path, `{"x": "<random:8>", "h": "<bcrypt:x>"}`))
	obj := f.waitReason("app", ohmlabv1alpha1.ReasonObserveOnly, 10*time.Second)
	g.Expect(condition(obj, ohmlabv1alpha1.ConditionDrifted).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(f.value("ohmlab_planned_changes", map[string]string{"name": "app", "action": planner.ActionCreateField})).To(Equal(2.0))

	f.update("app", func(o *ohmlabv1alpha1.VaultSeed) {
		o.Spec.Data.Raw = []byte(`{"x": "<random:8>", "h": "<bcrypt:x>", "c": "<ref:` + f.path("missing") + `#k>"}`)
	})
	obj = f.waitReason("app", ohmlabv1alpha1.ReasonRefPending, 10*time.Second)
	drifted := condition(obj, ohmlabv1alpha1.ConditionDrifted)
	g.Expect(drifted.Status).To(Equal(metav1.ConditionUnknown))
	g.Expect(drifted.Reason).To(Equal(ohmlabv1alpha1.ReasonRefPending))
	_, found := f.gaugeValue("ohmlab_planned_changes", map[string]string{"name": "app"})
	g.Expect(found).To(BeFalse(), "no planned change reported while it cannot plan")

	// Vault not answering: the same.
	port, err := harness.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	down, err := vaultkv.New(vaultkv.Config{Address: fmt.Sprintf("http://127.0.0.1:%d", port), Timeout: time.Second,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: harness.VaultRootToken}})
	g.Expect(err).NotTo(HaveOccurred())
	f2 := startController(t, controllerOptions{observeOnly: true, kv: down})
	f2.create(f2.seed("app", f2.path("app"), `{"x": "<random:8>"}`))
	obj = f2.waitReason("app", ohmlabv1alpha1.ReasonBackendUnavailable, 10*time.Second)
	g.Expect(condition(obj, ohmlabv1alpha1.ConditionDrifted).Status).To(Equal(metav1.ConditionUnknown))
	_, found = f2.gaugeValue("ohmlab_planned_changes", map[string]string{"name": "app"})
	g.Expect(found).To(BeFalse())
}

// TestLastReconcileTimestampMeansACompletedReconcile: an object that waits
// (RefPending) completes its reconciles, and its timestamp moves; against a
// Vault that hangs, reconciles time out and the timestamp stays at the
// first attempt, which sets it (issue 12, item 6).
func TestLastReconcileTimestampMeansACompletedReconcile(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	f.create(f.seed("dep", f.path("dep"), `{"c": "<ref:`+f.path("missing")+`#k>"}`))
	f.waitReason("dep", ohmlabv1alpha1.ReasonRefPending, 10*time.Second)
	labels := map[string]string{"name": "dep"}
	first, found := f.gaugeValue("ohmlab_object_last_reconcile_timestamp_seconds", labels)
	g.Expect(found).To(BeTrue())
	g.Eventually(func() float64 {
		v, _ := f.gaugeValue("ohmlab_object_last_reconcile_timestamp_seconds", labels)
		return v
	}).
		WithTimeout(10*time.Second).Should(BeNumerically(">", first), "the retry after the backoff completes")

	// A Vault that accepts connections and never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	hung, err := vaultkv.New(vaultkv.Config{Address: "http://" + l.Addr().String(), Timeout: 500 * time.Millisecond,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: harness.VaultRootToken}})
	g.Expect(err).NotTo(HaveOccurred())
	f2 := startController(t, controllerOptions{kv: hung})
	f2.create(f2.seed("app", f2.path("app"), `{"x": "<random:8>"}`))
	obj := f2.waitReason("app", ohmlabv1alpha1.ReasonBackendUnavailable, 10*time.Second)
	g.Expect(condition(obj, ohmlabv1alpha1.ConditionReady).Message).To(ContainSubstring("timed out"), "the status still says why")
	labels = map[string]string{"name": "app"}
	first, found = f2.gaugeValue("ohmlab_object_last_reconcile_timestamp_seconds", labels)
	g.Expect(found).To(BeTrue(), "the series exists from the first attempt")
	g.Eventually(func() int { return f2.kv.Counts()["read"] }).WithTimeout(15 * time.Second).Should(BeNumerically(">=", 2))
	g.Expect(f2.value("ohmlab_object_last_reconcile_timestamp_seconds", labels)).To(Equal(first), "no reconcile completed")
}

// TestFinalizerPatchesKeepAnotherControllersFinalizer: adding or removing
// the finalizer from a stale copy of the object fails on the real API
// server instead of dropping a finalizer added meanwhile (issue 12, item 8).
func TestFinalizerPatchesKeepAnotherControllersFinalizer(t *testing.T) {
	g := NewWithT(t)
	startServers(t)
	ctx := context.Background()
	ns := uniqueNamespace(t)
	g.Expect(cp.EnsureNamespace(ctx, ns)).To(Succeed())
	const other = "example.com/other"
	r := &Reconciler{Client: cp.Client, AllowDelete: true}
	obj := &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: ohmlabv1alpha1.VaultSeedSpec{Path: "ohmlab/platforms/" + ns + "/core/app", DeletionPolicy: ohmlabv1alpha1.DeletionPolicyDelete}}
	g.Expect(cp.Client.Create(ctx, obj)).To(Succeed())

	addOther := func() {
		fresh := &ohmlabv1alpha1.VaultSeed{}
		g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), fresh)).To(Succeed())
		controllerutil.AddFinalizer(fresh, other)
		g.Expect(cp.Client.Update(ctx, fresh)).To(Succeed())
	}
	current := func() *ohmlabv1alpha1.VaultSeed {
		fresh := &ohmlabv1alpha1.VaultSeed{}
		g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), fresh)).To(Succeed())
		return fresh
	}

	stale := current()
	addOther()
	g.Expect(r.syncFinalizer(ctx, stale)).To(MatchError(ContainSubstring("the object has been modified")))
	g.Expect(r.syncFinalizer(ctx, current())).To(Succeed())
	g.Expect(current().Finalizers).To(ConsistOf(other, ohmlabv1alpha1.Finalizer))

	// Removal (the object goes back to Retain) from a stale copy.
	fresh := current()
	fresh.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyRetain
	g.Expect(cp.Client.Update(ctx, fresh)).To(Succeed())
	stale = current()
	fresh = current()
	fresh.Annotations = map[string]string{"touched": "yes"}
	g.Expect(cp.Client.Update(ctx, fresh)).To(Succeed())
	g.Expect(r.syncFinalizer(ctx, stale)).To(MatchError(ContainSubstring("the object has been modified")))
	g.Expect(r.syncFinalizer(ctx, current())).To(Succeed())
	g.Expect(current().Finalizers).To(Equal([]string{other}))
	g.Expect(strings.Join(current().Finalizers, ",")).NotTo(ContainSubstring(ohmlabv1alpha1.Finalizer))
}

// TestAWriteWhoseAnswerWasLostIsReported: a proxy in front of Vault forwards
// the first data write and loses its answer (502). The next reconcile finds
// the write landed: one event, one counted write, and no second version.
// Its keys are not managed: only a write whose answer the controller saw
// makes a key one a prune may remove (DESIGN.md, "Provenance").
func TestAWriteWhoseAnswerWasLostIsReported(t *testing.T) {
	g := NewWithT(t)
	startServers(t)
	target, err := url.Parse(vault.Addr)
	g.Expect(err).NotTo(HaveOccurred())
	var lost atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodGet && strings.Contains(resp.Request.URL.Path, "/ohmlab/data/") && lost.Add(1) == 1 {
			return errors.New("the answer is lost")
		}
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	kv, err := vaultkv.New(vaultkv.Config{Address: srv.URL, Timeout: 2 * time.Second,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: harness.VaultRootToken}})
	g.Expect(err).NotTo(HaveOccurred())
	f := startController(t, controllerOptions{kv: kv})
	path := f.path("app")
	f.create(f.seed("app", path, `{"pw": "<random:16>"}`))

	obj := f.waitReady("app")
	g.Expect(lost.Load()).To(BeNumerically(">=", 1), "the first write's answer was lost")
	g.Expect(readPath(t, path).Version).To(Equal(1), "no second version")
	g.Expect(obj.Status.ManagedKeys).To(BeEmpty())
	g.Expect(f.value("ohmlab_data_writes_total", map[string]string{"name": "app"})).To(Equal(1.0))
	g.Eventually(func() int { return f.emissions("app", "Normal", "Created") }).Should(Equal(1))
}
