package vaultseed

// A model-based test of the promises that must hold for every history, not
// only for the scenarios someone thought of (DESIGN.md, "Provenance"):
// seeded random histories of spec edits, prune on and off, rotations, hand
// writes (including writes of exactly the keys of a pending write record),
// soft deletes, paths deleted with their metadata and put again, objects
// deleted and created again, lost status, refused writes, unanswered
// requests, check-and-set races, a controller killed between any two
// requests, a second process and (on the fake) a restored snapshot, run
// against the reconciler. An oracle tracks who wrote each value and checks
// after every step:
//   - no value a person wrote is deleted or overwritten by the controller,
//     but where the object declares it: a copy (<ref:>) or a hash
//     (<bcrypt:>) follows its source, and a rotation the object asks for
//     regenerates its keys;
//   - a rotation token regenerates a path's keys at most once while it is
//     declared, and never while the path records it;
//   - a reconcile that follows a Ready one, with nothing in between, writes
//     nothing to Vault or to the Kubernetes API;
//   - after a reconcile, status names no version the path does not have;
//   - no value of a path appears in an event or a status.

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seedindex"
	"github.com/ohmlab/ohmlab-controller/planner"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
	kvfake "github.com/ohmlab/ohmlab-controller/vaultkv/fake"
)

// modelSeed replays one history: go test ./reconcilers/vaultseed
// -run 'TestModel' -model.seed=N (N as a failure prints it).
var modelSeed = flag.Uint64("model.seed", 0, "the random seed of the model tests' random history (0: a new one)")

// randomSeed is -model.seed, or a new seed.
func randomSeed() uint64 {
	if *modelSeed != 0 {
		return *modelSeed
	}
	return rand.Uint64()
}

// TestModelOnTheFake runs fixed seeds (the histories that found the holes
// DESIGN.md's "Provenance" closes, and more) and one random seed, printed on
// failure so that it replays (see modelSeed).
func TestModelOnTheFake(t *testing.T) {
	// 1-10, and seeds that found holes in earlier code: a rotation's
	// record overwritten by a write that did not land (234, 257), a token
	// declared again after one that was never recorded (81).
	seedSet := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 81, 234, 257, randomSeed()}
	const steps = 600
	for _, seed := range seedSet {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			if msg := runModel(newFakeWorld(t), seed, steps); msg != "" {
				t.Fatalf("seed %d: %s", seed, msg)
			}
		})
	}
}

// TestModelOnTheRealServers runs a shorter history against the real Vault
// and kube-apiserver: the same oracle, Vault's own answers.
func TestModelOnTheRealServers(t *testing.T) {
	startServers(t)
	seed := randomSeed()
	if msg := runModel(newRealWorld(t), seed, 300); msg != "" {
		t.Fatalf("seed %d: %s", seed, msg)
	}
}

// FuzzModel runs the fake's histories from the fuzzer's seeds (make fuzz).
func FuzzModel(f *testing.F) {
	for _, s := range []uint64{1, 2, 3} {
		f.Add(s, uint8(100))
	}
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		if msg := runModel(newFakeWorld(t), seed, int(steps)); msg != "" {
			t.Fatalf("seed %d, %d steps: %s", seed, steps, msg)
		}
	})
}

// world is where a history runs: a Vault, a Kubernetes API, and what a
// person can do to them.
type world struct {
	t  testing.TB
	kv vaultkv.KV // the controller's Vault, with full rights
	c  client.Client
	ns string
	// root reads a path as it is, uncounted.
	root vaultkv.KV
	// softDelete deletes a path's latest version (vault kv delete).
	softDelete func(path string)
	// snapshot and restore are a Vault snapshot's, nil where the world has
	// none.
	snapshot func() (restore func())
	// created makes an object's identity: the API server sets UID and
	// generation, the fake client does not.
	fakeAPI bool
}

func newFakeWorld(t testing.TB) *world {
	scheme := runtime.NewScheme()
	if err := ohmlabv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&ohmlabv1alpha1.VaultSeed{})
	for field, fn := range seedindex.Indexes {
		b = b.WithIndex(&ohmlabv1alpha1.VaultSeed{}, field, fn)
	}
	kv := kvfake.New()
	return &world{t: t, kv: kv, root: kv, c: b.Build(), ns: "model", fakeAPI: true,
		softDelete: func(path string) { kv.SoftDelete(path) },
		snapshot: func() func() {
			snap := kv.Snapshot()
			return func() { kv.Restore(snap) }
		}}
}

