package vaultseed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// The real-server tests of issue 5's acceptance list that
// integration_test.go does not hold: one test per behaviour of the product
// document's "What the controller does with a path", "Deletion" and
// "Conditions".

// managedNames are the key names of status.managedKeys.
func managedNames(obj *ohmlabv1alpha1.VaultSeed) []string {
	var out []string
	for _, k := range obj.Status.ManagedKeys {
		out = append(out, k.Key)
	}
	return out
}

// condition returns the object's condition of type typ, or nil.
func condition(obj *ohmlabv1alpha1.VaultSeed, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(obj.Status.Conditions, typ)
}

// pathMissing says whether the path has no metadata at all in Vault (never
// written, or deleted with all its versions).
func pathMissing(t testing.TB, path string) bool {
	t.Helper()
	mount, rest, _ := strings.Cut(path, "/")
	_, err := vault.Client.KVv2(mount).GetMetadata(context.Background(), rest)
	if errors.Is(err, vaultapi.ErrSecretNotFound) {
		return true
	}
	if err != nil {
		t.Fatalf("reading the metadata of %s: %v", path, err)
	}
	return false
}

// seedEvents returns the events regarding one object.
func (f *fixture) seedEvents(name string) []eventsv1.Event {
	f.t.Helper()
	var list eventsv1.EventList
	NewWithT(f.t).Expect(cp.Client.List(context.Background(), &list, client.InNamespace(f.ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// emissions counts how often an event of that type and reason was emitted
// for the object: the events recorder folds repeats into one Event with a
// series (count 2 on the first repeat).
func (f *fixture) emissions(name, typ, reason string) int {
	n := 0
	for _, e := range f.seedEvents(name) {
		if e.Type != typ || e.Reason != reason {
			continue
		}
		n++
		if e.Series != nil {
			n += int(e.Series.Count) - 1
		}
	}
	return n
}

// gaugeValue returns the value (gauge or counter) of the metric family's series whose labels
// include want, and whether there is one.
func (f *fixture) gaugeValue(family string, want map[string]string) (float64, bool) {
	f.t.Helper()
	mfs, err := f.metrics.Gather()
	NewWithT(f.t).Expect(err).NotTo(HaveOccurred())
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// value is gaugeValue's value, 0 when there is no such series.
func (f *fixture) value(family string, want map[string]string) float64 {
	v, _ := f.gaugeValue(family, want)
	return v
}

// pathCounter counts the spy's operations, per operation ("read") and per
// operation and path ("read <path>").
type pathCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *pathCounter) hook(op, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op]++
	c.n[op+" "+path]++
}

func (c *pathCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// reconciles returns how many reconciles the VaultSeed controllers of the
// process have finished (controller_runtime_reconcile_total); only the
// running test's controller adds to it.
func reconciles(t testing.TB) int {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "controller" && lp.GetValue() == "vaultseed" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}

// quiescent returns the reconcile count and the operation counts at a
// moment when no reconcile is running: both stay the same for 100 ms (a
// quiet reconcile takes a few milliseconds).
func (f *fixture) quiescent(c *pathCounter) (int, map[string]int) {
	f.t.Helper()
	for {
		r, ops := reconciles(f.t), c.snapshot()
		time.Sleep(100 * time.Millisecond)
		if reconciles(f.t) == r && maps.Equal(c.snapshot(), ops) {
			return r, ops
		}
	}
}

func TestConcurrentHandWriteDuringReconcileIsKept(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	path := f.path("app")
	f.create(f.seed("app", path, `{"user": "admin", "password": "<random:16>"}`))
	f.waitReady("app")
	v1 := readPath(t, path)

	// Right before the controller's next data write, a person edits the
	// generated value and adds a key of their own.
	var fired atomic.Bool
	var handErr error
	mount, rest, _ := strings.Cut(path, "/")
	f.kv.setBefore(func(op, p string) {
		if op != "write" || p != path || !fired.CompareAndSwap(false, true) {
			return
		}
		_, handErr = vault.Client.KVv2(mount).Put(context.Background(), rest, map[string]any{
			"user": "admin", "password": "typed-by-hand", "handKey": "kept",
		})
	})
	f.update("app", func(o *ohmlabv1alpha1.VaultSeed) {
		o.Spec.Data.Raw = []byte(`{"user": "admin", "password": "<random:16>", "extra": "<hex:8>"}`)
	})
	// The reconcile that met the conflict reads and plans again at once:
	// no backoff, no failing state.
	obj := f.waitReason("app", ohmlabv1alpha1.ReasonReconciled, 3*time.Second)
	g.Expect(fired.Load()).To(BeTrue(), "the hook ran")
	g.Expect(handErr).NotTo(HaveOccurred())

	got := readPath(t, path)
	g.Expect(got.Data["handKey"]).To(Equal("kept"), "the concurrent hand write is kept")
	g.Expect(got.Data["password"]).To(Equal("typed-by-hand"), "the stale value read before the hand write is not written back")
	g.Expect(got.Data["user"]).To(Equal("admin"))
	g.Expect(got.Data["extra"]).To(MatchRegexp(`^[0-9a-f]{8}$`))
	g.Expect(got.Version).To(Equal(v1.Version+2), "the hand write, then one write after reading again")
	g.Expect(obj.Status.Version).To(Equal(int64(got.Version)))
	g.Expect(f.kv.Counts()["write"]).To(Equal(3), "the creation, the write that met the conflict, the write after it")
	g.Expect(f.logs.String()).To(ContainSubstring("the path changed while reconciling"))
	g.Expect(managedNames(obj)).NotTo(ContainElement("handKey"), "a key written by somebody else is not managed")
	g.Consistently(func() []eventsv1.Event { return warnings(f.seedEvents("app")) }).WithTimeout(time.Second).Should(BeEmpty())
}

func TestRotationWritesOneVersionPerToken(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{resync: time.Second})
	path := f.path("app")
	obj := f.seed("app", path, `{"user": "admin", "password": "<random:16>", "other": "<random:16>"}`)
	obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1", Keys: []string{"password"}}
	f.create(obj)
	f.waitReady("app")
	created := readPath(t, path)
	g.Expect(created.Version).To(Equal(1), "creating an object with a token does not rotate")
	g.Expect(created.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.RotationTokenMetadataKey, "t1"))
	g.Consistently(func() int { return readPath(t, path).Version }).WithTimeout(3*time.Second).Should(Equal(1), "later resyncs write nothing")

	for i, token := range []string{"t2", "t3"} {
		before := readPath(t, path)
		f.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Rotate.Token = token })
		f.waitReady("app")
		want := created.Version + i + 1
		g.Eventually(func() int { return readPath(t, path).Version }).WithTimeout(5 * time.Second).Should(Equal(want))
		g.Consistently(func() int { return readPath(t, path).Version }).WithTimeout(3*time.Second).Should(Equal(want),
			"one KV version per token, none on later resyncs")
		after := readPath(t, path)
		g.Expect(after.Data["password"]).To(MatchRegexp(`^[A-Za-z0-9]{16}$`))
		g.Expect(after.Data["password"]).NotTo(Equal(before.Data["password"]), "the listed key is regenerated")
		g.Expect(after.Data["other"]).To(Equal(created.Data["other"]), "a key not listed is not")
		g.Expect(after.Data["user"]).To(Equal("admin"))
		g.Expect(after.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.RotationTokenMetadataKey, token))
	}
	g.Eventually(func() int { return f.emissions("app", "Normal", "Rotated") }).Should(Equal(2))
}

