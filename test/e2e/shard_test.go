package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// shardObjects is how many VaultSeeds TestShards splits between the process without a shard
// and the shards a and b. `go test ./test/e2e -run TestShards -shard-objects=1000` is the
// figure of issue 13; the default keeps `make test` short.
var shardObjects = flag.Int("shard-objects", 60, "VaultSeeds TestShards splits between the unsharded process and shards a and b")

// shardPath is the KV path of a TestShards object.
func shardPath(name string) string { return "ohmlab/platforms/shard/core/" + name }

// shardSeed is a VaultSeed of TestShards, labelled for shard ("" for none).
func shardSeed(name, shard, data string) *ohmlabv1alpha1.VaultSeed {
	s := &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: SeedNamespace, Name: name},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: shardPath(name), Data: &apiextensionsv1.JSON{Raw: []byte(data)}},
	}
	if shard != "" {
		s.Labels = map[string]string{ohmlabv1alpha1.ShardLabel: shard}
	}
	return s
}

// readyObjects returns, per process, the objects whose ohmlab_object_ready series it serves
// (name -> 1 Ready, 0 not): the objects it reconciles.
func readyObjects(t *testing.T, c *Controller) map[string]float64 {
	t.Helper()
	return objectMetric(t, c, "ohmlab_object_ready")
}

