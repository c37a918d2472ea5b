package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// TestMigrationFromThePostConfigJob rehearses the product document's
// "Migrating from the post-config Job" (issue 17), through the built
// binaries (ohmlab-controller, ohmlab, kubectl) and Vault's audit log:
//
//  1. A Job-like writer seeds the paths without check-and-set, as the old
//     Job did after every sync, and keeps running.
//  2. Shadow: the target runs with observeOnly: true. Over several resyncs
//     and Vault token renewals every object plans "1 adopt" only, ohmlab
//     plan says the same, and the controller writes nothing.
//  3. Takeover: observeOnly: false. The first reconcile writes only the
//     owner markers (no new KV version). The writer runs once more: no
//     generated key is regenerated, hand edits stay.
//  4. Back: observeOnly: true again writes nothing.
func TestMigrationFromThePostConfigJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env := startEnv(t, 2*time.Second)
	samples := []Sample{Keycloak, Grafana}
	audit := enableAudit(t, env)
	ohmlab := buildOhmlab(t)
	planToken := readOnlyToken(t, env)
	// The controller's Vault token lives 6 s (the chart's role grants 15
	// min), so that the shadow sees it replaced twice.
	g.Expect(env.Vault.WriteKubernetesRole(ctx, harness.KubernetesRole{
		Name: VaultRole, ServiceAccount: env.Chart.ServiceAccount, Namespace: ControllerNamespace,
		Audience: env.Chart.VaultAudience, Policies: []string{VaultPolicy}, TTL: 6 * time.Second,
	})).To(Succeed())

	// 1. The old Job seeds the paths and keeps running.
	job := newJob(t, env, samples)
	job.run()
	stopJob := job.loop(500 * time.Millisecond)
	// A person fills in the placeholder and edits a generated key by hand.
	handEdit(t, env, Keycloak.Path, map[string]any{"webhook": "typed-by-hand-webhook", "admin.username": "admin"})

	// 2. Shadow.
	setObserveOnly(t, env, true)
	c := startController(t, env)
	for _, s := range samples {
		out, err := env.Apply(ctx, s)
		g.Expect(err).NotTo(HaveOccurred(), out)
	}
	for _, s := range samples {
		g.Eventually(func() string { return drifted(t, env, s) }).WithTimeout(60*time.Second).
			Should(Equal("True ObserveOnly 1 adopt"), s.Name)
	}
	// Several resyncs and two token renewals, the Job writing all along.
	g.Eventually(func() int {
		return metric(t, c, `ohmlab_backend_requests_total\{code="ok",operation="login",target="vault"\} (\d+)`)
	}).
		WithTimeout(60 * time.Second).WithPolling(time.Second).Should(BeNumerically(">=", 3))
	g.Expect(metric(t, c, `controller_runtime_reconcile_total\{controller="vaultseed",result="requeue_after"\} (\d+)`)).To(BeNumerically(">=", 8), "four resyncs of each object")
	for _, s := range samples {
		g.Expect(drifted(t, env, s)).To(Equal("True ObserveOnly 1 adopt"), "%s after the resyncs and renewals", s.Name)
	}
	live, err := env.Kubectl(ctx, "-n", SeedNamespace, "get", "vaultseeds", "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred(), live)
	code, out := runOhmlab(t, ohmlab, env, planToken, live, "plan", "-")
	g.Expect(code).To(Equal(2), out)
	g.Expect(out).To(Equal(Grafana.ID() + " " + Grafana.Path + ": 1 adopt\n" +
		Keycloak.ID() + " " + Keycloak.Path + ": 1 adopt\n" +
		"Plan: 2 objects: 2 with changes (2 adopt), 0 would wait, 0 would stall, 0 in sync.\n"))
	stopJob()
	g.Expect(audit.controllerWrites()).To(BeEmpty(), "observe-only wrote to Vault")
	g.Expect(audit.writesBy("plan-read")).To(BeEmpty(), "ohmlab plan wrote to Vault")
	before := map[string]pathState{}
	for _, s := range samples {
		before[s.Path] = readState(t, env, s.Path)
		g.Expect(before[s.Path].Owner).To(BeEmpty())
	}

	// 3. Takeover: only the owner markers are written, no KV version.
	c.Stop()
	setObserveOnly(t, env, false)
	c = startController(t, env)
	for _, s := range samples {
		g.Expect(env.WaitReady(ctx, s)).To(Succeed())
	}
	for _, s := range samples {
		after := readState(t, env, s.Path)
		g.Expect(after.Version).To(Equal(before[s.Path].Version), "%s: a new KV version", s.Path)
		g.Expect(after.Data).To(Equal(before[s.Path].Data), s.Path)
		g.Expect(after.Owner).To(Equal(s.ID()))
	}
	markers := []string{"patch ohmlab/metadata/platforms/production/core/keycloak", "patch ohmlab/metadata/platforms/production/core/grafana"}
	g.Expect(audit.controllerWrites()).To(ConsistOf(markers), "the takeover writes one owner marker per path, and nothing else")
	// The Job runs once more: it keeps what exists, so nothing is
	// regenerated and the hand edits stay; the controller has nothing to do.
	job.run()
	time.Sleep(3 * 2 * time.Second)
	for _, s := range samples {
		after := readState(t, env, s.Path)
		g.Expect(after.Data).To(Equal(before[s.Path].Data), "%s after the Job ran again", s.Path)
		g.Expect(after.Version).To(Equal(before[s.Path].Version+1), "%s: only the Job's write", s.Path)
	}
	g.Expect(nested(readState(t, env, Keycloak.Path).Data, "webhook")).To(Equal("typed-by-hand-webhook"))
	g.Expect(audit.controllerWrites()).To(ConsistOf(markers), "the controller wrote after the Job's run")

	// 4. Back to observe-only: nothing written, nothing to change.
	c.Stop()
	setObserveOnly(t, env, true)
	c = startController(t, env)
	for _, s := range samples {
		g.Eventually(func() string { return drifted(t, env, s) }).WithTimeout(30*time.Second).
			Should(Equal("False InSync a real run would change nothing"), s.Name)
	}
	time.Sleep(2 * 2 * time.Second)
	g.Expect(audit.controllerWrites()).To(ConsistOf(markers), "observe-only wrote after the takeover")
	live, err = env.Kubectl(ctx, "-n", SeedNamespace, "get", "vaultseeds", "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred(), live)
	code, out = runOhmlab(t, ohmlab, env, planToken, live, "plan", "-")
	g.Expect(code).To(Equal(0), out)
	g.Expect(out).To(Equal("Plan: 2 objects: 0 with changes, 0 would wait, 0 would stall, 2 in sync.\n"))
	g.Expect(c.Logs() + out).NotTo(ContainSubstring("typed-by-hand-webhook"))
}

// ID is the sample's "<namespace>/<name>", its owner marker.
func (s Sample) ID() string { return SeedNamespace + "/" + s.Name }

// setObserveOnly sets targets.vault.observeOnly in the controller's
// configuration file; the next controller started reads it.
func setObserveOnly(t *testing.T, env *Env, on bool) {
	t.Helper()
	data, err := os.ReadFile(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]map[string]map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["targets"]["vault"]["observeOnly"] = on
	if data, err = yaml.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env.Config, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// drifted is "<status> <reason> <message>" of the sample's Drifted
// condition, read with kubectl.
func drifted(t *testing.T, env *Env, s Sample) string {
	t.Helper()
	out, _ := env.Kubectl(context.Background(), "-n", SeedNamespace, "get", "vaultseed", s.Name, "-o",
		`jsonpath={.status.conditions[?(@.type=="Drifted")].status} {.status.conditions[?(@.type=="Drifted")].reason} {.status.conditions[?(@.type=="Drifted")].message}`)
	return out
}

// metric returns the first integer group of re in the controller's metrics,
// 0 when absent.
func metric(t *testing.T, c *Controller, re string) int {
	t.Helper()
	_, body := httpGet(context.Background(), "http://"+c.MetricsAddr+"/metrics")
	m := regexp.MustCompile(re).FindStringSubmatch(body)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// buildOhmlab builds the ohmlab CLI from the working tree.
func buildOhmlab(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ohmlab")
	build := exec.Command("go", "build", "-o", bin, "./cmd/ohmlab")
	build.Dir = harness.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building ohmlab: %v\n%s", err, out)
	}
	return bin
}

// runOhmlab runs the CLI with Vault named by the environment, as an
// operator would, and returns its exit code and output.
func runOhmlab(t *testing.T, bin string, env *Env, token, stdin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "VAULT_ADDR="+env.Vault.Addr, "VAULT_TOKEN="+token, "VAULT_CACERT=")
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if stderr.Len() > 0 {
		t.Logf("ohmlab %s: %s", strings.Join(args, " "), stderr.String())
	}
	return code, string(out)
}

// readOnlyToken is a Vault token whose only policy, plan-read, reads KV
// data: the token an operator gives ohmlab plan.
func readOnlyToken(t *testing.T, env *Env) string {
	t.Helper()
	v := env.Vault.Client
	if err := v.Sys().PutPolicy("plan-read", `path "ohmlab/data/*" { capabilities = ["read"] }`); err != nil {
		t.Fatal(err)
	}
	s, err := v.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{"plan-read"}, NoDefaultPolicy: true, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	return s.Auth.ClientToken
}

// pathState is one path as the root token reads it.
type pathState struct {
	Data    map[string]any
	Version int
	Owner   string
}

func readState(t *testing.T, env *Env, path string) pathState {
	t.Helper()
	mount, rest, _ := strings.Cut(path, "/")
	s, err := env.Vault.Client.KVv2(mount).Get(context.Background(), rest)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	owner, _ := s.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey].(string)
	return pathState{Data: s.Data, Version: s.VersionMetadata.Version, Owner: owner}
}