func TestRotationTokenThatCannotBeRecordedIsForbiddenAndRetriedWithBackoff(t *testing.T) {
	g := NewWithT(t)
	startServers(t)
	ctx := context.Background()
	// A policy that reads and writes data but only reads metadata: the
	// token can be used, its record cannot.
	policy := "ohmlab-no-metadata-write-" + fmt.Sprint(time.Now().UnixNano())
	g.Expect(vault.Client.Sys().PutPolicyWithContext(ctx, policy, `
path "ohmlab/data/*" { capabilities = ["read", "create", "update"] }
path "ohmlab/metadata/*" { capabilities = ["read"] }
`)).To(Succeed())
	tok, err := vault.Client.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: []string{policy}, TTL: "1h"})
	g.Expect(err).NotTo(HaveOccurred())
	kv, err := vaultkv.New(vaultkv.Config{Address: vault.Addr, Timeout: 2 * time.Second,
		Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: tok.Auth.ClientToken}})
	g.Expect(err).NotTo(HaveOccurred())
	f := startController(t, controllerOptions{kv: kv})

	// The path exists already and carries this object's marker, so the
	// controller needs no metadata write but the token's.
	path := f.path("app")
	handWrite(t, path, map[string]any{"password": "typed-by-hand"})
	handMark(t, path, map[string]any{ohmlabv1alpha1.OwnerMetadataKey: f.ns + "/app"})
	obj := f.seed("app", path, `{"password": "<random:16>"}`)
	obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1"}
	f.create(obj)
	start := time.Now()

	got := f.waitReason("app", ohmlabv1alpha1.ReasonForbidden, 10*time.Second)
	g.Expect(condition(got, ohmlabv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	rec := condition(got, ohmlabv1alpha1.ConditionReconciling)
	g.Expect(rec).NotTo(BeNil(), "a refusal of Vault is retried with backoff")
	g.Expect(rec.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(rec.Message).To(ContainSubstring("permission denied"), "the message carries Vault's reason")
	g.Expect(condition(got, ohmlabv1alpha1.ConditionStalled)).To(BeNil())

	time.Sleep(20*time.Second - time.Since(start))
	after := readPath(t, path)
	attempts := f.kv.Counts()["mark"]
	t.Logf("rotation attempts in 20 s: %d", attempts)
	g.Expect(attempts).To(BeNumerically(">=", 2), "the rotation is attempted again until its metadata can be written")
	g.Expect(attempts).To(BeNumerically("<=", 5), "with backoff (5 s doubling), not a hot loop")
	// The record of the write is refused with the token's metadata write,
	// before the data write: nothing is rotated that a successor could not
	// report (issue 23, items 6 and 7).
	g.Expect(f.kv.Counts()["write"]).To(Equal(0))
	g.Expect(after.Version).To(Equal(1), "no rotation without its record")
	g.Expect(after.Data["password"]).To(Equal("typed-by-hand"))
	g.Expect(after.Metadata).NotTo(HaveKey(ohmlabv1alpha1.RotationTokenMetadataKey))
	g.Expect(f.emissions("app", "Warning", ohmlabv1alpha1.ReasonForbidden)).To(Equal(1), "one Warning when entering the failing state")
	g.Expect(f.emissions("app", "Normal", "Rotated")).To(Equal(0))
	g.Expect(f.value("ohmlab_data_writes_total", map[string]string{"name": "app"})).To(Equal(0.0))
	assertNoValueEmitted(t, f, after.Data)
}

func TestAdoptionOfAHandMadePathWritesOnlyTheMarker(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	path := f.path("legacy")
	data := map[string]any{"user": "admin", "password": "typed-by-hand-1234"}
	v := handWrite(t, path, data)
	f.create(f.seed("legacy", path, `{"user": "admin", "password": "<random:24>"}`))
	obj := f.waitReady("legacy")

	got := readPath(t, path)
	g.Expect(got.Version).To(Equal(v), "adoption creates no KV version")
	g.Expect(got.Data).To(Equal(data), "adoption leaves the data alone")
	g.Expect(got.Metadata).To(Equal(map[string]any{ohmlabv1alpha1.OwnerMetadataKey: f.ns + "/legacy"}))
	g.Expect(f.kv.Counts()["write"]).To(Equal(0))
	g.Expect(f.kv.Counts()["mark"]).To(Equal(1))
	g.Expect(obj.Status.Version).To(Equal(int64(v)))
	g.Expect(managedNames(obj)).To(BeEmpty(), "the controller wrote no key")
	g.Eventually(func() []string { return f.events("legacy") }).Should(ContainElement("Normal Adopted: 1 adopt (KV version 1)"))
	assertNoValueEmitted(t, f, data)
}

func TestPruneRemovesOnlyManagedKeys(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	pruned, kept := f.path("pruned"), f.path("kept")
	for name, path := range map[string]string{"pruned": pruned, "kept": kept} {
		obj := f.seed(name, path, `{"a": "<random:8>", "b": "x"}`)
		obj.Spec.Prune = name == "pruned"
		f.create(obj)
		f.waitReady(name)
		// Somebody else adds a key of their own.
		cur := readPath(t, path)
		cur.Data["other"] = "written-by-someone"
		handWrite(t, path, cur.Data)
	}
	for _, name := range []string{"pruned", "kept"} {
		f.update(name, func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Data.Raw = []byte(`{"b": "x"}`) })
	}

	obj := f.waitReady("pruned")
	got := readPath(t, pruned)
	g.Expect(got.Data).NotTo(HaveKey("a"), "a managed key data no longer declares is removed")
	g.Expect(got.Data).To(HaveKeyWithValue("b", "x"))
	g.Expect(got.Data).To(HaveKeyWithValue("other", "written-by-someone"), "a key written by somebody else stays")
	g.Expect(managedNames(obj)).To(Equal([]string{"b"}))

	before := readPath(t, kept)
	obj = f.waitReady("kept")
	g.Expect(readPath(t, kept)).To(Equal(before))
	g.Expect(before.Data).To(HaveKey("a"), "prune=false removes nothing")
	g.Expect(before.Data).To(HaveKeyWithValue("other", "written-by-someone"))
	g.Expect(before.Version).To(Equal(2), "the creation and the hand write only")
	g.Expect(managedNames(obj)).To(Equal([]string{"a", "b"}))
}

func TestObserveOnlyWritesNothingAndReportsDrift(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{observeOnly: true, resync: time.Second})
	path := f.path("app")
	handWrite(t, path, map[string]any{"user": "admin"})
	before := readPath(t, path)
	f.create(f.seed("app", path, `{"user": "admin", "x": "<random:8>"}`))

	obj := f.waitReason("app", ohmlabv1alpha1.ReasonObserveOnly, 20*time.Second)
	ready := condition(obj, ohmlabv1alpha1.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	drifted := condition(obj, ohmlabv1alpha1.ConditionDrifted)
	g.Expect(drifted).NotTo(BeNil())
	g.Expect(drifted.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(drifted.Message).To(Equal("1 adopt, 1 create-field (x)"))
	g.Expect(ready.Message).To(ContainSubstring("1 adopt, 1 create-field (x)"))

	for action, want := range map[string]float64{"adopt": 1, "create-field": 1} {
		v, ok := f.gaugeValue("ohmlab_planned_changes", map[string]string{"namespace": f.ns, "name": "app", "action": action})
		g.Expect(ok).To(BeTrue(), "ohmlab_planned_changes for %s", action)
		g.Expect(v).To(Equal(want), action)
	}
	_, ok := f.gaugeValue("ohmlab_planned_changes", map[string]string{"namespace": f.ns, "name": "app", "action": "create"})
	g.Expect(ok).To(BeFalse())

	// Across a few resyncs, nothing is written.
	g.Consistently(func() kvPath { return readPath(t, path) }).WithTimeout(3*time.Second).Should(Equal(before),
		"observe-only writes neither data nor custom_metadata")
	g.Expect(f.kv.Counts()["read"]).To(BeNumerically(">=", 3), "the reconcile runs at every resync")
	g.Expect(f.kv.Counts()["write"]).To(Equal(0))
	g.Expect(f.kv.Counts()["mark"]).To(Equal(0))
	g.Expect(f.get("app").Finalizers).To(BeEmpty())
}

func TestRefPendingGoesReadyAsSoonAsTheSourceIsWritten(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	src, dst := f.path("keycloak"), f.path("grafana")
	f.create(f.seed("grafana", dst, `{"keycloakPassword": "<ref:`+src+`#admin.password>"}`))
	obj := f.waitReason("grafana", ohmlabv1alpha1.ReasonRefPending, 10*time.Second)
	rec := condition(obj, ohmlabv1alpha1.ConditionReconciling)
	g.Expect(rec).NotTo(BeNil())
	g.Expect(rec.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(rec.Message).To(ContainSubstring(src + "#admin.password (path missing)"))
	g.Expect(pathMissing(t, dst)).To(BeTrue(), "a RefPending object writes nothing")

	// Let the backoff grow past its first retry (5 s, then 10 s more), so
	// only the source's write can bring the dependent in time.
	time.Sleep(7 * time.Second)
	generation := f.get("grafana").Generation
	f.create(f.seed("keycloak", src, `{"admin": {"password": "<random:24>"}}`))
	start := time.Now()
	obj = f.waitReason("grafana", ohmlabv1alpha1.ReasonReconciled, 4*time.Second)
	t.Logf("the dependent went Ready %v after its source object was created", time.Since(start).Round(10*time.Millisecond))
	g.Expect(obj.Generation).To(Equal(generation), "no spec touch")
	g.Expect(readPath(t, dst).Data["keycloakPassword"]).To(Equal(leaf(readPath(t, src).Data, "admin.password")))
}

func TestReferenceCycleStallsBothObjects(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	pa, pb := f.path("a"), f.path("b")
	f.create(f.seed("a", pa, `{"x": "<ref:`+pb+`#y>"}`))
	f.create(f.seed("b", pb, `{"y": "<ref:`+pa+`#x>"}`))
	for _, name := range []string{"a", "b"} {
		obj := f.waitReason(name, ohmlabv1alpha1.ReasonRefCycle, 20*time.Second)
		stalled := condition(obj, ohmlabv1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil(), name)
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Message).To(And(ContainSubstring(pa), ContainSubstring(pb)), "the message lists the paths")
		g.Expect(condition(obj, ohmlabv1alpha1.ConditionReconciling)).To(BeNil(), "never both")
		g.Expect(condition(obj, ohmlabv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	}
	g.Expect(pathMissing(t, pa)).To(BeTrue())
	g.Expect(pathMissing(t, pb)).To(BeTrue())
}

// TestPathOwnedByAnotherStallsUntilHandedOver: another object's marker
// stalls the object (Ready=False, Stalled=True, kstatus Failed) without a
// write, across resyncs, and the command its message gives hands the path
// over (issue 12, item 7).
func TestPathOwnedByAnotherStallsUntilHandedOver(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{resync: time.Second})
	path := f.path("app")
	handWrite(t, path, map[string]any{"x": "typed-by-hand"})
	handMark(t, path, map[string]any{ohmlabv1alpha1.OwnerMetadataKey: "elsewhere/other"})
	before := readPath(t, path)
	f.create(f.seed("app", path, `{"x": "<random:8>", "y": "<random:8>"}`))

	obj := f.waitReason("app", ohmlabv1alpha1.ReasonOwnedByAnother, 20*time.Second)
	ready := condition(obj, ohmlabv1alpha1.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Message).To(ContainSubstring("elsewhere/other"))
	stalled := condition(obj, ohmlabv1alpha1.ConditionStalled)
	g.Expect(stalled).NotTo(BeNil(), "only a person can resolve it: Stalled")
	g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(condition(obj, ohmlabv1alpha1.ConditionReconciling)).To(BeNil())
	g.Expect(f.kstatus("app")).To(Equal(status.FailedStatus))
	g.Consistently(func() kvPath { return readPath(t, path) }).WithTimeout(3*time.Second).Should(Equal(before), "nothing written, across resyncs")
	g.Expect(f.kv.Counts()["write"]).To(Equal(0))
	g.Expect(f.kv.Counts()["mark"]).To(Equal(0))

	// The command of the message, run as a person would.
	_, command, found := strings.Cut(ready.Message, "hand the path over with: ")
	g.Expect(found).To(BeTrue(), ready.Message)
	args := strings.Fields(command)
	g.Expect(args[0]).To(Equal("vault"))
	bin, err := harness.Bin("vault")
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin, args[1:]...)
	cmd.Env = append(os.Environ(), "VAULT_ADDR="+vault.Addr, "VAULT_TOKEN="+harness.VaultRootToken)
	outText, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(outText))

	f.waitReady("app")
	after := readPath(t, path)
	g.Expect(after.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.OwnerMetadataKey, f.ns+"/app"), "adopted at the next resync")
	g.Expect(after.Data).To(HaveKeyWithValue("x", "typed-by-hand"), "the hand-typed value stays")
}

