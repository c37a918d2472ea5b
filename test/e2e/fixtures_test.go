package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	vaultapi "github.com/hashicorp/vault/api"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// writeFixturesEnv switches TestFixtures from comparing the committed
// fixtures to rewriting them (`make fixtures`).
const writeFixturesEnv = "OHMLAB_WRITE_FIXTURES"

// Where the recorded fixtures live: the VaultSeed objects next to the Argo
// CD health script that reads them (test/argocd evaluates it on each), the
// scrape's metric and label names next to the alert tests that use them
// (test/prometheus).
var (
	objectFixtures = filepath.Join(harness.RepoRoot(), "charts", "ohmlab-controller", "argocd", "testdata")
	metricsFixture = filepath.Join(harness.RepoRoot(), "test", "prometheus", "testdata", "metrics.yaml")
)

// fixturePrefix is where the fixtures' paths live: under the chart's policy
// (platforms/<platform>/<tier>/...), so that only the cases that want a
// refusal get one.
const fixturePrefix = "ohmlab/platforms/fixtures/core/"

// TestFixtures drives real VaultSeed objects through the built controller
// into every state the product document names (section "Conditions") and
// records each object, as `kubectl get -o yaml` shows it, for the Argo CD
// health script's tests; it records the names and labels of the metrics the
// controller serves for the alert and dashboard tests. By default it fails
// when a committed fixture differs: run `make fixtures` to rewrite them.
//
// One environment, four controller runs, in order:
//  1. a normal target (allowDelete false): Ready, RefPending, Forbidden,
//     OwnedByAnother, ShardChanged (labelled for a shard nobody runs), PathDeleted, BackendUnavailable (sealed), then, with
//     the admission webhook removed, InvalidSpec and RefCycle;
//  2. no controller: a spec change it has not observed, an object it never saw;
//  3. allowDelete true: an object being deleted whose path Vault refuses to
//     delete (the chart's base policy has no delete capability);
//  4. observeOnly true: in sync, drifted, and unable to plan (RefPending).
func TestFixtures(t *testing.T) {
	ctx := context.Background()
	env := startEnv(t, 3*time.Second)
	rec := newRecorder(t, env)

	// 1. A normal target.
	c := startController(t, env)
	// A rotation period: the path records its start, which the rotation
	// metric shows.
	rec.create(seed("ready", func(s *ohmlabv1alpha1.VaultSeed) { s.Spec.Rotate = &ohmlabv1alpha1.Rotation{Every: "90d"} },
		map[string]any{"admin": map[string]any{"user": "admin", "password": "<random:24>"}}))
	rec.record("ready", hasCondition(ohmlabv1alpha1.ConditionReady, metav1.ConditionTrue, ohmlabv1alpha1.ReasonReconciled))

	rec.create(seed("ref-pending-first-generation", nil, map[string]any{"token": "<ref:" + fixturePrefix + "not-seeded-yet#token>"}))
	rec.record("ref-pending-first-generation", hasCondition(ohmlabv1alpha1.ConditionReconciling, metav1.ConditionTrue, ohmlabv1alpha1.ReasonRefPending))

	// A later generation that starts to wait: the object was Ready before.
	rec.create(seed("ref-pending-later-generation", nil, map[string]any{"user": "grafana"}))
	rec.wait("ref-pending-later-generation", hasCondition(ohmlabv1alpha1.ConditionReady, metav1.ConditionTrue, ohmlabv1alpha1.ReasonReconciled))
	rec.update("ref-pending-later-generation", func(s *ohmlabv1alpha1.VaultSeed) {
		s.Spec.Data = jsonData(t, map[string]any{"user": "grafana", "token": "<ref:" + fixturePrefix + "not-seeded-yet#token>"})
	})
	rec.record("ref-pending-later-generation", hasCondition(ohmlabv1alpha1.ConditionReconciling, metav1.ConditionTrue, ohmlabv1alpha1.ReasonRefPending))

	// Outside the policy's platforms/<platform>/<tier>/... : Vault answers 403.
	outside := seed("forbidden", nil, map[string]any{"user": "admin"})
	outside.Spec.Path = "ohmlab/outside-the-policy/forbidden"
	rec.create(outside)
	rec.record("forbidden", hasCondition(ohmlabv1alpha1.ConditionReconciling, metav1.ConditionTrue, ohmlabv1alpha1.ReasonForbidden))

	rec.create(seed("delete-not-allowed", func(s *ohmlabv1alpha1.VaultSeed) {
		s.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	}, map[string]any{"user": "admin"}))
	rec.record("delete-not-allowed", hasCondition(ohmlabv1alpha1.ConditionStalled, metav1.ConditionTrue, ohmlabv1alpha1.ReasonForbidden))

	// A path another object's marker claims.
	kv := env.Vault.Client.KVv2("ohmlab")
	claimed := strings.TrimPrefix(fixturePrefix, "ohmlab/") + "owned-by-another"
	if _, err := kv.Put(ctx, claimed, map[string]any{"user": "someone"}); err != nil {
		t.Fatal(err)
	}
	if err := kv.PatchMetadata(ctx, claimed, vaultMetadata(map[string]any{ohmlabv1alpha1.OwnerMetadataKey: "another-namespace/another-seed"})); err != nil {
		t.Fatal(err)
	}
	rec.create(seed("owned-by-another", nil, map[string]any{"user": "admin"}))
	rec.record("owned-by-another", hasCondition(ohmlabv1alpha1.ConditionReady, metav1.ConditionFalse, ohmlabv1alpha1.ReasonOwnedByAnother))

	// Labelled for a shard no process runs, after it was Ready: the process it
	// left says it no longer keeps its status.
	rec.create(seed("shard-changed", nil, map[string]any{"user": "admin"}))
	rec.wait("shard-changed", hasCondition(ohmlabv1alpha1.ConditionReady, metav1.ConditionTrue, ohmlabv1alpha1.ReasonReconciled))
	rec.update("shard-changed", func(s *ohmlabv1alpha1.VaultSeed) {
		s.Labels = map[string]string{ohmlabv1alpha1.ShardLabel: "nobody"}
	})
	rec.record("shard-changed", hasCondition(ohmlabv1alpha1.ConditionReconciling, metav1.ConditionTrue, ohmlabv1alpha1.ReasonShardChanged))

	// vault kv delete of the latest version, after the object was Ready.
	rec.create(seed("path-deleted", nil, map[string]any{"user": "admin"}))
	rec.wait("path-deleted", hasCondition(ohmlabv1alpha1.ConditionReady, metav1.ConditionTrue, ohmlabv1alpha1.ReasonReconciled))
	if err := kv.Delete(ctx, strings.TrimPrefix(fixturePrefix, "ohmlab/")+"path-deleted"); err != nil {
		t.Fatal(err)
	}
	rec.record("path-deleted", hasCondition(ohmlabv1alpha1.ConditionStalled, metav1.ConditionTrue, ohmlabv1alpha1.ReasonPathDeleted))

	// Generation not observed yet: this object is edited while no controller runs (step 2).
	rec.create(seed("generation-not-observed", nil, map[string]any{"user": "admin"}))
	rec.wait("generation-not-observed", hasCondition(ohmlabv1alpha1.ConditionReady, metav1.ConditionTrue, ohmlabv1alpha1.ReasonReconciled))
	// In sync in observe-only mode (step 4), once seeded here.
	rec.create(seed("observe-only-in-sync", nil, map[string]any{"user": "admin"}))
	rec.wait("observe-only-in-sync", hasCondition(ohmlabv1alpha1.ConditionReady, metav1.ConditionTrue, ohmlabv1alpha1.ReasonReconciled))

	// Vault sealed: a new object cannot be reconciled.
	if err := env.Vault.Seal(); err != nil {
		t.Fatal(err)
	}
	rec.create(seed("backend-unavailable", nil, map[string]any{"user": "admin"}))
	rec.record("backend-unavailable", hasCondition(ohmlabv1alpha1.ConditionReconciling, metav1.ConditionTrue, ohmlabv1alpha1.ReasonBackendUnavailable))
	if err := env.Vault.Unseal(); err != nil {
		t.Fatal(err)
	}
	// The objects recorded later may have met the sealed Vault at a resync:
	// wait until they are back, or their backoff could outlast this run.
	for _, name := range []string{"backend-unavailable", "generation-not-observed", "observe-only-in-sync"} {
		rec.wait(name, hasCondition(ohmlabv1alpha1.ConditionReady, metav1.ConditionTrue, ohmlabv1alpha1.ReasonReconciled))
	}

	// The admission webhook refuses what follows; the controller must
	// still report it (an object created before the webhook, or with the
	// webhook down and failurePolicy Ignore).
	if out, err := env.Kubectl(ctx, "delete", "validatingwebhookconfigurations", "--all"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	rec.create(seed("invalid-spec", nil, map[string]any{"admin": map[string]any{"password": "<random:24>", "passwordHashed": "<bcrypt:admin.pasword>"}}))
	rec.record("invalid-spec", hasCondition(ohmlabv1alpha1.ConditionStalled, metav1.ConditionTrue, ohmlabv1alpha1.ReasonInvalidSpec))
	rec.create(seed("ref-cycle-a", nil, map[string]any{"token": "<ref:" + fixturePrefix + "ref-cycle-b#token>"}))
	rec.create(seed("ref-cycle-b", nil, map[string]any{"token": "<ref:" + fixturePrefix + "ref-cycle-a#token>"}))
	rec.record("ref-cycle-a", hasCondition(ohmlabv1alpha1.ConditionStalled, metav1.ConditionTrue, ohmlabv1alpha1.ReasonRefCycle))
	rec.scrape(c)
	c.Stop()

	// 2. No controller.
	rec.update("generation-not-observed", func(s *ohmlabv1alpha1.VaultSeed) {
		s.Spec.Data = jsonData(t, map[string]any{"user": "admin", "email": "admin@example.org"})
	})
	rec.record("generation-not-observed", func(s *ohmlabv1alpha1.VaultSeed) bool { return s.Generation == 2 })
	rec.create(seed("never-reconciled", nil, map[string]any{"user": "admin"}))
	rec.record("never-reconciled", func(*ohmlabv1alpha1.VaultSeed) bool { return true })

	// 3. allowDelete: deleting a path the policy does not let the controller delete.
	rec.setTarget(map[string]any{"allowDelete": true})
	c = startController(t, env)
	rec.create(seed("deleting", func(s *ohmlabv1alpha1.VaultSeed) {
		s.Spec.DeletionPolicy = ohmlabv1alpha1.DeletionPolicyDelete
	}, map[string]any{"user": "admin"}))
	rec.wait("deleting", func(s *ohmlabv1alpha1.VaultSeed) bool {
		return len(s.Finalizers) > 0 && hasCondition(ohmlabv1alpha1.ConditionReady, metav1.ConditionTrue, ohmlabv1alpha1.ReasonReconciled)(s)
	})
	rec.delete("deleting")
	rec.record("deleting", func(s *ohmlabv1alpha1.VaultSeed) bool {
		return s.DeletionTimestamp != nil && hasCondition(ohmlabv1alpha1.ConditionReconciling, metav1.ConditionTrue, ohmlabv1alpha1.ReasonForbidden)(s)
	})
	rec.scrape(c)
	c.Stop()

	// 4. observeOnly.
	rec.setTarget(map[string]any{"allowDelete": false, "observeOnly": true})
	c = startController(t, env)
	rec.record("observe-only-in-sync", hasCondition(ohmlabv1alpha1.ConditionDrifted, metav1.ConditionFalse, ohmlabv1alpha1.ReasonInSync))
	rec.create(seed("observe-only-drifted", nil, map[string]any{"user": "admin", "password": "<random:24>"}))
	rec.record("observe-only-drifted", hasCondition(ohmlabv1alpha1.ConditionDrifted, metav1.ConditionTrue, ohmlabv1alpha1.ReasonObserveOnly))
	// A plan that cannot be made: nothing to compare the path with yet.
	rec.create(seed("observe-only-ref-pending", nil, map[string]any{"token": "<ref:" + fixturePrefix + "not-seeded-yet#token>"}))
	rec.record("observe-only-ref-pending", hasCondition(ohmlabv1alpha1.ConditionReconciling, metav1.ConditionTrue, ohmlabv1alpha1.ReasonRefPending))
	rec.scrape(c)
	c.Stop()

	rec.finish()
}

// seed is a VaultSeed of the fixtures' namespace whose path is named after it.
func seed(name string, mutate func(*ohmlabv1alpha1.VaultSeed), data map[string]any) *ohmlabv1alpha1.VaultSeed {
	raw, err := yaml.Marshal(data)
	if err != nil {
		panic(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		panic(err)
	}
	s := &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: SeedNamespace, Name: name},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: fixturePrefix + name},
	}
	s.Spec.Data = jsonFrom(js)
	if mutate != nil {
		mutate(s)
	}
	return s
}

