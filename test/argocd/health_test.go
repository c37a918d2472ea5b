// Package argocd runs the chart's Argo CD health script (charts/ohmlab-controller/argocd) with
// Argo CD's own code on the VaultSeed objects test/e2e records from the controller, and checks
// that kstatus (sigs.k8s.io/cli-utils) reads the same objects the same way.
//
// It is a module of its own: Argo CD's dependency graph stays out of the controller's go.mod.
package argocd_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/argoproj/argo-cd/gitops-engine/pkg/health"
	appv1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/argo-cd/v3/util/settings"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

// dir is the chart's Argo CD directory, laid out as Argo CD's
// resource_customizations/<group>/<kind>/: health.lua, health_test.yaml, testdata/.
var dir = filepath.Join("..", "..", "charts", "ohmlab-controller", "argocd")

// configKey is the argocd-cm key the chart's README tells users to set.
const configKey = "resource.customizations.health.ohmlab.fr_VaultSeed"

// healthTests is the format of Argo CD's health_test.yaml (util/lua's TestLuaHealthScript).
type healthTests struct {
	Tests []struct {
		HealthStatus health.HealthStatus `json:"healthStatus"`
		InputPath    string              `json:"inputPath"`
	} `json:"tests"`
}

// kstatusDisagreements are the fixtures on which kstatus and Argo CD read the object
// differently, and why; the chart's README ("Argo CD") lists them too. An entry on which
// they come to agree fails the test, so the list stays true.
var kstatusDisagreements = map[string]string{
	// Observe-only mode never writes: an object that would change the path stays
	// Ready=False ObserveOnly for good. kstatus reads any Ready=False as InProgress; Argo CD
	// must not wait forever for a sync that can never converge, so the script says Healthy.
	"testdata/observe-only-drifted.yaml": "observe-only drift: Healthy for Argo CD, InProgress for kstatus",
	// An object the controller has not seen has no status at all; kstatus has nothing to
	// read and falls back to Current, Argo CD waits for the controller.
	"testdata/never-reconciled.yaml": "no status yet: Progressing for Argo CD, Current for kstatus",
}

// overrides loads the script the way an Argo CD instance does: from the argocd-cm key, through
// Argo CD's settings manager.
func overrides(t *testing.T) map[string]appv1.ResourceOverride {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(dir, "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "argocd", Labels: map[string]string{"app.kubernetes.io/part-of": "argocd"}}
	}
	clientset := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: meta("argocd-cm"), Data: map[string]string{configKey: string(script)}},
		&corev1.Secret{ObjectMeta: meta("argocd-secret")},
	)
	mgr := settings.NewSettingsManager(context.Background(), clientset, "argocd")
	o, err := mgr.GetResourceOverrides()
	if err != nil {
		t.Fatal(err)
	}
	if o["ohmlab.fr/VaultSeed"].HealthLua == "" {
		t.Fatalf("argocd-cm key %s gives no health script for ohmlab.fr/VaultSeed", configKey)
	}
	return o
}

func loadTests(t *testing.T) healthTests {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests healthTests
	if err := yaml.UnmarshalStrict(raw, &tests); err != nil {
		t.Fatalf("health_test.yaml: %v", err)
	}
	return tests
}

func loadObject(t *testing.T, inputPath string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, inputPath))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", inputPath, err)
	}
	// As the API server's JSON reaches Argo CD and kstatus: integers stay int64.
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(js); err != nil {
		t.Fatalf("%s: %v", inputPath, err)
	}
	return obj
}

// TestHealthLua runs every case of health_test.yaml twice with Argo CD's code: as Argo CD's own
// test of resource_customizations does (util/lua VM: GetHealthScript, ExecuteHealthLua), and as
// the application controller does (gitops-engine's GetResourceHealth with the overrides of
// argocd-cm), which answers "Pending deletion" for an object being deleted before any script.
func TestHealthLua(t *testing.T) {
	o := overrides(t)
	tests := loadTests(t)
	seen := map[health.HealthStatusCode]bool{}
	for _, tc := range tests.Tests {
		t.Run(tc.InputPath, func(t *testing.T) {
			obj := loadObject(t, tc.InputPath)
			vm := lua.VM{ResourceOverrides: o, UseOpenLibs: true}
			script, _, err := vm.GetHealthScript(obj)
			if err != nil {
				t.Fatal(err)
			}
			got, err := vm.ExecuteHealthLua(obj, script)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tc.HealthStatus, got); diff != "" {
				t.Errorf("util/lua (-health_test.yaml +script):\n%s", diff)
			}
			seen[got.Status] = true

			want := &tc.HealthStatus
			if obj.GetDeletionTimestamp() != nil {
				want = &health.HealthStatus{Status: health.HealthStatusProgressing, Message: "Pending deletion"}
			}
			engine, err := health.GetResourceHealth(obj, lua.ResourceHealthOverrides(o))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, engine); diff != "" {
				t.Errorf("application controller (-want +got):\n%s", diff)
			}
		})
	}
	for _, s := range []health.HealthStatusCode{health.HealthStatusHealthy, health.HealthStatusProgressing, health.HealthStatusDegraded} {
		if !seen[s] {
			t.Errorf("no case of health_test.yaml is %s", s)
		}
	}
}