func TestInvalidObjectsThatBypassedTheWebhookStall(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	dotted, rotation := f.path("dotted"), f.path("rotation")
	f.create(f.seed("dotted", dotted, `{"ok": "x", "a.b": "<random:8>"}`))
	bad := f.seed("rotation", rotation, `{"password": "<random:8>"}`)
	bad.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1", Keys: []string{"nope"}}
	f.create(bad)

	for name, want := range map[string]struct{ reason, key string }{
		"dotted":   {ohmlabv1alpha1.ReasonInvalidSpec, `"a.b"`},
		"rotation": {ohmlabv1alpha1.ReasonInvalidRotation, `"nope"`},
	} {
		obj := f.waitReason(name, want.reason, 10*time.Second)
		stalled := condition(obj, ohmlabv1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil(), name)
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(want.reason))
		g.Expect(stalled.Message).To(ContainSubstring(want.key), "the message names the key")
		g.Expect(condition(obj, ohmlabv1alpha1.ConditionReconciling)).To(BeNil())
		g.Expect(obj.Status.ObservedGeneration).To(Equal(obj.Generation))
	}
	g.Expect(pathMissing(t, dotted)).To(BeTrue(), "an invalid object writes nothing")
	g.Expect(pathMissing(t, rotation)).To(BeTrue())
	g.Expect(f.kv.Counts()).To(BeEmpty(), "not even a read")
}