// objectMetric returns the value of a per-object gauge or counter a process serves, by object
// name.
func objectMetric(t *testing.T, c *Controller, family string) map[string]float64 {
	t.Helper()
	code, body := httpGet(context.Background(), "http://"+c.MetricsAddr+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics of %s: %d", c.Name, code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics of %s: %v", c.Name, err)
	}
	out := map[string]float64{}
	for _, m := range families[family].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "name" {
				out[l.GetValue()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// isReady says whether an object is Ready at its generation.
func isReady(s *ohmlabv1alpha1.VaultSeed) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, ohmlabv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && s.Status.ObservedGeneration == s.Generation
}

func startShard(t *testing.T, env *Env, shard string) *Controller {
	t.Helper()
	return startProcess(t, "shard "+shard, func(ctx context.Context) (*Controller, error) { return env.StartShard(ctx, shard) })
}

// TestShards runs the chart with targets.vault.shards: [a, b] through the built binaries: the
// process without a shard (which serves the webhook) and one per shard, each with its
// Deployment's arguments and ConfigMap, as the chart's one ServiceAccount. They split the
// objects by the label ohmlab.fr/shard and each reconciles only its own (its metrics serve
// only their series, its Lease is its own); the webhook refuses a duplicate path and a cycle
// across shards; a reference across shards goes Ready once its source is written; an object
// whose label changes moves (the old process forgets it, the new one adopts it with its
// finalizer, ends with its own Ready status, and deletes its path when it is deleted), and one
// moved to a shard no process runs is marked ShardChanged by the process it left; and killing shard a's process leaves the
// other processes' objects untouched (no write to their paths or their objects) while its own
// stay as they were, reconciled by nobody until it is back.
func TestShards(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := *shardObjects
	// Long enough that a resync of n objects is a trickle (the Vault QPS is 100), short enough
	// that the checks below see two of them.
	resync := time.Duration(max(5, n/20)) * time.Second
	env, err := Start(ctx, Options{Dir: t.TempDir(), Resync: resync, ControllerBin: controllerBin,
		Values: map[string]any{"targets": map[string]any{"vault": map[string]any{"shards": []any{"a", "b"}, "allowDelete": true}}}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(env.Stop)
	g.Expect(mapKeysOf(env.Chart.Shards)).To(Equal([]string{"a", "b"}))
	// allowDelete needs the policy vault-operator adds with ohmlab.controller.allowDelete.
	allowDelete, err := os.ReadFile(filepath.Join(charttest.ChartDir(), "vault", "policy-allow-delete.hcl"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Vault.Client.Sys().PutPolicyWithContext(ctx, VaultPolicy+"-allow-delete", string(allowDelete))).To(Succeed())
	g.Expect(env.Vault.WriteKubernetesRole(ctx, harness.KubernetesRole{
		Name: VaultRole, ServiceAccount: env.Chart.ServiceAccount, Namespace: ControllerNamespace,
		Audience: env.Chart.VaultAudience, Policies: []string{VaultPolicy, VaultPolicy + "-allow-delete"}, TTL: 15 * time.Minute,
	})).To(Succeed())

	procs := map[string]*Controller{"": startController(t, env), "a": startShard(t, env, "a"), "b": startShard(t, env, "b")}

	// One Lease per process, each held.
	holders := map[string]bool{}
	for _, name := range []string{LeaseName, LeaseName + "-a", LeaseName + "-b"} {
		g.Eventually(func() (string, error) {
			l := &coordinationv1.Lease{}
			if err := env.CP.Client.Get(ctx, client.ObjectKey{Namespace: ControllerNamespace, Name: name}, l); err != nil {
				return "", err
			}
			if l.Spec.HolderIdentity == nil {
				return "", nil
			}
			holders[*l.Spec.HolderIdentity] = true
			return *l.Spec.HolderIdentity, nil
		}).WithTimeout(30*time.Second).ShouldNot(BeEmpty(), "Lease %s", name)
	}
	g.Expect(holders).To(HaveLen(3), "three processes hold the three Leases")

	// n objects, a third per process.
	shardOf := map[string]string{}
	start := time.Now()
	var eg errgroup.Group
	eg.SetLimit(8)
	for i := range n {
		name, shard := fmt.Sprintf("s-%04d", i), []string{"", "a", "b"}[i%3]
		shardOf[name] = shard
		eg.Go(func() error {
			return env.CP.Client.Create(ctx, shardSeed(name, shard, `{"password":"<random:16>"}`))
		})
	}
	g.Expect(eg.Wait()).To(Succeed())
	list := func() map[string]*ohmlabv1alpha1.VaultSeed {
		var l ohmlabv1alpha1.VaultSeedList
		g.Expect(env.CP.Client.List(ctx, &l, client.InNamespace(SeedNamespace))).To(Succeed())
		out := map[string]*ohmlabv1alpha1.VaultSeed{}
		for i := range l.Items {
			out[l.Items[i].Name] = &l.Items[i]
		}
		return out
	}
	g.Eventually(func() int {
		ready := 0
		for name, s := range list() {
			if _, ok := shardOf[name]; ok && isReady(s) {
				ready++
			}
		}
		return ready
	}).WithTimeout(time.Duration(n)*time.Second + 2*time.Minute).WithPolling(time.Second).Should(Equal(n))
	t.Logf("%d objects Ready %s after the first was created", n, time.Since(start).Round(100*time.Millisecond))

	// Each process serves the series of its own objects, and of no other.
	for shard, c := range procs {
		var want, got []string
		for name, s := range shardOf {
			if s == shard {
				want = append(want, name)
			}
		}
		for name := range readyObjects(t, c) {
			got = append(got, name)
		}
		slices.Sort(want)
		slices.Sort(got)
		g.Expect(got).To(Equal(want), "the objects process %q reconciles", shard)
		// And it alone wrote their paths, once each.
		writes := objectMetric(t, c, "ohmlab_data_writes_total")
		g.Expect(mapKeysOf(writes)).To(Equal(want), "the objects whose paths process %q wrote", shard)
		for name, n := range writes {
			g.Expect(n).To(Equal(1.0), "writes of %s by process %q", name, shard)
		}
		// A figure, not a check: a shard's cache holds only its objects, the unsharded
		// process's every object (it serves the webhook).
		hwm := "?"
		if p, err := procfs.NewProc(c.PID()); err == nil {
			if st, err := p.NewStatus(); err == nil {
				hwm = fmt.Sprintf("%.1f MiB", float64(st.VmHWM)/(1<<20))
			}
		}
		t.Logf("process %q reconciles %d objects; memory high-water mark %s", shard, len(got), hwm)
	}
	for name := range shardOf {
		s, err := env.Vault.Client.KVv2("ohmlab").Get(ctx, strings.TrimPrefix(shardPath(name), "ohmlab/"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.CustomMetadata).To(HaveKeyWithValue(ohmlabv1alpha1.OwnerMetadataKey, SeedNamespace+"/"+name))
	}

	// The webhook sees every shard: a duplicate of shard a's path, unlabelled, and a cycle
	// through shards a and b are refused.
	err = env.CP.Client.Create(ctx, &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: SeedNamespace, Name: "dup"},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: shardPath("s-0001"), Data: &apiextensionsv1.JSON{Raw: []byte(`{"x":"<random:8>"}`)}},
	})
	g.Expect(err).To(MatchError(ContainSubstring(SeedNamespace+"/s-0001")), "a path another shard's object holds")
	g.Expect(env.CP.Client.Create(ctx, shardSeed("cyc-x", "a", `{"v":"<ref:`+shardPath("cyc-y")+`#v>"}`))).To(Succeed())
	// The webhook reads its process's cache, which sees cyc-x a moment after its create: dry
	// runs (the webhook has no side effects) until it does, then the create.
	cycY := func() *ohmlabv1alpha1.VaultSeed {
		return shardSeed("cyc-y", "b", `{"v":"<ref:`+shardPath("cyc-x")+`#v>"}`)
	}
	g.Eventually(func() error { return env.CP.Client.Create(ctx, cycY(), client.DryRunAll) }).WithTimeout(10*time.Second).
		Should(MatchError(ContainSubstring("cycle")), "a cycle through shards a and b (dry run)")
	err = env.CP.Client.Create(ctx, cycY())
	g.Expect(err).To(MatchError(ContainSubstring("cycle")), "a cycle through shards a and b")

	// A reference across shards: the dependent (shard a) waits for its source (shard b), then
	// goes Ready on its own retry, with the source's value.
	g.Expect(env.CP.Client.Create(ctx, shardSeed("dep", "a", `{"copy":"<ref:`+shardPath("src")+`#password>"}`))).To(Succeed())
	get := func(name string) *ohmlabv1alpha1.VaultSeed {
		s := &ohmlabv1alpha1.VaultSeed{}
		g.Expect(env.CP.Client.Get(ctx, client.ObjectKey{Namespace: SeedNamespace, Name: name}, s)).To(Succeed())
		return s
	}
	g.Eventually(func() string {
		c := meta.FindStatusCondition(get("dep").Status.Conditions, ohmlabv1alpha1.ConditionReady)
		if c == nil {
			return ""
		}
		return c.Reason
	}).WithTimeout(30 * time.Second).Should(Equal(ohmlabv1alpha1.ReasonRefPending))
	g.Expect(env.CP.Client.Create(ctx, shardSeed("src", "b", `{"password":"<random:16>"}`))).To(Succeed())
	written := time.Now()
	g.Eventually(func() bool { return isReady(get("src")) }).WithTimeout(30 * time.Second).Should(BeTrue())
	// Its retry delay is at most 5 min (backoff 5 s doubling); here its second or third retry.
	g.Eventually(func() bool { return isReady(get("dep")) }).WithTimeout(backoffMaxWait).WithPolling(200 * time.Millisecond).Should(BeTrue())
	t.Logf("the dependent in shard a was Ready %s after its source in shard b was created", time.Since(written).Round(100*time.Millisecond))
	src, _ := readPath(t, env, shardPath("src"))
	dep, _ := readPath(t, env, shardPath("dep"))
	g.Expect(dep["copy"]).To(Equal(src["password"]), "the copy holds the source's value")
	g.Expect(readyObjects(t, procs["a"])).To(HaveKey("dep"))
	g.Expect(readyObjects(t, procs["b"])).To(And(HaveKey("src"), Not(HaveKey("dep"))))

	// Moving objects: s-0000 from the unsharded process (whose cache holds every object) to
	// shard a, s-0005 from shard b to it (a label change, which no generation change
	// announces), and m-del, with deletionPolicy Delete and so the finalizer, from a to b; and
	// s-0004 (shard a, a label-filtered cache) and s-0006 (the unsharded process) to the shard
	// "nobody", which no process runs.
	del := shardSeed("m-del", "a", `{"password":"<random:16>"}`)
	del.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	g.Expect(env.CP.Client.Create(ctx, del)).To(Succeed())
	g.Eventually(func() bool {
		s := get("m-del")
		return isReady(s) && slices.Contains(s.Finalizers, ohmlabv1alpha1.Finalizer)
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	const nobody = "nobody"
	moves := []struct{ name, from, to string }{{"s-0000", "", "a"}, {"s-0005", "b", ""}, {"m-del", "a", "b"}, {"s-0004", "a", nobody}, {"s-0006", "", nobody}}
	type snap struct {
		status     ohmlabv1alpha1.VaultSeedStatus
		finalizers []string
		version    int
	}
	// withoutTransitions is a status without the conditions' transition times: a move to a
	// running shard may pass through ShardChanged and back.
	withoutTransitions := func(st ohmlabv1alpha1.VaultSeedStatus) ohmlabv1alpha1.VaultSeedStatus {
		st = *st.DeepCopy()
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		return st
	}
	was := map[string]snap{}
	for _, mv := range moves {
		before := get(mv.name)
		_, version := readPath(t, env, shardPath(mv.name))
		was[mv.name] = snap{withoutTransitions(before.Status), before.Finalizers, version}
		patch := client.MergeFrom(before.DeepCopy())
		moved := before.DeepCopy()
		moved.Labels = map[string]string{ohmlabv1alpha1.ShardLabel: mv.to}
		if mv.to == "" {
			moved.Labels = nil
		}
		g.Expect(env.CP.Client.Patch(ctx, moved, patch)).To(Succeed())
	}
	// shardChanged is the status the process an object left writes when it moves to shard.
	shardChanged := func(s *ohmlabv1alpha1.VaultSeed, shard string) ohmlabv1alpha1.VaultSeedStatus {
		st := withoutTransitions(s.Status)
		msg := "labelled ohmlab.fr/shard=" + shard + ": the process of shard " + shard + " reconciles it now; until it does, this status is not kept up to date"
		st.Conditions = []metav1.Condition{
			{Type: ohmlabv1alpha1.ConditionReady, Status: metav1.ConditionUnknown, Reason: ohmlabv1alpha1.ReasonShardChanged, Message: msg, ObservedGeneration: s.Generation},
			{Type: ohmlabv1alpha1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: ohmlabv1alpha1.ReasonShardChanged, Message: msg, ObservedGeneration: s.Generation},
		}
		return st
	}
	for _, mv := range moves {
		g.Eventually(func() map[string]float64 { return readyObjects(t, procs[mv.from]) }).WithTimeout(30*time.Second).ShouldNot(HaveKey(mv.name), "process %q forgets %s", mv.from, mv.name)
		if mv.to == nobody {
			// The process it left says, within seconds, that it no longer keeps its status.
			g.Eventually(func() ohmlabv1alpha1.VaultSeedStatus { return withoutTransitions(get(mv.name).Status) }).WithTimeout(10*time.Second).
				Should(Equal(shardChanged(get(mv.name), nobody)), "%s moved from %q to a shard no process runs", mv.name, mv.from)
			continue
		}
		g.Eventually(func() map[string]float64 { return readyObjects(t, procs[mv.to]) }).WithTimeout(30*time.Second).Should(HaveKeyWithValue(mv.name, 1.0), "process %q adopts %s", mv.to, mv.name)
	}
	// Two resyncs later: Vault untouched, the status of a move to a running shard as it was
	// (Ready, written or kept by its new process), that of a move to nobody still ShardChanged.
	time.Sleep(2 * resync)
	for _, mv := range moves {
		after := get(mv.name)
		_, v := readPath(t, env, shardPath(mv.name))
		want := was[mv.name]
		if mv.to == nobody {
			want.status = shardChanged(after, nobody)
		}
		g.Expect(snap{withoutTransitions(after.Status), after.Finalizers, v}).To(Equal(want), "%s after its move from %q to %q", mv.name, mv.from, mv.to)
		g.Expect(readyObjects(t, procs[mv.from])).NotTo(HaveKey(mv.name))
		shardOf[mv.name] = mv.to
	}
	// Its new shard's process deletes the moved object's path with it.
	g.Expect(env.CP.Client.Delete(ctx, get("m-del"))).To(Succeed())
	g.Eventually(func() bool {
		err := env.CP.Client.Get(ctx, client.ObjectKey{Namespace: SeedNamespace, Name: "m-del"}, &ohmlabv1alpha1.VaultSeed{})
		return err != nil && strings.Contains(err.Error(), "not found")
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	_, err = env.Vault.Client.KVv2("ohmlab").GetMetadata(ctx, strings.TrimPrefix(shardPath("m-del"), "ohmlab/"))
	g.Expect(err).To(HaveOccurred(), "the path of m-del is deleted")
	delete(shardOf, "m-del")

	// Killing shard a's process: a snapshot of every object and path, then the kill, then two
	// resync periods.
	type state struct {
		resourceVersion string
		kvVersion       int
	}
	snapshot := func() map[string]state {
		out := map[string]state{}
		for name, s := range list() {
			if _, ok := shardOf[name]; !ok {
				continue
			}
			_, v := readPath(t, env, shardPath(name))
			out[name] = state{resourceVersion: s.ResourceVersion, kvVersion: v}
		}
		return out
	}
	before := snapshot()
	procs["a"].Kill()
	// After the kill, one of a's objects changes its spec, and one of b's: only b's is
	// reconciled.
	edit := func(name string) {
		s := get(name)
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Data = &apiextensionsv1.JSON{Raw: []byte(`{"password":"<random:16>","extra":"<random:8>"}`)}
		g.Expect(env.CP.Client.Patch(ctx, s, patch)).To(Succeed())
	}
	edit("s-0001") // shard a
	edit("s-0002") // shard b
	g.Eventually(func() bool { return isReady(get("s-0002")) }).WithTimeout(30 * time.Second).Should(BeTrue())
	time.Sleep(2 * resync)
	after := snapshot()
	for name, shard := range shardOf {
		switch name {
		case "s-0001":
			s := get(name)
			g.Expect(s.Status.ObservedGeneration).To(BeNumerically("<", s.Generation), "nobody reconciles shard a's object while its process is down")
			g.Expect(after[name]).To(Equal(state{resourceVersion: s.ResourceVersion, kvVersion: before[name].kvVersion}))
		case "s-0002":
			g.Expect(after[name].kvVersion).To(Equal(before[name].kvVersion+1), "shard b still reconciles")
		default:
			g.Expect(after[name]).To(Equal(before[name]), "%s (shard %q) untouched after shard a's process was killed", name, shard)
		}
	}
	for _, c := range []*Controller{procs[""], procs["b"]} {
		objs := readyObjects(t, c)
		for name, shard := range shardOf {
			if shard == "a" {
				g.Expect(objs).NotTo(HaveKey(name), "%s does not take over shard a's %s", c.Name, name)
			}
		}
	}

	// Shard a back: it reconciles its changed object.
	procs["a"] = startShard(t, env, "a")
	g.Eventually(func() bool { return isReady(get("s-0001")) }).WithTimeout(60 * time.Second).Should(BeTrue())
}

// backoffMaxWait bounds the wait of a RefPending dependent: its retry delay (5 s doubling, at
// most 5 min) when its source is written, and the reconcile.
const backoffMaxWait = 5*time.Minute + 30*time.Second

func mapKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