// TestEveryFixtureIsACase makes health_test.yaml cover exactly the recorded fixtures, so that a
// new state test/e2e records gets an expected health.
func TestEveryFixtureIsACase(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(dir, "testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var fixtures, cases []string
	for _, f := range files {
		fixtures = append(fixtures, "testdata/"+filepath.Base(f))
	}
	for _, tc := range loadTests(t).Tests {
		cases = append(cases, tc.InputPath)
	}
	sort.Strings(cases)
	if diff := cmp.Diff(fixtures, cases); diff != "" {
		t.Errorf("testdata/*.yaml (-) and the inputPath of health_test.yaml (+) differ: add a case for each recorded fixture:\n%s", diff)
	}
	if len(fixtures) < 12 {
		t.Errorf("only %d fixtures: run make fixtures", len(fixtures))
	}
}

// TestMessageNamesTheController checks that what Argo CD shows is the controller's own word:
// the reason and message of the condition of the current generation that decided.
func TestMessageNamesTheController(t *testing.T) {
	for _, tc := range loadTests(t).Tests {
		t.Run(tc.InputPath, func(t *testing.T) {
			obj := loadObject(t, tc.InputPath)
			c := deciding(obj)
			if c == nil {
				return
			}
			for _, part := range []string{c["reason"], c["message"]} {
				if !strings.Contains(tc.HealthStatus.Message, part) {
					t.Errorf("message %q does not contain %q of the %s condition", tc.HealthStatus.Message, part, c["type"])
				}
			}
		})
	}
}

// deciding returns the Stalled or Reconciling condition that is True, else Ready, if it
// describes the object's generation.
func deciding(obj *unstructured.Unstructured) map[string]string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	byType := map[string]map[string]string{}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		g, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		if g != obj.GetGeneration() {
			continue
		}
		s := map[string]string{}
		for _, k := range []string{"type", "status", "reason", "message"} {
			s[k], _ = m[k].(string)
		}
		byType[s["type"]] = s
	}
	for _, typ := range []string{"Stalled", "Reconciling"} {
		if c := byType[typ]; c != nil && c["status"] == "True" {
			return c
		}
	}
	return byType["Ready"]
}

// kstatusFor is the kstatus reading that matches each Argo CD health status.
var kstatusFor = map[health.HealthStatusCode][]status.Status{
	health.HealthStatusHealthy:     {status.CurrentStatus},
	health.HealthStatusDegraded:    {status.FailedStatus},
	health.HealthStatusProgressing: {status.InProgressStatus, status.TerminatingStatus},
}

// TestKstatusAgrees computes kstatus on every fixture and compares it with the health Argo CD's
// application controller gives the same object.
func TestKstatusAgrees(t *testing.T) {
	o := overrides(t)
	for _, tc := range loadTests(t).Tests {
		t.Run(tc.InputPath, func(t *testing.T) {
			obj := loadObject(t, tc.InputPath)
			argo, err := health.GetResourceHealth(obj, lua.ResourceHealthOverrides(o))
			if err != nil {
				t.Fatal(err)
			}
			ks, err := status.Compute(obj)
			if err != nil {
				t.Fatal(err)
			}
			agree := false
			for _, s := range kstatusFor[argo.Status] {
				agree = agree || ks.Status == s
			}
			why, known := kstatusDisagreements[tc.InputPath]
			switch {
			case !agree && !known:
				t.Errorf("Argo CD says %s (%s), kstatus says %s (%s)", argo.Status, argo.Message, ks.Status, ks.Message)
			case agree && known:
				t.Errorf("Argo CD (%s) and kstatus (%s) now agree: remove %q from kstatusDisagreements and from the chart's README", argo.Status, ks.Status, why)
			}
		})
	}
}