// deleteAndWaitGone deletes the object and waits until the API server no
// longer has it.
func (f *fixture) deleteAndWaitGone(name string, timeout time.Duration) {
	f.t.Helper()
	g := NewWithT(f.t)
	g.Expect(cp.Client.Delete(context.Background(), f.get(name))).To(Succeed())
	g.Eventually(func() bool {
		err := cp.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &ohmlabv1alpha1.VaultSeed{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(timeout).WithPolling(50*time.Millisecond).Should(BeTrue(), "%s is deleted", name)
}

func TestDeletionRetainLeavesThePath(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{allowDelete: true})
	path := f.path("app")
	f.create(f.seed("app", path, `{"password": "<random:16>"}`))
	obj := f.waitReady("app")
	g.Expect(obj.Spec.DeletionPolicy).To(Equal(ohmlabv1alpha1.DeletionPolicyRetain), "the default")
	g.Expect(obj.Finalizers).To(BeEmpty(), "Retain adds no finalizer, even when deletion is allowed")
	before := readPath(t, path)

	f.deleteAndWaitGone("app", 3*time.Second)
	time.Sleep(time.Second)
	g.Expect(readPath(t, path)).To(Equal(before), "the path stays, untouched")
	g.Expect(f.kv.Counts()["delete"]).To(Equal(0))
}

func TestDeletionPolicyDeleteWithoutAllowDeleteIsForbidden(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{allowDelete: false})
	path := f.path("app")
	obj := f.seed("app", path, `{"password": "<random:16>"}`)
	obj.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	f.create(obj)

	obj = f.waitReason("app", ohmlabv1alpha1.ReasonForbidden, 10*time.Second)
	stalled := condition(obj, ohmlabv1alpha1.ConditionStalled)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(stalled.Message).To(ContainSubstring("allowDelete"))
	g.Expect(obj.Finalizers).To(BeEmpty(), "no finalizer is added")
	g.Consistently(func() []string { return f.get("app").Finalizers }).WithTimeout(time.Second).Should(BeEmpty())

	f.deleteAndWaitGone("app", 2*time.Second)
	g.Expect(f.kv.Counts()["delete"]).To(Equal(0))
}

func TestDeletionPolicyDeleteRemovesThePathWithAllItsVersions(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{allowDelete: true})
	path := f.path("app")
	obj := f.seed("app", path, `{"password": "<random:16>"}`)
	obj.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	f.create(obj)
	obj = f.waitReady("app")
	g.Expect(obj.Finalizers).To(ConsistOf(ohmlabv1alpha1.Finalizer))
	// A second version, so that "all versions" means something.
	cur := readPath(t, path)
	cur.Data["handKey"] = "typed"
	g.Expect(handWrite(t, path, cur.Data)).To(Equal(2))

	f.deleteAndWaitGone("app", 10*time.Second)
	g.Expect(pathMissing(t, path)).To(BeTrue(), "the path's metadata and all its versions are gone")
	g.Expect(f.kv.Counts()["delete"]).To(Equal(1))
	g.Eventually(func() []string { return f.events("app") }).Should(ContainElement("Normal Deleted: deleted the path and all its versions"))
}