func hasCondition(typ string, status metav1.ConditionStatus, reason string) func(*ohmlabv1alpha1.VaultSeed) bool {
	return func(s *ohmlabv1alpha1.VaultSeed) bool {
		c := meta.FindStatusCondition(s.Status.Conditions, typ)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == s.Generation
	}
}

func vaultMetadata(custom map[string]any) vaultapi.KVMetadataPatchInput {
	return vaultapi.KVMetadataPatchInput{CustomMetadata: custom}
}

// recorder creates the objects, waits for their states, and records them
// and the controller's metrics.
type recorder struct {
	t        *testing.T
	env      *Env
	objects  map[string][]byte
	families map[string]*metricFamily
}

func newRecorder(t *testing.T, env *Env) *recorder {
	return &recorder{t: t, env: env, objects: map[string][]byte{}, families: map[string]*metricFamily{}}
}

func (r *recorder) create(s *ohmlabv1alpha1.VaultSeed) {
	r.t.Helper()
	if err := r.env.CP.Client.Create(context.Background(), s); err != nil {
		r.t.Fatalf("creating %s: %v", s.Name, err)
	}
}

func (r *recorder) update(name string, mutate func(*ohmlabv1alpha1.VaultSeed)) {
	r.t.Helper()
	s := r.get(name)
	mutate(s)
	if err := r.env.CP.Client.Update(context.Background(), s); err != nil {
		r.t.Fatalf("updating %s: %v", name, err)
	}
}

