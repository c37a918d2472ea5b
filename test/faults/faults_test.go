// Package faults injects faults at each step of an apply against the real
// servers (issue 12, item 9): Vault stopped, sealed or restarted, the
// controller killed, the kube-apiserver restarted, each at the owner marker,
// the data write and the token record. Every case must converge to Ready,
// keep every hand edit, create at most one KV version beyond a clean run
// of the same object, and end with the clean run's status.managedKeys and
// an event for each write they name, even when the writer was killed
// (issue 23, item 6); 1,000 hand edits raced against reconciles, with
// controller writes among them, must all survive.
//
// The parts are real: the built controller (two processes sharing the
// Lease, replaced when they exit), a Vault with on-disk storage behind
// harness.KVProxy, whose hooks inject each fault at the chosen KV v2
// request, and envtest's kube-apiserver and etcd. The kube-apiserver is
// killed and started again with the same command line (same etcd,
// certificates and ServiceAccount key): envtest's own Stop/Start would serve
// a new CA and break every client.
//
// TestFaults logs the table of faults x outcome:
//
//	make faults   (or: go test -count=1 -v -run '^TestFaults$' ./test/faults | grep -E '^\s*\|')
package faults_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/e2e"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

const (
	// resync is short so that the suite is quick and reconciles race; the
	// retry backoff (5 s doubling) is the controller's own.
	resync = time.Second
	// down is how long a fault lasts before its recovery starts.
	down = 2 * time.Second
	// replicas is how many controller processes run: the Lease holder and
	// one standby, replaced when they exit, as a Deployment's pods are.
	replicas = 2
)

var controllerBin string

func TestMain(m *testing.M) {
	e2e.RunWithController("", func(bin string) int {
		controllerBin = bin
		return m.Run()
	})
}

// A step of apply where a fault lands (reconcilers/vaultseed, apply:
// metadata first, then data with check-and-set, then the rotation token).
type step struct {
	name string
	when harness.When
	// rotate: the step belongs to a rotation (a second reconcile, after a
	// token change), not to the adoption.
	rotate bool
	match  func(path string, r harness.KVRequest) bool
}

var steps = []step{
	{name: "after the owner marker", when: harness.AfterForwarding, match: func(path string, r harness.KVRequest) bool {
		return r.Path == path && r.Kind == harness.KVMetadata && r.Write() && r.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey] != ""
	}},
	{name: "after the data write", when: harness.AfterForwarding, match: func(path string, r harness.KVRequest) bool {
		return r.Path == path && r.Kind == harness.KVData && r.Write()
	}},
	{name: "before the token record", when: harness.BeforeForwarding, rotate: true, match: func(path string, r harness.KVRequest) bool {
		return r.Path == path && r.Kind == harness.KVMetadata && r.Write() &&
			r.CustomMetadata[ohmlabv1alpha1.RotationTokenMetadataKey] == "t2" && r.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey] == ""
	}},
}

// A fault is injected from a proxy hook, so it must return at once: it
// starts its recovery in a goroutine and returns a channel closed once the
// recovery is over, and whether the proxy lets the request through.
type fault struct {
	name string
	// eventsMayBeLost: the fault stops the kube-apiserver, so an event the
	// writer queued may never be sent (events are best effort: the
	// broadcaster sends them apart from the status write, and a writer that
	// loses its Lease exits before the API server is back). The status is
	// still checked in full.
	eventsMayBeLost bool
	// inject gets the process that made the request (the Lease holder).
	inject func(s *suite, writer *e2e.Controller) (recovered <-chan error, pass bool)
}