func TestDeletionSwitchingBackToRetainRemovesTheFinalizer(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{allowDelete: true})
	path := f.path("app")
	obj := f.seed("app", path, `{"password": "<random:16>"}`)
	obj.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	f.create(obj)
	g.Eventually(func() []string { return f.get("app").Finalizers }).Should(ConsistOf(ohmlabv1alpha1.Finalizer))
	f.waitReady("app")

	f.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyRetain })
	g.Eventually(func() []string { return f.get("app").Finalizers }).WithTimeout(10 * time.Second).Should(BeEmpty())
	f.waitReady("app")
	before := readPath(t, path)

	f.deleteAndWaitGone("app", 3*time.Second)
	g.Expect(readPath(t, path)).To(Equal(before), "the path stays")
	g.Expect(f.kv.Counts()["delete"]).To(Equal(0))
}

func TestVaultSealedIsBackendUnavailableThenReadyWithNoDataLost(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	path := f.path("app")
	f.create(f.seed("app", path, `{"user": "admin", "password": "<random:16>"}`))
	f.waitReady("app")
	before := readPath(t, path)

	// The Vault is shared: keep it sealed as briefly as possible and unseal
	// it whatever happens.
	t.Cleanup(func() {
		if err := vault.Unseal(); err != nil {
			t.Errorf("unsealing the shared Vault: %v", err)
		}
	})
	g.Expect(vault.Seal()).To(Succeed())
	sealed := time.Now()
	f.update("app", func(o *ohmlabv1alpha1.VaultSeed) {
		o.Spec.Data.Raw = []byte(`{"user": "admin", "password": "<random:16>", "extra": "<hex:8>"}`)
	})
	obj := f.waitReason("app", ohmlabv1alpha1.ReasonBackendUnavailable, 10*time.Second)
	g.Expect(vault.Unseal()).To(Succeed())
	t.Logf("Vault was sealed for %v", time.Since(sealed).Round(10*time.Millisecond))
	rec := condition(obj, ohmlabv1alpha1.ConditionReconciling)
	g.Expect(rec).NotTo(BeNil())
	g.Expect(rec.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(condition(obj, ohmlabv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))

	obj = f.waitReason("app", ohmlabv1alpha1.ReasonReconciled, 30*time.Second)
	after := readPath(t, path)
	g.Expect(after.Data["user"]).To(Equal(before.Data["user"]))
	g.Expect(after.Data["password"]).To(Equal(before.Data["password"]), "no data lost")
	g.Expect(after.Data["extra"]).To(MatchRegexp(`^[0-9a-f]{8}$`))
	g.Expect(after.Version).To(Equal(before.Version + 1))
	g.Expect(obj.Status.Version).To(Equal(int64(after.Version)))
}

func TestQuietResyncOnlyReads(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{resync: time.Second})
	src, dst := f.path("keycloak"), f.path("grafana")
	// The source first, so that the dependent never waits (no backoff retry
	// left in the queue).
	f.create(f.seed("keycloak", src, `{"admin": {"password": "<random:24>"}}`))
	f.waitReady("keycloak")
	f.create(f.seed("grafana", dst, `{"keycloakPassword": "<ref:`+src+`#admin.password>", "hash": "<bcrypt:keycloakPassword>", "user": "admin"}`))
	f.waitReady("grafana")
	time.Sleep(1500 * time.Millisecond)

	var c pathCounter
	f.kv.setBefore(c.hook)
	rv := map[string]string{"keycloak": f.get("keycloak").ResourceVersion, "grafana": f.get("grafana").ResourceVersion}
	versions := map[string]int{src: readPath(t, src).Version, dst: readPath(t, dst).Version}
	r0, c0 := f.quiescent(&c)
	const window = 4 * time.Second
	time.Sleep(window)
	r1, c1 := f.quiescent(&c)
	f.kv.setBefore(nil)

	delta := map[string]int{}
	for _, op := range []string{"read", "write", "mark", "delete"} {
		delta[op] = c1[op] - c0[op]
	}
	reconciles := r1 - r0
	// Only grafana reads its own path; both objects read keycloak's.
	grafanaResyncs := c1["read "+dst] - c0["read "+dst]
	keycloakResyncs := reconciles - grafanaResyncs
	t.Logf("quiet resyncs over %v: %d reconciles (keycloak %d, grafana %d); Vault operations %v; status patches 0",
		window, reconciles, keycloakResyncs, grafanaResyncs, delta)
	g.Expect(delta["write"]).To(Equal(0))
	g.Expect(delta["mark"]).To(Equal(0))
	g.Expect(delta["delete"]).To(Equal(0))
	// 1 s resync, each object at its own phase: 4 resyncs each in 4 s, one
	// more or less at the window's edges.
	g.Expect(keycloakResyncs).To(And(BeNumerically(">=", 3), BeNumerically("<=", 5)))
	g.Expect(grafanaResyncs).To(And(BeNumerically(">=", 3), BeNumerically("<=", 5)))
	g.Expect(c1["read "+src]-c0["read "+src]).To(Equal(keycloakResyncs), "keycloak's path is read by its own resyncs only: grafana's use that read (issue 13)")
	g.Expect(delta["read"]).To(Equal(reconciles), "one read per reconcile: its own path")
	for name, v := range rv {
		g.Expect(f.get(name).ResourceVersion).To(Equal(v), "%s: no write to the Kubernetes API", name)
	}
	for path, v := range versions {
		g.Expect(readPath(t, path).Version).To(Equal(v))
	}
}