func (r *recorder) delete(name string) {
	r.t.Helper()
	if err := r.env.CP.Client.Delete(context.Background(), r.get(name)); err != nil {
		r.t.Fatalf("deleting %s: %v", name, err)
	}
}

func (r *recorder) get(name string) *ohmlabv1alpha1.VaultSeed {
	r.t.Helper()
	s := &ohmlabv1alpha1.VaultSeed{}
	if err := r.env.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: SeedNamespace, Name: name}, s); err != nil {
		r.t.Fatalf("getting %s: %v", name, err)
	}
	return s
}

// wait polls the object until ok holds.
func (r *recorder) wait(name string, ok func(*ohmlabv1alpha1.VaultSeed) bool) {
	r.t.Helper()
	var last *ohmlabv1alpha1.VaultSeed
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		last = &ohmlabv1alpha1.VaultSeed{}
		if err := r.env.CP.Client.Get(ctx, client.ObjectKey{Namespace: SeedNamespace, Name: name}, last); err != nil {
			return false, nil
		}
		return ok(last), nil
	})
	if err != nil {
		status, _ := yaml.Marshal(last.Status)
		r.t.Fatalf("%s did not reach the expected state: %v\nlast status:\n%s", name, err, status)
	}
}

// record waits until ok holds, then keeps the object as `kubectl get -o
// yaml` returns it, normalised.
func (r *recorder) record(name string, ok func(*ohmlabv1alpha1.VaultSeed) bool) {
	r.t.Helper()
	r.wait(name, ok)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ohmlabv1alpha1.GroupVersion.WithKind("VaultSeed"))
	if err := r.env.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: SeedNamespace, Name: name}, u); err != nil {
		r.t.Fatal(err)
	}
	out, err := yaml.Marshal(normalise(u.Object, r.env.Vault.Addr).(map[string]any))
	if err != nil {
		r.t.Fatal(err)
	}
	r.objects[name+".yaml"] = append([]byte(fixtureHeader("TestFixtures (test/e2e) from the controller; `make fixtures` rewrites it")), out...)
}