var faults = []fault{
	{name: "none (clean run)", inject: func(*suite, *e2e.Controller) (<-chan error, bool) { return done(nil), true }},
	{name: "Vault stopped", inject: func(s *suite, _ *e2e.Controller) (<-chan error, bool) {
		s.vault.Stop()
		return recoverAfter(func() error { time.Sleep(down); return s.vault.Restart() }), true
	}},
	{name: "Vault sealed", inject: func(s *suite, _ *e2e.Controller) (<-chan error, bool) {
		if err := s.vault.Seal(); err != nil {
			return done(err), true
		}
		return recoverAfter(func() error { time.Sleep(down); return s.vault.Unseal() }), true
	}},
	{name: "Vault restarted (back sealed)", inject: func(s *suite, _ *e2e.Controller) (<-chan error, bool) {
		s.vault.Stop()
		return recoverAfter(func() error {
			if err := s.vault.Start(); err != nil {
				return err
			}
			time.Sleep(down)
			return s.vault.Unseal()
		}), true
	}},
	// The connection cut at the step: after a write, the write has landed
	// and its answer is lost (as with a timeout); before the token record,
	// the request is lost. The controller lives on.
	{name: "connection to Vault cut", inject: func(*suite, *e2e.Controller) (<-chan error, bool) { return done(nil), false }},
	{name: "controller SIGKILLed", inject: func(_ *suite, writer *e2e.Controller) (<-chan error, bool) {
		writer.Kill()
		return done(nil), false
	}},
	{name: "kube-apiserver killed, restarted", eventsMayBeLost: true, inject: func(s *suite, _ *e2e.Controller) (<-chan error, bool) {
		if err := s.env.CP.StopAPIServer(); err != nil {
			return done(err), true
		}
		return recoverAfter(func() error {
			time.Sleep(down)
			return s.env.CP.StartAPIServer(context.Background())
		}), true
	}},
}

func done(err error) <-chan error {
	c := make(chan error, 1)
	c <- err
	return c
}

func recoverAfter(fn func() error) <-chan error {
	c := make(chan error, 1)
	go func() { c <- fn() }()
	return c
}

// suite is one environment shared by every case: a control plane, a
// Vault with on-disk storage behind the fault proxy, and replicas controller
// processes kept running by a supervisor.
type suite struct {
	env   *e2e.Env
	vault *harness.FileVault
	proxy *harness.KVProxy

	mu          sync.Mutex
	controllers []*e2e.Controller
	all         []*e2e.Controller // every process started, for the logs
	cases       int
}