func TestEventsNameWritesAndFailingStatesWithoutValues(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	src, dst, legacy := f.path("keycloak"), f.path("grafana"), f.path("legacy")

	// Entering a failing state: one Warning, however often it is retried.
	f.create(f.seed("grafana", dst, `{"keycloakPassword": "<ref:`+src+`#admin.password>", "key": "<hex:16>"}`))
	f.waitReason("grafana", ohmlabv1alpha1.ReasonRefPending, 10*time.Second)
	g.Eventually(func() int { return f.emissions("grafana", "Warning", ohmlabv1alpha1.ReasonRefPending) }).Should(Equal(1))
	g.Eventually(func() int { return f.kv.Counts()["read"] }).WithTimeout(8*time.Second).Should(BeNumerically(">=", 4), "retried at least once")
	time.Sleep(500 * time.Millisecond)
	g.Expect(f.emissions("grafana", "Warning", ohmlabv1alpha1.ReasonRefPending)).To(Equal(1), "a Warning once per transition, not per retry")

	// Writes: creation, rotation, adoption.
	f.create(f.seed("keycloak", src, `{"admin": {"password": "<random:24>"}}`))
	f.waitReady("keycloak")
	f.waitReady("grafana")
	f.update("grafana", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "r1"} })
	f.waitReady("grafana")
	handWrite(t, legacy, map[string]any{"user": "typed-by-hand"})
	f.create(f.seed("legacy", legacy, `{"user": "admin"}`))
	f.waitReady("legacy")

	g.Eventually(func() []string { return f.events("keycloak") }).Should(ContainElement(HavePrefix("Normal Created: 1 create, 1 create-field (admin.password)")))
	g.Eventually(func() []string { return f.events("grafana") }).Should(ContainElements(
		HavePrefix("Normal Created: 1 create, 2 create-field (key, keycloakPassword)"),
		HavePrefix("Normal Rotated: 1 rotate (key), 1 record-token"),
	))
	g.Eventually(func() []string { return f.events("legacy") }).Should(ContainElement("Normal Adopted: 1 adopt (KV version 1)"))
	g.Expect(warnings(f.seedEvents("keycloak"))).To(BeEmpty(), "no Warning for an object that never failed")
	for _, p := range []string{src, dst, legacy} {
		assertNoValueEmitted(t, f, readPath(t, p).Data)
	}
}