func newRealWorld(t *testing.T) *world {
	ns := uniqueNamespace(t)
	if err := cp.EnsureNamespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	kv := rootKV(t)
	return &world{t: t, kv: kv, root: kv, c: cp.Client, ns: ns,
		softDelete: func(path string) {
			mount, rest, _ := strings.Cut(path, "/")
			if err := vault.Client.KVv2(mount).Delete(context.Background(), rest); err != nil {
				t.Fatalf("vault kv delete %s: %v", path, err)
			}
		}}
}

// errKilled is every request of a process after it was killed.
var errKilled = errors.New("the process was killed")

// modelProcess is one controller process: a reconciler with its own memory,
// its own door to Vault (faults injected there) and to Kubernetes (writes
// counted there).
type modelProcess struct {
	r  *Reconciler
	kv *faultKV
	// k8sWrites counts object and status writes.
	k8sWrites int
	killed    bool
}

func (w *world) newProcess() *modelProcess {
	p := &modelProcess{}
	p.kv = &faultKV{KV: w.kv, p: p, crashAfter: -1}
	p.r = &Reconciler{
		Client:       processClient{Client: w.c, p: p},
		KV:           p.kv,
		Generator:    templating.Generator{BcryptCost: 4, Cache: templating.NewHashCache(cryptorand.Reader)},
		Recorder:     events.NewFakeRecorder(1 << 16),
		Metrics:      NewMetrics(prometheus.NewRegistry()),
		Target:       "vault",
		ResyncPeriod: time.Hour,
		Timeout:      10 * time.Second,
	}
	p.r.init()
	return p
}

// drain empties what the process sent while reconciling: its events and its
// dependents' queue.
func (p *modelProcess) drain() []string {
	rec := p.r.Recorder.(*events.FakeRecorder)
	var notes []string
	for {
		select {
		case e := <-rec.Events:
			notes = append(notes, e)
		case <-p.r.dependents:
		default:
			return notes
		}
	}
}

// leaked returns the first value of the paths that appears in what a
// reconcile emitted (its events and the object's status), or "".
func (h *modelRun) leaked(ctx context.Context, emitted []string) string {
	for _, name := range []string{"a", "b"} {
		st, _ := json.Marshal(h.get(ctx, name).Status)
		emitted = append(emitted, string(st))
	}
	all := strings.Join(emitted, "\n")
	for _, path := range h.paths {
		for k, v := range h.seen[path] {
			if s, ok := v.(string); ok && len(s) >= 8 && strings.Contains(all, s) {
				return fmt.Sprintf("the value of %s#%s appears in an event or a status", path, k)
			}
		}
	}
	return ""
}

// faultKV is a process's Vault: it counts writes, injects one fault at a
// time, runs a person's write just before a data write (a check-and-set
// race), and refuses everything once its process is killed.
type faultKV struct {
	vaultkv.KV
	p *modelProcess
	// writes counts data writes, marks and deletes.
	writes int
	// requests counts every request; at crashAfter the process is killed
	// (-1: never).
	requests, crashAfter int
	// fault is injected into the next request of op fault.op.
	fault *fault
	// race runs once, before the next data write is sent.
	race func()
	// read are the paths read since the reconcile began.
	read map[string]bool
}

// The model's names for the requests a fault may pick besides vaultkv's
// operations: a read of an older version, and the rotation token's record.
const (
	opReadVersion = "read-version"
	opMarkToken   = "mark-token"
)

type fault struct {
	op string
	// err is returned; served says whether the request is served first
	// (its answer lost) or not at all.
	err    error
	served bool
}

func (f *faultKV) begin(op string) (served bool, err error) {
	if f.p.killed {
		return false, errKilled
	}
	f.requests++
	if f.crashAfter >= 0 && f.requests > f.crashAfter {
		f.p.killed = true
		return false, errKilled
	}
	if fl := f.fault; fl != nil && fl.op == op {
		f.fault = nil
		return fl.served, fl.err
	}
	return true, nil
}

func (f *faultKV) Read(ctx context.Context, path string) (*vaultkv.Secret, error) {
	if _, err := f.begin(vaultkv.OpRead); err != nil {
		return nil, err
	}
	return f.readOf(path)(f.KV.Read(ctx, path))
}

func (f *faultKV) ReadNew(ctx context.Context, path string) (*vaultkv.Secret, error) {
	if _, err := f.begin(vaultkv.OpRead); err != nil {
		return nil, err
	}
	return f.readOf(path)(f.KV.ReadNew(ctx, path))
}