// setTarget changes options of the vault target in the configuration file
// the next controller reads.
func (r *recorder) setTarget(options map[string]any) {
	r.t.Helper()
	raw, err := os.ReadFile(r.env.Config)
	if err != nil {
		r.t.Fatal(err)
	}
	var cfg map[string]map[string]map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		r.t.Fatal(err)
	}
	for k, v := range options {
		cfg["targets"]["vault"][k] = v
	}
	if raw, err = yaml.Marshal(cfg); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(r.env.Config, raw, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// metricFamily is what a test may rely on of one metric: its type and the
// names (not values) of its labels.
type metricFamily struct {
	Type   string   `json:"type"`
	Labels []string `json:"labels"`
}

// runtimeMetrics are left out of the metrics fixture: the Go runtime's and
// the process's families change with the Go release and the OS, and no
// alert or panel uses them.
var runtimeMetrics = regexp.MustCompile(`^(go|process|promhttp)_`)

// scrape adds the families the controller serves on /metrics to the union
// of the runs.
func (r *recorder) scrape(c *Controller) {
	r.t.Helper()
	code, body := httpGet(context.Background(), "http://"+c.MetricsAddr+"/metrics")
	if code != 200 {
		r.t.Fatalf("GET /metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		r.t.Fatalf("parsing /metrics: %v", err)
	}
	for name, f := range families {
		if runtimeMetrics.MatchString(name) {
			continue
		}
		mf := r.families[name]
		if mf == nil {
			mf = &metricFamily{Type: strings.ToLower(f.GetType().String())}
			r.families[name] = mf
		}
		mf.Labels = unionLabels(mf.Labels, f.GetMetric())
	}
}

func unionLabels(have []string, metrics []*dto.Metric) []string {
	set := map[string]bool{}
	for _, l := range have {
		set[l] = true
	}
	for _, m := range metrics {
		for _, l := range m.GetLabel() {
			set[l.GetName()] = true
		}
	}
	out := make([]string, 0, len(set))
	for l := range set {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// finish writes the fixtures (make fixtures) or compares them with the
// committed ones.
func (r *recorder) finish() {
	r.t.Helper()
	metrics, err := yaml.Marshal(map[string]any{"metrics": r.families})
	if err != nil {
		r.t.Fatal(err)
	}
	metrics = append([]byte(fixtureHeader("TestFixtures (test/e2e) from the controller's /metrics (names and label names only, Go runtime and process families left out); `make fixtures` rewrites it")), metrics...)
	write := os.Getenv(writeFixturesEnv) != ""
	if write {
		if err := os.MkdirAll(filepath.Dir(metricsFixture), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(metricsFixture, metrics, 0o644); err != nil {
			r.t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(objectFixtures, "*.yaml"))
		for _, f := range old {
			if _, ok := r.objects[filepath.Base(f)]; !ok {
				if err := os.Remove(f); err != nil {
					r.t.Fatal(err)
				}
			}
		}
		for name, data := range r.objects {
			if err := os.WriteFile(filepath.Join(objectFixtures, name), data, 0o644); err != nil {
				r.t.Fatal(err)
			}
		}
		r.t.Logf("wrote %d object fixtures in %s and %s", len(r.objects), objectFixtures, metricsFixture)
		return
	}
	compare := func(file string, want []byte) {
		got, err := os.ReadFile(file)
		if err != nil {
			r.t.Errorf("%v: run make fixtures", err)
			return
		}
		if !bytes.Equal(got, want) {
			r.t.Errorf("%s differs from what the controller produces (-committed +produced): run make fixtures, then check test/argocd and test/prometheus\n%s",
				file, cmp.Diff(string(got), string(want)))
		}
	}
	compare(metricsFixture, metrics)
	committed, _ := filepath.Glob(filepath.Join(objectFixtures, "*.yaml"))
	for _, f := range committed {
		if _, ok := r.objects[filepath.Base(f)]; !ok {
			r.t.Errorf("%s is not produced by TestFixtures any more: run make fixtures", f)
		}
	}
	names := make([]string, 0, len(r.objects))
	for name := range r.objects {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		compare(filepath.Join(objectFixtures, name), r.objects[name])
	}
}

func fixtureHeader(by string) string {
	return "# Recorded by " + by + ".\n"
}

// fixedTime replaces every timestamp of a fixture.
const fixedTime = "2026-01-01T00:00:00Z"

// loopbackAddr matches the random ports of the servers on loopback.
var loopbackAddr = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)

// normalise removes from an object what changes from run to run: what the
// API server assigns (managedFields, uid, resourceVersion), timestamps,
// and the random loopback port of Vault in messages. deletionTimestamp is
// kept, fixed, since it marks the object as being deleted.
func normalise(v any, vaultAddr string) any {
	switch v := v.(type) {
	case map[string]any:
		if md, ok := v["metadata"].(map[string]any); ok {
			for _, k := range []string{"managedFields", "uid", "resourceVersion"} {
				delete(md, k)
			}
		}
		for k, e := range v {
			v[k] = normalise(e, vaultAddr)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = normalise(e, vaultAddr)
		}
		return v
	case string:
		if _, err := time.Parse(time.RFC3339, v); err == nil {
			return fixedTime
		}
		return loopbackAddr.ReplaceAllString(v, "127.0.0.1:8200")
	default:
		return v
	}
}

func jsonData(t *testing.T, data map[string]any) *apiextensionsv1.JSON {
	t.Helper()
	raw, err := yaml.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	return jsonFrom(js)
}

func jsonFrom(js []byte) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: js} }