func newSuite(t *testing.T) *suite {
	s := &suite{}
	s.vault = harness.FileVaultForTest(t)
	s.proxy = harness.KVProxyForTest(t, s.vault.Addr, harness.VaultMount)
	env, err := e2e.Start(context.Background(), e2e.Options{
		Dir: t.TempDir(), Resync: resync, ControllerBin: controllerBin, Vault: s.vault.Vault,
		Values: map[string]any{"targets": map[string]any{"vault": map[string]any{"backend": map[string]any{"address": s.proxy.URL}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	s.env = env
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.supervise(ctx) }()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.controllers {
			c.Stop()
		}
		if t.Failed() {
			for i, c := range s.all {
				t.Logf("controller %d logs:\n%s", i, c.Logs())
			}
		}
	})
	// The first case creates an object at once: the webhook Service must
	// have its endpoints, the supervisor's replicas ready.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		s.mu.Lock()
		n := len(s.controllers)
		s.mu.Unlock()
		if n >= replicas {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d controller processes ready after 2 minutes", n, replicas)
		}
	}
	return s
}

// supervise keeps replicas controller processes running: one that exits
// (killed, or after losing its Lease) is replaced, as a kubelet restarts a
// pod.
func (s *suite) supervise(ctx context.Context) {
	for {
		s.mu.Lock()
		s.controllers = slices.DeleteFunc(s.controllers, (*e2e.Controller).Exited)
		n := len(s.controllers)
		s.mu.Unlock()
		if n < replicas {
			c, err := s.env.StartController(ctx)
			if err == nil {
				s.mu.Lock()
				s.controllers = append(s.controllers, c)
				s.all = append(s.all, c)
				s.mu.Unlock()
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var leaderLine = regexp.MustCompile(`(?m)^leader_election_master_status\{name="ohmlab-controller-vault"\} 1$`)

// leader returns the process that holds the target's Lease.
func (s *suite) leader() (*e2e.Controller, error) {
	s.mu.Lock()
	cs := slices.Clone(s.controllers)
	s.mu.Unlock()
	for _, c := range cs {
		if leaderLine.MatchString(get("http://" + c.MetricsAddr + "/metrics")) {
			return c, nil
		}
	}
	return nil, fmt.Errorf("none of the %d processes holds the Lease", len(cs))
}

func get(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// row is one line of the table.
type row struct {
	fault, step string
	converged   bool
	clean, got  int // KV versions of the path after a clean run and after this one
	kept, hand  int // hand edits kept, of hand
	// managed and statusVersion are status.managedKeys and status.version
	// once converged.
	managed       []string
	statusVersion int
	// handVersions are the KV versions the hand edits made.
	handVersions map[int]bool
	// unevented are the versions the controller wrote whose write has no
	// event.
	unevented []int
	// events are the object's events ("type reason: note"), said when a
	// write has no event.
	events []string
	// writerExited: the process that made the faulted request has exited.
	writerExited bool
	status       string
	problems     []string
}

func (r *row) fail(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

const (
	handNote = "a note typed by hand"
	mount    = harness.VaultMount
)

// TestFaults runs every fault at every step, then the hand-edit race, and
// logs the table.
func TestFaults(t *testing.T) {
	s := newSuite(t)
	var rows []*row
	for _, st := range steps {
		var clean *row
		for i, f := range faults {
			t.Run(f.name+" "+st.name, func(t *testing.T) {
				r := &row{fault: f.name, step: st.name}
				rows = append(rows, r)
				if i == 0 {
					clean = r
				} else if clean == nil || !clean.converged {
					t.Fatal("no clean run to compare with")
				}
				s.run(t, st, f, r)
				r.clean = clean.got
				if r.got-r.clean > 1 {
					r.fail("%d KV versions beyond the clean run (%d)", r.got-r.clean, r.clean)
				}
				// A process that exits before its status write (killed, or
				// its Lease lost while the kube-apiserver was down), or a
				// writer that lost the answer, leaves the record of its
				// write on the path: the next reconcile reports its event
				// and its counted write, but only a write whose answer the
				// controller saw makes a key managed (docs/DESIGN.md,
				// "Provenance"), so those keys may be missing, never added.
				unanswered := r.writerExited || st.name == "after the data write"
				if unanswered && !subset(r.managed, clean.managed) || !unanswered && !slices.Equal(r.managed, clean.managed) {
					r.fail("status.managedKeys %v, clean run %v", r.managed, clean.managed)
				}
				if r.statusVersion != r.got {
					r.fail("status.version %d, the path is at KV version %d", r.statusVersion, r.got)
				}
				for _, v := range r.unevented {
					if f.eventsMayBeLost && r.writerExited {
						t.Logf("no event of the controller's write of KV version %d: its writer exited while the kube-apiserver was down", v)
						continue
					}
					r.fail("no event of the controller's write of KV version %d; the object's events: %q", v, r.events)
				}
				for _, p := range r.problems {
					t.Error(p)
				}
			})
		}
	}
	t.Run("1000 hand edits raced against reconciles", func(t *testing.T) {
		r := &row{fault: "1000 hand edits (cas) raced against rotations", step: "every step"}
		rows = append(rows, r)
		s.race(t, r)
	})
	t.Log("faults x outcome (" + strconv.Itoa(len(rows)) + " cases):\n" + table(rows))
}

func table(rows []*row) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(w, "| fault\t step\t converged\t KV versions clean/fault\t beyond clean\t hand edits kept\t status (managedKeys, version)\t")
	for _, r := range rows {
		conv := "yes"
		if !r.converged {
			conv = "NO"
		}
		clean, beyond := strconv.Itoa(r.clean), strconv.Itoa(r.got-r.clean)
		if r.clean == 0 {
			clean, beyond = "-", "-"
		}
		fmt.Fprintf(w, "| %s\t %s\t %s\t %s/%d\t %s\t %d/%d\t %s\t\n", r.fault, r.step, conv, clean, r.got, beyond, r.kept, r.hand, r.status)
	}
	_ = w.Flush()
	return b.String()
}

// run is one case: a path a person created (a placeholder filled in and an
// undeclared key), adopted by a new object; the hook edits the placeholder
// by hand at the step, then injects the fault.
func (s *suite) run(t *testing.T, st step, f fault, r *row) {
	ctx := context.Background()
	r.hand = 2
	s.cases++
	name := fmt.Sprintf("case-%02d", s.cases)
	path := "ohmlab/platforms/faults/core/" + name
	rest := strings.TrimPrefix(path, mount+"/")
	kv := s.vault.Client.KVv2(mount)
	typed, err := kv.Put(ctx, rest, map[string]any{"webhook": "typed by hand", "note": handNote})
	if err != nil {
		t.Fatal(err)
	}
	r.handVersions = map[int]bool{typed.VersionMetadata.Version: true}
	seed := &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: e2e.SeedNamespace, Name: name},
		Spec: ohmlabv1alpha1.VaultSeedSpec{
			Path:   path,
			Data:   &apiextensionsv1.JSON{Raw: []byte(`{"admin":{"username":"admin","password":"<random:24>"},"apiKey":"<hex:32>","webhook":""}`)},
			Rotate: &ohmlabv1alpha1.Rotation{Token: "t1", Keys: []string{"admin.password"}},
		},
	}
	handValue := "edited by hand " + st.name
	var recovered <-chan error
	var wrote *e2e.Controller
	arm := func() *harness.KVHook {
		// The Lease holder is found when the hook is armed, when there is
		// one already: at the step the writer's request waits for the hook,
		// and one that waits longer than the controller's Vault timeout
		// fails on its own, so the fault would come after the writer
		// reported it, not at the step. Nothing moves the Lease between
		// the two.
		holder, holderErr := s.leader()
		return s.proxy.Once(st.when, func(req harness.KVRequest) bool { return st.match(path, req) }, func(harness.KVRequest) bool {
			edit, err := kv.Patch(ctx, rest, map[string]any{"webhook": handValue})
			if err != nil {
				r.fail("hand edit at the step: %v", err)
			} else {
				r.handVersions[edit.VersionMetadata.Version] = true
			}
			writer, err := holder, holderErr
			if err != nil || writer.Exited() {
				writer, err = s.leader()
			}
			if err != nil {
				recovered = done(err)
				return true
			}
			var pass bool
			recovered, pass = f.inject(s, writer)
			wrote = writer
			return pass
		})
	}
	var hook *harness.KVHook
	if !st.rotate {
		hook = arm()
	}
	if err := s.env.CP.Client.Create(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if st.rotate {
		if !s.converge(ctx, seed, "t1", nil) {
			t.Fatal("the object did not become Ready before the rotation")
		}
		hook = arm()
		before := seed.DeepCopy()
		seed.Spec.Rotate.Token = "t2"
		if err := s.env.CP.Client.Patch(ctx, seed, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-hook.Fired():
	case <-time.After(time.Minute):
		t.Fatalf("the controller never reached the step %q", st.name)
	}
	if err := <-recovered; err != nil {
		t.Fatalf("recovering from %s: %v", f.name, err)
	}
	want := "t1"
	if st.rotate {
		want = "t2"
	}
	hand := map[string]string{"webhook": handValue, "note": handNote}
	r.converged = s.converge(ctx, seed, want, hand)
	if !r.converged {
		r.fail("did not converge to Ready")
	}
	sec, err := kv.Get(ctx, rest)
	if err != nil {
		t.Fatal(err)
	}
	r.got = sec.VersionMetadata.Version
	for k, v := range hand {
		if sec.Data[k] == v {
			r.kept++
		} else {
			r.fail("hand edit of %s lost: %q, want %q", k, sec.Data[k], v)
		}
	}
	got := &ohmlabv1alpha1.VaultSeed{}
	if err := s.env.CP.Client.Get(ctx, client.ObjectKeyFromObject(seed), got); err != nil {
		t.Fatal(err)
	}
	for _, k := range got.Status.ManagedKeys {
		r.managed = append(r.managed, k.Key)
	}
	// Every version that no hand edit made is a write of the controller,
	// reported by its event even when its writer died before its status
	// write (status.managedKeys names a later version of the same value
	// once a prune's provenance is carried forward).
	written := map[int]bool{}
	for v := 1; v <= r.got; v++ {
		if !r.handVersions[v] {
			written[v] = true
		}
	}
	r.unevented, r.events = s.unevented(ctx, name, written)
	r.statusVersion = int(got.Status.Version)
	r.status = fmt.Sprintf("%v, v%d", r.managed, r.statusVersion)
	if r.writerExited = wrote != nil && wrote.Exited(); r.writerExited {
		r.status += " (writer exited)"
	}
}

var writeEventNote = regexp.MustCompile(`\(KV version (\d+)\)$`)

// unevented returns the versions that no Normal event of the object names
// as written ("... (KV version N)"), waiting for the events a while: they
// are sent apart from the status; and the object's events.
func (s *suite) unevented(ctx context.Context, name string, versions map[int]bool) (missing []int, events []string) {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		evented := map[int]bool{}
		events = events[:0]
		var list eventsv1.EventList
		if err := s.env.CP.Client.List(ctx, &list, client.InNamespace(e2e.SeedNamespace)); err == nil {
			for _, e := range list.Items {
				if e.Regarding.Name != name {
					continue
				}
				events = append(events, e.Type+" "+e.Reason+": "+e.Note)
				if m := writeEventNote.FindStringSubmatch(e.Note); e.Type == corev1.EventTypeNormal && m != nil {
					v, _ := strconv.Atoi(m[1])
					evented[v] = true
				}
			}
		}
		missing = missing[:0]
		for v := range versions {
			if !evented[v] {
				missing = append(missing, v)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			slices.Sort(missing)
			return missing, events
		}
	}
}

// converge waits until the object is Ready for its generation, the path
// carries its owner marker and rotation token and holds every declared key
// and the hand values, then checks that this holds, with no new KV version,
// over three resyncs.
func (s *suite) converge(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, token string, hand map[string]string) bool {
	mount, rest, _ := strings.Cut(seed.Spec.Path, "/")
	kv := s.vault.Client.KVv2(mount)
	check := func() (int, bool) {
		got := &ohmlabv1alpha1.VaultSeed{}
		if err := s.env.CP.Client.Get(ctx, client.ObjectKeyFromObject(seed), got); err != nil {
			return 0, false
		}
		if got.Status.ObservedGeneration != got.Generation || !meta.IsStatusConditionTrue(got.Status.Conditions, ohmlabv1alpha1.ConditionReady) {
			return 0, false
		}
		sec, err := kv.Get(ctx, rest)
		if err != nil {
			return 0, false
		}
		if sec.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey] != seed.Namespace+"/"+seed.Name ||
			sec.CustomMetadata[ohmlabv1alpha1.RotationTokenMetadataKey] != token {
			return 0, false
		}
		admin, _ := sec.Data["admin"].(map[string]any)
		if admin["password"] == nil || admin["username"] != "admin" || sec.Data["apiKey"] == nil {
			return 0, false
		}
		for k, v := range hand {
			if sec.Data[k] != v {
				return 0, false
			}
		}
		return sec.VersionMetadata.Version, true
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		v, ok := check()
		if ok {
			stable := true
			for range 3 {
				time.Sleep(resync)
				if again, ok := check(); !ok || again != v {
					stable = false
					break
				}
			}
			if stable {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// race: a person's writer adds 1,000 hand keys (and sets the placeholder)
// with read-modify-write and check-and-set, while the rotation token is
// changed again and again, so that the controller rewrites the path with
// check-and-set all along. Every hand value must be there at the end.
func (s *suite) race(t *testing.T, r *row) {
	const edits = 1000
	ctx := context.Background()
	r.hand = edits + 1
	path := "ohmlab/platforms/faults/core/race"
	rest := strings.TrimPrefix(path, mount+"/")
	kv := s.vault.Client.KVv2(mount)
	seed := &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: e2e.SeedNamespace, Name: "race"},
		Spec: ohmlabv1alpha1.VaultSeedSpec{
			Path:   path,
			Data:   &apiextensionsv1.JSON{Raw: []byte(`{"admin":{"username":"admin","password":"<random:24>"},"apiKey":"<hex:32>","webhook":""}`)},
			Rotate: &ohmlabv1alpha1.Rotation{Token: "r0", Keys: []string{"admin.password"}},
		},
	}
	if err := s.env.CP.Client.Create(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if !s.converge(ctx, seed, "r0", nil) {
		t.Fatal("the object did not become Ready")
	}
	start, err := kv.Get(ctx, rest)
	if err != nil {
		t.Fatal(err)
	}

	leader, err := s.leader()
	if err != nil {
		t.Fatal(err)
	}
	mismatchesBefore := casMismatchesOf(leader)
	stop := make(chan struct{})
	var rotations int
	var driver sync.WaitGroup
	driver.Add(1)
	go func() {
		defer driver.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			before := seed.DeepCopy()
			seed.Spec.Rotate.Token = "r" + strconv.Itoa(rotations+1)
			if err := s.env.CP.Client.Patch(ctx, seed, client.MergeFrom(before)); err != nil {
				t.Errorf("changing the rotation token: %v", err)
				return
			}
			rotations++
		}
	}()
	conflicts := 0
	for i := range edits {
		for {
			sec, err := kv.Get(ctx, rest)
			if err != nil {
				t.Fatal(err)
			}
			data := sec.Data
			hand, _ := data["hand"].(map[string]any)
			if hand == nil {
				hand = map[string]any{}
			}
			hand[fmt.Sprintf("h%04d", i)] = "hand value " + strconv.Itoa(i)
			data["hand"] = hand
			data["webhook"] = "hand value " + strconv.Itoa(i)
			_, err = kv.Put(ctx, rest, data, vaultapi.WithCheckAndSet(sec.VersionMetadata.Version))
			if err == nil {
				// A person's pace, quick: the controller gets writes in too.
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
				break
			}
			if !strings.Contains(err.Error(), "check-and-set parameter did not match") {
				t.Fatal(err)
			}
			conflicts++
		}
	}
	// The versions made while the edits went on, beyond the edits: the
	// controller's writes in the window. Without any, nothing raced.
	window, err := kv.Get(ctx, rest)
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	driver.Wait()
	duringEdits := window.VersionMetadata.Version - start.VersionMetadata.Version - edits
	if duringEdits < 1 {
		t.Errorf("the controller wrote nothing during the %d edits (%d token changes): no race", edits, rotations)
	}
	token := seed.Spec.Rotate.Token
	r.converged = s.converge(ctx, seed, token, map[string]string{"webhook": "hand value " + strconv.Itoa(edits-1)})
	if !r.converged {
		t.Error("did not converge to Ready")
	}
	sec, err := kv.Get(ctx, rest)
	if err != nil {
		t.Fatal(err)
	}
	hand, _ := sec.Data["hand"].(map[string]any)
	for i := range edits {
		if hand[fmt.Sprintf("h%04d", i)] == "hand value "+strconv.Itoa(i) {
			r.kept++
		}
	}
	if sec.Data["webhook"] == "hand value "+strconv.Itoa(edits-1) {
		r.kept++
	}
	if r.kept != r.hand {
		t.Errorf("%d of %d hand edits lost", r.hand-r.kept, r.hand)
	}
	controllerWrites := sec.VersionMetadata.Version - start.VersionMetadata.Version - edits
	casMismatches := "?"
	if c, err := s.leader(); err == nil && c == leader {
		casMismatches = strconv.Itoa(casMismatchesOf(c) - mismatchesBefore)
	}
	r.got = sec.VersionMetadata.Version
	r.status = fmt.Sprintf("%d token changes, %d controller writes (%d during the edits), %s controller cas mismatches, %d writer cas retries", rotations, controllerWrites, duringEdits, casMismatches, conflicts)
	t.Logf("race: %s; %d/%d hand edits kept", r.status, r.kept, r.hand)
}

var casMismatchLine = regexp.MustCompile(`(?m)^ohmlab_backend_requests_total\{code="cas_mismatch",operation="write",target="vault"\} (\d+)$`)

// casMismatchesOf returns how many of a process's writes Vault refused on a
// check-and-set mismatch.
func casMismatchesOf(c *e2e.Controller) int {
	m := casMismatchLine.FindStringSubmatch(get("http://" + c.MetricsAddr + "/metrics"))
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// subset says whether every key of a is in b.
func subset(a, b []string) bool {
	for _, k := range a {
		if !slices.Contains(b, k) {
			return false
		}
	}
	return true
}