// readOf notes a read of path that succeeded.
func (f *faultKV) readOf(path string) func(*vaultkv.Secret, error) (*vaultkv.Secret, error) {
	return func(s *vaultkv.Secret, err error) (*vaultkv.Secret, error) {
		if err == nil {
			f.read[path] = true
		}
		return s, err
	}
}

func (f *faultKV) ReadVersion(ctx context.Context, path string, version int) (*vaultkv.Secret, error) {
	if _, err := f.begin(opReadVersion); err != nil {
		return nil, err
	}
	return f.KV.ReadVersion(ctx, path, version)
}

func (f *faultKV) Write(ctx context.Context, path string, data map[string]any, cas int) (vaultkv.Written, error) {
	if race := f.race; race != nil {
		f.race = nil
		race()
	}
	served, err := f.begin(vaultkv.OpWrite)
	if !served {
		return vaultkv.Written{}, err
	}
	f.writes++
	w, werr := f.KV.Write(ctx, path, data, cas)
	if err != nil {
		return vaultkv.Written{}, err
	}
	return w, werr
}

func (f *faultKV) mark(op func() error, md map[string]string) error {
	name := vaultkv.OpMark
	if _, ok := md[ohmlabv1alpha1.RotationTokenMetadataKey]; ok && len(md) == 1 {
		name = opMarkToken
	}
	served, err := f.begin(name)
	if !served {
		return err
	}
	f.writes++
	if merr := op(); err == nil {
		err = merr
	}
	return err
}

func (f *faultKV) Mark(ctx context.Context, path string, md map[string]string) error {
	return f.mark(func() error { return f.KV.Mark(ctx, path, md) }, md)
}

func (f *faultKV) MarkNew(ctx context.Context, path string, md map[string]string) error {
	return f.mark(func() error { return f.KV.MarkNew(ctx, path, md) }, md)
}

func (f *faultKV) Delete(ctx context.Context, path string) error {
	if _, err := f.begin(vaultkv.OpDelete); err != nil {
		return err
	}
	f.writes++
	return f.KV.Delete(ctx, path)
}

// processClient is a process's Kubernetes client: writes are counted and,
// once the process is killed, refused.
type processClient struct {
	client.Client
	p *modelProcess
}

func (c processClient) write() error {
	if c.p.killed {
		return errKilled
	}
	c.p.k8sWrites++
	return nil
}