// handEdit sets dotted keys of a path with the root token, as a person
// would with vault kv patch.
func handEdit(t *testing.T, env *Env, path string, keys map[string]any) {
	t.Helper()
	st := readState(t, env, path)
	for k, v := range keys {
		templating.SetPath(st.Data, k, v)
	}
	mount, rest, _ := strings.Cut(path, "/")
	if _, err := env.Vault.Client.KVv2(mount).Put(context.Background(), rest, st.Data); err != nil {
		t.Fatal(err)
	}
}

// job plays the old vault-post-config Job ("ohmlab vault secret"): for
// each object it reads the path, generates the keys that are missing
// (seed once), copies the references, and writes the whole tree back
// without check-and-set, at every run.
type job struct {
	t       *testing.T
	env     *Env
	objects []templating.Object
}

func newJob(t *testing.T, env *Env, samples []Sample) *job {
	j := &job{t: t, env: env}
	for _, s := range samples {
		data, err := os.ReadFile(s.Manifest())
		if err != nil {
			t.Fatal(err)
		}
		seed := &ohmlabv1alpha1.VaultSeed{}
		if err := yaml.Unmarshal(data, seed); err != nil {
			t.Fatal(err)
		}
		o, err := seeds.Object(seed)
		if err != nil {
			t.Fatal(err)
		}
		j.objects = append(j.objects, o)
	}
	return j
}