// kstatus computes the kstatus of the object as the API server holds it.
func (f *fixture) kstatus(name string) status.Status {
	f.t.Helper()
	g := NewWithT(f.t)
	obj := f.get(name)
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	g.Expect(err).NotTo(HaveOccurred())
	un := &unstructured.Unstructured{Object: u}
	un.SetGroupVersionKind(ohmlabv1alpha1.GroupVersion.WithKind("VaultSeed"))
	res, err := status.Compute(un)
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

func TestKstatusComputeOnRealObjects(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	src, dst, invalid := f.path("keycloak"), f.path("grafana"), f.path("invalid")

	// Reconciling (RefPending): InProgress.
	f.create(f.seed("grafana", dst, `{"keycloakPassword": "<ref:`+src+`#admin.password>"}`))
	f.waitReason("grafana", ohmlabv1alpha1.ReasonRefPending, 10*time.Second)
	g.Expect(f.kstatus("grafana")).To(Equal(status.InProgressStatus))
	g.Expect(condition(f.get("grafana"), ohmlabv1alpha1.ConditionReconciling)).NotTo(BeNil(), "InProgress while Reconciling")

	// Stalled (InvalidSpec, and Forbidden for a Delete that is not allowed): Failed.
	f.create(f.seed("invalid", invalid, `{"a.b": "x"}`))
	f.waitReason("invalid", ohmlabv1alpha1.ReasonInvalidSpec, 10*time.Second)
	g.Expect(f.kstatus("invalid")).To(Equal(status.FailedStatus))
	del := f.seed("delete", f.path("delete"), `{"x": "y"}`)
	del.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	f.create(del)
	f.waitReason("delete", ohmlabv1alpha1.ReasonForbidden, 10*time.Second)
	g.Expect(f.kstatus("delete")).To(Equal(status.FailedStatus))

	// Ready: Current, for the source and for the dependent it unblocks.
	f.create(f.seed("keycloak", src, `{"admin": {"password": "<random:24>"}}`))
	f.waitReady("keycloak")
	f.waitReady("grafana")
	g.Expect(f.kstatus("keycloak")).To(Equal(status.CurrentStatus))
	g.Expect(f.kstatus("grafana")).To(Equal(status.CurrentStatus))

}

func warnings(events []eventsv1.Event) []eventsv1.Event {
	var out []eventsv1.Event
	for _, e := range events {
		if e.Type == "Warning" {
			out = append(out, e)
		}
	}
	return out
}

// BenchmarkReady200 measures how long 200 objects (100 sources and 100
// objects each referencing one of them, created interleaved, dependent
// first) take to go Ready against the dev server, with the controller's
// test settings (2 workers).
//
//	go test ./reconcilers/vaultseed/ -run '^$' -bench BenchmarkReady200 -benchtime 1x
func BenchmarkReady200(b *testing.B) {
	f := startController(b, controllerOptions{})
	const pairs = 100
	ctx := context.Background()
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		start := time.Now()
		for i := range pairs {
			src := f.path(fmt.Sprintf("src-%d-%03d", iter, i))
			f.create(f.seed(fmt.Sprintf("dep-%d-%03d", iter, i), f.path(fmt.Sprintf("dep-%d-%03d", iter, i)),
				`{"copy": "<ref:`+src+`#password>", "user": "admin"}`))
			f.create(f.seed(fmt.Sprintf("src-%d-%03d", iter, i), src, `{"password": "<random:24>"}`))
		}
		created := time.Since(start)
		prefix := fmt.Sprintf("-%d-", iter)
		deadline := time.Now().Add(5 * time.Minute)
		for {
			var list ohmlabv1alpha1.VaultSeedList
			if err := cp.Client.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
				b.Fatal(err)
			}
			ready := 0
			for i := range list.Items {
				o := &list.Items[i]
				if !strings.Contains(o.Name, prefix) {
					continue
				}
				if c := condition(o, ohmlabv1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == o.Generation {
					ready++
				}
			}
			if ready == 2*pairs {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d objects Ready after 5 minutes", ready, 2*pairs)
			}
			time.Sleep(50 * time.Millisecond)
		}
		elapsed := time.Since(start)
		b.ReportMetric(elapsed.Seconds(), "s-to-ready")
		b.ReportMetric(created.Seconds(), "s-to-create")
		b.Logf("200 objects Ready in %v (creating them took %v); Vault operations %v", elapsed.Round(time.Millisecond), created.Round(time.Millisecond), f.kv.Counts())
	}
}

func TestDeletedLatestVersionStallsInsteadOfReseeding(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{resync: time.Second})
	path := f.path("app")
	f.create(f.seed("app", path, `{"password": "<random:16>", "webhook": ""}`))
	f.waitReady("app")
	v := handWrite(t, path, map[string]any{"password": readPath(t, path).Data["password"], "webhook": "https://hooks.example/x"})
	before := readPath(t, path)

	mount, rest, _ := strings.Cut(path, "/")
	g.Expect(vault.Client.KVv2(mount).Delete(context.Background(), rest)).To(Succeed())
	obj := f.waitReason("app", ohmlabv1alpha1.ReasonPathDeleted, 10*time.Second)
	g.Expect(condition(obj, ohmlabv1alpha1.ConditionStalled)).NotTo(BeNil())
	g.Consistently(func() int { return f.kv.Counts()["write"] }).WithTimeout(3*time.Second).Should(Equal(1), "nothing is seeded anew")

	g.Expect(vault.Client.KVv2(mount).Undelete(context.Background(), rest, []int{v})).To(Succeed())
	f.waitReady("app")
	g.Expect(readPath(t, path)).To(Equal(before), "the undeleted values are kept")
}