func (c processClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c processClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c processClient) Status() client.SubResourceWriter {
	return processStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type processStatus struct {
	client.SubResourceWriter
	c processClient
}

func (s processStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.c.write(); err != nil {
		return err
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (s processStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.c.write(); err != nil {
		return err
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

// The objects of a history and the keys they may declare. Object "a" has
// generated keys, a placeholder and a hash; object "b" copies two of a's
// keys.
var modelKeys = map[string][]string{
	"a": {"k0", "k1", "k2", "k3", "k4", "n.k5"},
	"b": {"c0", "c1", "c2"},
}

func modelLeaf(name, key, pathA string) string {
	switch key {
	case "k0", "k1", "c1":
		return "<random:8>"
	case "k2":
		return ""
	case "k3":
		return "<bcrypt:k0>"
	case "k4":
		return "<hex:8>"
	case "n.k5":
		return "<uuid>"
	case "c0":
		return "<ref:" + pathA + "#k0>"
	case "c2":
		return "<ref:" + pathA + "#k4>"
	}
	panic(name + " has no key " + key)
}

// modelSpec is an object's declaration in a history.
type modelSpec struct {
	keys  []string
	prune bool
	token string
	// rotate are the rotation's keys; empty: every generated key.
	rotate []string
}

// modelRun is one history: its world, its processes, the oracle's state.
type modelRun struct {
	w     *world
	rng   *rand.Rand
	procs [2]*modelProcess
	specs map[string]*modelSpec
	paths map[string]string
	// origins are, per path, who wrote the value each key holds: a person
	// (true) or the controller (false).
	origins map[string]map[string]bool
	// seen is each path's flattened data after the last step.
	seen map[string]map[string]any
	// rotations is, per path, the last rotation: a token regenerates a
	// path's keys once, until another token has.
	rotations map[string]rotation
	typed     int
	// quiet is the object whose reconcile ended Ready with nothing after
	// it yet, "" when none, and quietBy the process that made it.
	quiet   string
	quietBy *modelProcess
	log     []string
}

// runModel runs steps random steps from seed and returns the first broken
// promise, with the history that led to it, or "".
func runModel(w *world, seed uint64, steps int) string {
	h := &modelRun{w: w, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), specs: map[string]*modelSpec{},
		paths: map[string]string{}, origins: map[string]map[string]bool{}, seen: map[string]map[string]any{}, rotations: map[string]rotation{}}
	ctx := ctrl.LoggerInto(context.Background(), logr.Discard())
	for i := range h.procs {
		h.procs[i] = w.newProcess()
	}
	for _, name := range []string{"a", "b"} {
		h.paths[name] = fmt.Sprintf("ohmlab/platforms/%s/core/model-%d-%s", w.ns, seed%100000, name)
		h.origins[h.paths[name]] = map[string]bool{}
		h.specs[name] = &modelSpec{keys: slices.Clone(modelKeys[name])}
		h.createObject(ctx, name)
	}
	for i := range steps {
		if msg := h.step(ctx, i); msg != "" {
			return msg + "\nhistory:\n  " + strings.Join(h.log, "\n  ") + "\n" + h.describe(ctx)
		}
	}
	return ""
}

// describe is the objects' status and their paths' metadata, which
// name keys and versions, never values.
func (h *modelRun) describe(ctx context.Context) string {
	var b strings.Builder
	for _, name := range []string{"a", "b"} {
		obj := h.get(ctx, name)
		s, _ := h.w.root.Read(ctx, h.paths[name])
		fmt.Fprintf(&b, "%s: generation %d, status %+v\n  path version %d, created %s, custom_metadata %v\n", name, obj.Generation, obj.Status, s.Version, planner.CreatedTime(s.Created), s.CustomMetadata)
	}
	return b.String()
}

func (h *modelRun) logf(format string, args ...any) {
	h.log = append(h.log, fmt.Sprintf(format, args...))
	if len(h.log) > 60 {
		h.log = h.log[1:]
	}
}

// step runs one random step and checks the promises after it.
func (h *modelRun) step(ctx context.Context, i int) string {
	name := []string{"a", "b"}[h.rng.IntN(2)]
	path := h.paths[name]
	before := h.quiet
	h.quiet = ""
	switch n := h.rng.IntN(100); {
	case n < 45:
		return h.reconcile(ctx, i, name, before == name)
	case n < 57:
		h.editSpec(ctx, i, name)
	case n < 67:
		h.handWrite(ctx, i, path)
	case n < 72:
		h.fillPendingRecord(ctx, i, path)
	case n < 74:
		h.logf("%d: vault kv delete %s", i, name)
		h.w.softDelete(path)
	case n < 77:
		h.putAgain(ctx, i, path)
	case n < 80:
		h.logf("%d: delete object %s and create it again", i, name)
		h.deleteObject(ctx, name)
		h.createObject(ctx, name)
	case n < 83:
		h.loseStatus(ctx, i, name)
	case n < 91:
		h.injectFault(i)
	case n < 94:
		h.raceNextWrite(ctx, i, path)
	case n < 98:
		p := h.procs[h.rng.IntN(2)]
		p.kv.crashAfter = p.kv.requests + h.rng.IntN(6)
		h.logf("%d: the next process to reconcile dies after %d more requests", i, p.kv.crashAfter-p.kv.requests)
	default:
		if h.w.snapshot != nil {
			h.logf("%d: snapshot of Vault, restored at once after a reconcile", i)
			restore := h.w.snapshot()
			saved := h.saveOracle()
			if msg := h.reconcile(ctx, i, name, false); msg != "" {
				return msg
			}
			restore()
			h.restoreOracle(saved)
			h.quiet = ""
		}
	}
	return h.observePeople(ctx)
}

// observePeople takes every change since the last step as a person's.
func (h *modelRun) observePeople(ctx context.Context) string {
	for _, path := range h.paths {
		h.forgetRotation(ctx, path)
		now := h.read(ctx, path)
		for k := range changedKeys(h.seen[path], now) {
			if _, ok := now[k]; ok {
				h.origins[path][k] = true
			} else {
				delete(h.origins[path], k)
			}
		}
		h.seen[path] = now
	}
	return ""
}

func (h *modelRun) read(ctx context.Context, path string) map[string]any {
	s, err := h.w.root.Read(ctx, path)
	if err != nil {
		h.w.t.Fatalf("reading %s: %v", path, err)
	}
	if !s.Exists || s.Deleted {
		return map[string]any{}
	}
	return templating.Flatten(s.Data)
}

func (h *modelRun) metadata(ctx context.Context, path string) map[string]string {
	s, err := h.w.root.ReadNew(ctx, path)
	if err != nil {
		h.w.t.Fatalf("reading %s: %v", path, err)
	}
	return s.CustomMetadata
}

func changedKeys(before, after map[string]any) map[string]bool {
	out := map[string]bool{}
	for k, v := range after {
		if was, ok := before[k]; !ok || !reflect.DeepEqual(was, v) {
			out[k] = true
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out[k] = true
		}
	}
	return out
}

// reconcile runs one reconcile of name by a random process and checks what
// it did against the oracle.
func (h *modelRun) reconcile(ctx context.Context, i int, name string, quietExpected bool) string {
	path := h.paths[name]
	pi := h.rng.IntN(2)
	p := h.procs[pi]
	if p != h.quietBy || p.kv.fault != nil || p.kv.race != nil || p.kv.crashAfter >= 0 {
		// Another process's memory of the sources may be older.
		quietExpected = false
	}
	faulty := p.kv.fault != nil || p.kv.race != nil || p.kv.crashAfter >= 0
	h.logf("%d: process %d reconciles %s", i, pi, name)
	pre := h.metadata(ctx, path)
	spec := *h.specs[name]
	writes, k8sWrites, requests := p.kv.writes, p.k8sWrites, p.kv.requests
	p.kv.read = map[string]bool{}
	key := types.NamespacedName{Namespace: h.w.ns, Name: name}
	_, err := p.r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	emitted := p.drain()
	killed := p.killed
	if p.killed || p.kv.crashAfter >= 0 {
		h.logf("%d: process %d died; a new one takes its place", i, pi)
		h.procs[pi] = h.w.newProcess()
	}
	if msg := h.checkController(ctx, path, name, spec, pre); msg != "" {
		return fmt.Sprintf("step %d: %s", i, msg)
	}
	if msg := h.leaked(ctx, emitted); msg != "" {
		return fmt.Sprintf("step %d: %s", i, msg)
	}
	obj := h.get(ctx, name)
	if killed {
		// Its status write was refused: status is as stale as the
		// process left it.
		return ""
	}
	if err != nil || faulty {
		// A reconcile that could not read its path knows nothing new of
		// it; one that did must leave status true to what it read.
		if !p.kv.read[path] {
			return ""
		}
		return h.checkStatus(ctx, path, obj)
	}
	if quietExpected && (p.kv.writes != writes || p.k8sWrites != k8sWrites) {
		return fmt.Sprintf("step %d: a reconcile right after a Ready one wrote %d times to Vault and %d times to Kubernetes", i, p.kv.writes-writes, p.k8sWrites-k8sWrites)
	}
	// A fresh process's first reconcile of an object Ready before it
	// started waits for the object's resync, reading nothing.
	if p.kv.requests == requests {
		return ""
	}
	if msg := h.checkStatus(ctx, path, obj); msg != "" {
		return fmt.Sprintf("step %d: %s", i, msg)
	}
	if ready := findCondition(obj, ohmlabv1alpha1.ConditionReady); ready != nil && ready.Status == metav1.ConditionTrue && obj.Status.ObservedGeneration == obj.Generation {
		h.quiet, h.quietBy = name, p
	}
	return ""
}

// checkController checks the changes of a reconcile (and of a person's
// write it raced with, taken already) against who wrote each value.
func (h *modelRun) checkController(ctx context.Context, path, name string, spec modelSpec, pre map[string]string) string {
	now := h.read(ctx, path)
	owned := pre[ohmlabv1alpha1.OwnerMetadataKey] == h.w.ns+"/"+name
	rotating := spec.token != "" && owned && pre[ohmlabv1alpha1.RotationTokenMetadataKey] != spec.token
	rotated := false
	for k := range changedKeys(h.seen[path], now) {
		_, present := now[k]
		leaf := ""
		if slices.Contains(spec.keys, k) {
			leaf = modelLeaf(name, k, h.paths["a"])
		}
		generated := leaf == "<random:8>" || leaf == "<hex:8>" || leaf == "<uuid>"
		_, existed := h.seen[path][k]
		if existed && generated && present && !rotated {
			rotated = true
			if spec.token != "" && pre[ohmlabv1alpha1.RotationTokenMetadataKey] == spec.token {
				return fmt.Sprintf("%s: key %s regenerated although the path records token %q", path, k, spec.token)
			}
			last := h.rotations[path]
			if last.token == spec.token {
				return fmt.Sprintf("%s: key %s regenerated by a second reconcile for token %q", path, k, spec.token)
			}
			h.rotations[path] = rotation{token: spec.token, before: pre[ohmlabv1alpha1.RotationTokenMetadataKey]}
		}
		if h.origins[path][k] {
			allowed := strings.HasPrefix(leaf, "<ref:") || strings.HasPrefix(leaf, "<bcrypt:") ||
				generated && rotating && (len(spec.rotate) == 0 || slices.Contains(spec.rotate, k))
			if !allowed || !present {
				return fmt.Sprintf("%s: the controller changed key %s, which a person wrote (declared %q, still present: %v)", path, k, leaf, present)
			}
		}
		if present {
			h.origins[path][k] = false
		} else {
			delete(h.origins[path], k)
		}
	}
	h.seen[path] = now
	h.forgetRotation(ctx, path)
	return ""
}

// forgetRotation forgets the path's last rotation once the path records
// another token.
func (h *modelRun) forgetRotation(ctx context.Context, path string) {
	last, ok := h.rotations[path]
	if !ok {
		return
	}
	if rec := h.metadata(ctx, path)[ohmlabv1alpha1.RotationTokenMetadataKey]; rec != last.token && rec != last.before {
		delete(h.rotations, path)
	}
}

// checkStatus checks that status names only versions the path has, as
// they are.
func (h *modelRun) checkStatus(ctx context.Context, path string, obj *ohmlabv1alpha1.VaultSeed) string {
	s, err := h.w.root.Read(ctx, path)
	if err != nil {
		h.w.t.Fatalf("reading %s: %v", path, err)
	}
	if obj.Status.Version > int64(s.Version) {
		return fmt.Sprintf("%s: status.version %d, the path is at %d", path, obj.Status.Version, s.Version)
	}
	for _, m := range obj.Status.ManagedKeys {
		if m.Version > int64(s.Version) {
			return fmt.Sprintf("%s: managed key %s at version %d, the path is at %d", path, m.Key, m.Version, s.Version)
		}
		// An older version is checked when a reconcile reads it (to carry
		// or prune); the path's own version, which every reconcile reads,
		// always.
		if m.Version != int64(s.Version) {
			continue
		}
		if m.CreatedTime != planner.CreatedTime(s.Created) {
			return fmt.Sprintf("%s: managed key %s names version %d created %s; that version was created %s", path, m.Key, m.Version, m.CreatedTime, planner.CreatedTime(s.Created))
		}
	}
	return ""
}

func (h *modelRun) get(ctx context.Context, name string) *ohmlabv1alpha1.VaultSeed {
	obj := &ohmlabv1alpha1.VaultSeed{}
	if err := h.w.c.Get(ctx, types.NamespacedName{Namespace: h.w.ns, Name: name}, obj); err != nil {
		h.w.t.Fatalf("getting %s: %v", name, err)
	}
	return obj
}

// spec renders a modelSpec as the object's spec.
func (h *modelRun) spec(name string) ohmlabv1alpha1.VaultSeedSpec {
	s := h.specs[name]
	tree := map[string]any{}
	for _, k := range s.keys {
		templating.SetPath(tree, k, modelLeaf(name, k, h.paths["a"]))
	}
	raw, err := json.Marshal(tree)
	if err != nil {
		h.w.t.Fatal(err)
	}
	out := ohmlabv1alpha1.VaultSeedSpec{Path: h.paths[name], Data: &apiextensionsv1.JSON{Raw: raw}, Prune: s.prune, DeletionPolicy: ohmlabv1alpha1.DeletionPolicyRetain}
	if s.token != "" {
		out.Rotate = &ohmlabv1alpha1.Rotation{Token: s.token, Keys: s.rotate}
	}
	return out
}

func (h *modelRun) createObject(ctx context.Context, name string) {
	obj := &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: h.w.ns, Name: name}, Spec: h.spec(name)}
	if h.w.fakeAPI {
		obj.UID, obj.Generation = types.UID(uuid.NewString()), 1
	}
	if err := h.w.c.Create(ctx, obj); err != nil {
		h.w.t.Fatalf("creating %s: %v", name, err)
	}
}

func (h *modelRun) deleteObject(ctx context.Context, name string) {
	if err := h.w.c.Delete(ctx, h.get(ctx, name)); err != nil {
		h.w.t.Fatalf("deleting %s: %v", name, err)
	}
	if !h.w.fakeAPI {
		for {
			err := h.w.c.Get(ctx, types.NamespacedName{Namespace: h.w.ns, Name: name}, &ohmlabv1alpha1.VaultSeed{})
			if err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (h *modelRun) editSpec(ctx context.Context, i int, name string) {
	s := h.specs[name]
	oldToken := s.token
	all := modelKeys[name]
	switch h.rng.IntN(4) {
	case 0:
		k := all[h.rng.IntN(len(all))]
		if slices.Contains(s.keys, k) && len(s.keys) > 1 {
			s.keys = slices.DeleteFunc(s.keys, func(x string) bool { return x == k })
		} else if !slices.Contains(s.keys, k) {
			s.keys = append(s.keys, k)
			sort.Strings(s.keys)
		}
	case 1:
		s.prune = !s.prune
	case 2:
		s.token = []string{"", "t1", "t2", "t3"}[h.rng.IntN(4)]
		s.rotate = nil
		if s.token != "" && h.rng.IntN(2) == 0 {
			var gen []string
			for _, k := range s.keys {
				if l := modelLeaf(name, k, h.paths["a"]); l == "<random:8>" || l == "<hex:8>" || l == "<uuid>" {
					gen = append(gen, k)
				}
			}
			if len(gen) > 0 {
				s.rotate = []string{gen[h.rng.IntN(len(gen))]}
			}
		}
	default:
		s.keys = nil
		for _, k := range all {
			if h.rng.IntN(2) == 0 {
				s.keys = append(s.keys, k)
			}
		}
		if len(s.keys) == 0 {
			s.keys = []string{all[0]}
		}
	}
	h.logf("%d: spec of %s: keys %v, prune %v, token %q, rotate %v", i, name, s.keys, s.prune, s.token, s.rotate)
	// A bcrypt key without its source, or a rotation key not declared, is
	// refused at admission; the model keeps to admitted objects.
	if slices.Contains(s.keys, "k3") && !slices.Contains(s.keys, "k0") {
		s.keys = append(s.keys, "k0")
		sort.Strings(s.keys)
	}
	s.rotate = slices.DeleteFunc(s.rotate, func(k string) bool { return !slices.Contains(s.keys, k) })
	// Once the object declares another token, a rotation for this one
	// is a new one: the path is compared with the token it records, which
	// a rotation that never recorded its token left as it was.
	if s.token != oldToken {
		delete(h.rotations, h.paths[name])
	}
	obj := h.get(ctx, name)
	obj.Spec = h.spec(name)
	if h.w.fakeAPI {
		obj.Generation++
	}
	if err := h.w.c.Update(ctx, obj); err != nil {
		h.w.t.Fatalf("updating %s: %v", name, err)
	}
}

// handWrite is a person's `vault kv put` of the path with one or two keys
// typed in or removed.
func (h *modelRun) handWrite(ctx context.Context, i int, path string) {
	cur := h.read(ctx, path)
	keys := append(slices.Concat(modelKeys["a"], modelKeys["b"]), "typed")
	for range 1 + h.rng.IntN(2) {
		k := keys[h.rng.IntN(len(keys))]
		if _, ok := cur[k]; ok && h.rng.IntN(4) == 0 {
			delete(cur, k)
			h.logf("%d: a person removes %s from %s", i, k, path)
			continue
		}
		h.typed++
		cur[k] = fmt.Sprintf("typed-%d", h.typed)
		h.logf("%d: a person types %s into %s", i, k, path)
	}
	h.put(ctx, path, cur)
}

// put writes a flat tree as `vault kv put` does: a new version, whatever
// the version before.
func (h *modelRun) put(ctx context.Context, path string, flat map[string]any) {
	tree := map[string]any{}
	for k, v := range flat {
		templating.SetPath(tree, k, v)
	}
	s, err := h.w.root.Read(ctx, path)
	if err != nil {
		h.w.t.Fatalf("reading %s: %v", path, err)
	}
	if _, err := h.w.root.Write(ctx, path, tree, s.Version); err != nil {
		h.w.t.Fatalf("writing %s: %v", path, err)
	}
}

// fillPendingRecord is a person writing exactly the keys of the path's
// write record that no version holds yet: what a write the controller
// recorded and could not make would have written.
func (h *modelRun) fillPendingRecord(ctx context.Context, i int, path string) {
	w, ok := planner.RecordOn(h.metadata(ctx, path))
	s, err := h.w.root.Read(ctx, path)
	if err != nil {
		h.w.t.Fatalf("reading %s: %v", path, err)
	}
	if !ok || w.Void || w.Unlisted || w.Version != s.Version+1 {
		return
	}
	cur := h.read(ctx, path)
	for name, keys := range w.Actions {
		for _, k := range keys {
			if name == planner.ActionDeleteField {
				delete(cur, k)
				continue
			}
			h.typed++
			cur[k] = fmt.Sprintf("typed-%d", h.typed)
		}
	}
	h.logf("%d: a person writes exactly the keys of the pending record of %s (version %d)", i, path, w.Version)
	h.put(ctx, path, cur)
}

// putAgain is a person deleting the path with its metadata and putting
// its values back (some typed anew): a new life of the path.
func (h *modelRun) putAgain(ctx context.Context, i int, path string) {
	cur := h.read(ctx, path)
	if err := h.w.root.Delete(ctx, path); err != nil {
		h.w.t.Fatalf("deleting %s: %v", path, err)
	}
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		if h.rng.IntN(2) == 0 {
			h.typed++
			cur[k] = fmt.Sprintf("typed-%d", h.typed)
		}
	}
	h.logf("%d: a person deletes %s with its metadata and puts it again", i, path)
	if len(cur) > 0 {
		h.put(ctx, path, cur)
	}
	// Every value of the new life is the person's, changed or not, and
	// the new life has no rotation token recorded.
	h.seen[path] = map[string]any{}
	delete(h.rotations, path)
}

func (h *modelRun) loseStatus(ctx context.Context, i int, name string) {
	obj := h.get(ctx, name)
	obj.Status = ohmlabv1alpha1.VaultSeedStatus{}
	if err := h.w.c.Status().Update(ctx, obj); err != nil {
		h.w.t.Fatalf("clearing the status of %s: %v", name, err)
	}
	h.logf("%d: the status of %s is lost", i, name)
}

func (h *modelRun) injectFault(i int) {
	p := h.procs[h.rng.IntN(2)]
	forbidden := &vaultkv.Error{Op: vaultkv.OpWrite, Class: vaultkv.ClassForbidden, Status: 403, Reason: "permission denied"}
	unavailable := &vaultkv.Error{Op: vaultkv.OpWrite, Class: vaultkv.ClassUnavailable, Status: 503, Reason: "Vault is sealed"}
	faults := []fault{
		{op: vaultkv.OpWrite, err: forbidden},
		{op: vaultkv.OpMark, err: forbidden},
		{op: vaultkv.OpWrite, err: unavailable},
		{op: vaultkv.OpWrite, err: unavailable, served: true},
		{op: vaultkv.OpMark, err: unavailable, served: true},
		{op: vaultkv.OpRead, err: unavailable},
		{op: opReadVersion, err: unavailable},
		{op: opMarkToken, err: forbidden},
		{op: opMarkToken, err: unavailable, served: true},
	}
	f := faults[h.rng.IntN(len(faults))]
	p.kv.fault = &f
	h.logf("%d: the next %s of a process: %v (served: %v)", i, f.op, f.err, f.served)
}

func (h *modelRun) raceNextWrite(ctx context.Context, i int, path string) {
	p := h.procs[h.rng.IntN(2)]
	h.logf("%d: a person writes %s just before a process's next data write", i, path)
	p.kv.race = func() {
		h.handWrite(ctx, i, path)
		h.observePeople(ctx)
	}
}

// oracleState is what a restored snapshot takes the oracle back to.
type oracleState struct {
	origins   map[string]map[string]bool
	seen      map[string]map[string]any
	rotations map[string]rotation
}

// rotation is the token of a path's last rotation, and the token the path
// recorded before it. Once the path records another token than these two
// (a later rotation's, or one an adoption recorded), rotating for this
// token again is a new rotation.
type rotation struct{ token, before string }

func (h *modelRun) saveOracle() oracleState {
	s := oracleState{origins: map[string]map[string]bool{}, seen: map[string]map[string]any{}, rotations: maps.Clone(h.rotations)}
	for p, o := range h.origins {
		s.origins[p] = maps.Clone(o)
	}
	for p, v := range h.seen {
		s.seen[p] = maps.Clone(v)
	}
	return s
}

func (h *modelRun) restoreOracle(s oracleState) {
	// The rotations made since the snapshot are undone with their versions.
	h.origins, h.seen, h.rotations = s.origins, s.seen, s.rotations
}