func (j *job) run() {
	j.t.Helper()
	ctx := context.Background()
	for _, o := range j.objects {
		a := templating.Analyse(o)
		mount, rest, _ := strings.Cut(o.Path, "/")
		kv := j.env.Vault.Client.KVv2(mount)
		tree := map[string]any{}
		if s, err := kv.Get(ctx, rest); err == nil {
			tree = s.Data
		}
		refs := map[string]string{}
		for _, k := range a.Keys {
			if l := a.Leaves[k]; l.Kind == templating.KindRef && l.Ref.Path != o.Path {
				src, err := j.env.Vault.Client.KVv2(mount).Get(ctx, strings.TrimPrefix(l.Ref.Path, mount+"/"))
				if err != nil {
					j.t.Errorf("the Job reads %s: %v", l.Ref.Path, err)
					return
				}
				refs[k] = templating.Stringify(templating.Flatten(src.Data)[l.Ref.Key])
			}
		}
		fill, err := templating.Generator{BcryptCost: 4}.Fill(ctx, a, templating.FillInput{Current: templating.Flatten(tree), Refs: refs})
		if err != nil || len(fill.Held) > 0 {
			j.t.Errorf("the Job fills %s: %v %v", o.Path, err, fill.Held)
			return
		}
		for _, c := range fill.Changes {
			templating.SetPath(tree, c.Key, fill.Values[c.Key])
		}
		if _, err := kv.Put(ctx, rest, tree); err != nil { // no cas, as the Job
			j.t.Errorf("the Job writes %s: %v", o.Path, err)
		}
	}
}

// loop runs the Job every period until the returned function is called.
func (j *job) loop(period time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				j.run()
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	j.t.Cleanup(stop)
	return stop
}

// auditLog is Vault's file audit device: every request, with the policies
// of its token (values are HMACed by Vault, never in clear).
type auditLog struct {
	t    *testing.T
	file string
}

func enableAudit(t *testing.T, env *Env) *auditLog {
	t.Helper()
	file := filepath.Join(t.TempDir(), "audit.log")
	if err := env.Vault.Client.Sys().EnableAuditWithOptions("file", &vaultapi.EnableAuditOptions{
		Type: "file", Options: map[string]string{"file_path": file},
	}); err != nil {
		t.Fatal(err)
	}
	return &auditLog{t: t, file: file}
}

// writesBy lists "<operation> <path>" of the requests other than reads
// and lists made with a token carrying policy (the login itself aside).
func (a *auditLog) writesBy(policy string) []string {
	a.t.Helper()
	f, err := os.Open(a.file)
	if err != nil {
		a.t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Type string `json:"type"`
			Auth struct {
				Policies []string `json:"policies"`
			} `json:"auth"`
			Request struct {
				Operation string `json:"operation"`
				Path      string `json:"path"`
			} `json:"request"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Type != "request" {
			continue
		}
		if op := e.Request.Operation; op == "read" || op == "list" || strings.HasPrefix(e.Request.Path, "auth/") {
			continue
		}
		for _, p := range e.Auth.Policies {
			if p == policy {
				out = append(out, e.Request.Operation+" "+e.Request.Path)
			}
		}
	}
	return out
}

// controllerWrites are the writes made with the controller's token.
func (a *auditLog) controllerWrites() []string { return a.writesBy(VaultPolicy) }
