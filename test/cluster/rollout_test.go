package cluster

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// rollingUpdate: a `helm upgrade` that changes a pod annotation replaces
// both replicas (one at a time: the Deployment's default surge of one, no
// unavailable pod), and every admission sent meanwhile is answered by the
// webhook.
func (e *env) rollingUpdate(t *testing.T) {
	ctx := t.Context()
	before, err := DeploymentPods(ctx, e.c, e.deployment(t))
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	for _, p := range before {
		old[p.Name] = true
	}
	probe := e.startAdmissionProbe(t)
	stopped := false
	defer func() {
		if !stopped {
			probe.Stop()
		}
	}()

	values := maps.Clone(e.values)
	values["podAnnotations"] = map[string]any{"ohmlab.fr/e2e-rollout": time.Now().UTC().Format(time.RFC3339Nano)}
	rel, err := e.helm.Upgrade(ctx, values)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm upgrade: release %s revision %d %s; rolling out", rel.Name, rel.Version, rel.Info.Status)
	rolledOut := RolledOut(e.c, client.ObjectKeyFromObject(e.dep), old)
	err = WaitFor(ctx, "the rollout to replace both pods", time.Second, 4*time.Minute, func(ctx context.Context) (bool, string, error) {
		_ = e.logs.Keep(ctx) // the old pods' logs, before they go
		return rolledOut(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped = true
	checkAdmissions(t, probe.Stop(), "the rollout")
}

// startAdmissionProbe starts an AdmissionProbe with a valid VaultSeed (the
// keycloak example on a path of its own) and the bad sample.
func (e *env) startAdmissionProbe(t *testing.T) *AdmissionProbe {
	t.Helper()
	valid, err := LoadSample(keycloakFile)
	if err != nil {
		t.Fatal(err)
	}
	valid.SetName("admission-probe")
	if err := unstructured.SetNestedField(valid.Object, "ohmlab/platforms/production/core/admission-probe", "spec", "path"); err != nil {
		t.Fatal(err)
	}
	bad, err := LoadSample(brokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return StartAdmissionProbe(e.c, valid, bad, brokenRefusal, 250*time.Millisecond)
}

// checkAdmissions fails the test unless every admission a probe sent
// during what was answered, and there were enough to cover it.
func checkAdmissions(t *testing.T, counts AdmissionCounts, during string) {
	t.Helper()
	t.Logf("%d admission rounds (a valid and a bad VaultSeed each) during %s, %d failures", counts.Rounds, during, len(counts.Failures))
	if len(counts.Failures) > 0 {
		t.Errorf("admissions not answered by the webhook during %s:\n%s", during, strings.Join(counts.Failures, "\n"))
	}
	// A pod becomes Ready no sooner than its probe's initialDelaySeconds (5 s) and stops after
	// its preStop sleep (5 s): a handful of rounds means the probe did not cover the change.
	if counts.Rounds < 8 {
		t.Errorf("only %d admission rounds during %s: the probe did not cover it", counts.Rounds, during)
	}
}

// drain: evictions, as `kubectl drain` sends them, take the pods one at
// a time (the PodDisruptionBudget refuses the second while the first is
// replaced), and every admission sent meanwhile is answered.
func (e *env) drain(t *testing.T) {
	ctx := t.Context()
	key := client.ObjectKeyFromObject(e.dep)
	if err := WaitFor(ctx, "both replicas Ready", time.Second, 2*time.Minute, RolledOut(e.c, key, nil)); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{}
	err := WaitFor(ctx, "PodDisruptionBudget "+e.dep.Name+" to allow one disruption of two healthy pods", time.Second, time.Minute,
		func(ctx context.Context) (bool, string, error) {
			if err := e.c.Client.Get(ctx, key, pdb); err != nil {
				return false, err.Error(), nil
			}
			st := pdb.Status
			return st.ExpectedPods == 2 && st.CurrentHealthy == 2 && st.DisruptionsAllowed == 1,
				fmt.Sprintf("expected %d, healthy %d, disruptions allowed %d", st.ExpectedPods, st.CurrentHealthy, st.DisruptionsAllowed), nil
		})
	if err != nil {
		t.Fatal(err)
	}

	pods, err := DeploymentPods(ctx, e.c, e.deployment(t))
	if err != nil {
		t.Fatal(err)
	}
	first, second := pods[0].Name, pods[1].Name
	probe := e.startAdmissionProbe(t)
	stopped := false
	defer func() {
		if !stopped {
			probe.Stop()
		}
	}()
	evict := func(ctx context.Context, pod string) error {
		return e.c.Clientset.PolicyV1().Evictions(Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: pod}})
	}
	_ = e.logs.Keep(ctx)
	if err := evict(ctx, first); err != nil {
		t.Fatalf("evicting %s with both replicas Ready: %v", first, err)
	}
	if err := evict(ctx, second); !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "disruption budget") {
		t.Fatalf("evicting %s while %s goes: got %v, want the PodDisruptionBudget's refusal (429)", second, first, err)
	}
	wait := func(what string, gone map[string]bool) {
		t.Helper()
		rolled := RolledOut(e.c, key, gone)
		if err := WaitFor(ctx, what, time.Second, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
			_ = e.logs.Keep(ctx)
			return rolled(ctx)
		}); err != nil {
			t.Fatal(err)
		}
	}
	wait("the replacement of "+first+" Ready", map[string]bool{first: true})
	// Allowed again once the disruption controller counts the replacement healthy.
	if err := WaitFor(ctx, "the eviction of "+second+" to be allowed", 500*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := evict(ctx, second); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	}); err != nil {
		t.Fatal(err)
	}
	wait("the replacement of "+second+" Ready", map[string]bool{first: true, second: true})
	stopped = true
	checkAdmissions(t, probe.Stop(), "the drain")
}
