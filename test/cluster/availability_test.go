package cluster

import (
	"context"
	"encoding/pem"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// handoverMargin is added to the lease duration for a change made while
// the leader goes away to be in Vault: the new leader's retry period,
// one reconcile (a bcrypt hash), the watch, on a loaded machine.
const handoverMargin = 15 * time.Second

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

// leaseHandover: after `kubectl delete pod` of the Lease holder, another
// replica takes the Lease, and a change made then to the keycloak example
// is in Vault, within the lease duration plus handoverMargin of the
// delete.
func (e *env) leaseHandover(t *testing.T) {
	ctx := t.Context()
	pods, err := DeploymentPods(ctx, e.c, e.deployment(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) == 0 {
		t.Fatalf("Deployment %s has no pods", e.dep.Name)
	}
	cfg, err := PodConfig(ctx, e.c, &pods[0]) // the Lease's namespace and duration
	if err != nil {
		t.Fatal(err)
	}
	leaseNS := cfg.LeaderElection.Namespace
	if leaseNS == "" {
		leaseNS = Namespace
	}
	holder := func(ctx context.Context) (string, *coordinationv1.Lease, error) {
		lease := &coordinationv1.Lease{}
		if err := e.c.Client.Get(ctx, client.ObjectKey{Namespace: leaseNS, Name: LeaseName}, lease); err != nil {
			return "", nil, err
		}
		// controller-runtime's identity is <hostname>_<uuid>; a pod's hostname is its name.
		pod, _, _ := strings.Cut(deref(lease.Spec.HolderIdentity), "_")
		return pod, lease, nil
	}
	// The rollout's last old pod released the Lease as it stopped: wait
	// until one of the two current replicas holds it.
	var leader, other string
	what := fmt.Sprintf("Lease %s/%s held by one of the two Ready replicas, the other one Ready", leaseNS, LeaseName)
	err = WaitFor(ctx, what, 250*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		h, lease, err := holder(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		pods, err := DeploymentPods(ctx, e.c, e.deployment(t))
		if err != nil {
			return false, err.Error(), nil
		}
		seen := fmt.Sprintf("held by %q; pods: %s", deref(lease.Spec.HolderIdentity), DescribePods(pods))
		ready := map[string]bool{}
		for i := range pods {
			ready[pods[i].Name] = PodReady(&pods[i])
		}
		if len(pods) != 2 || !ready[h] {
			return false, seen, nil
		}
		for name, ok := range ready {
			if name != h && ok {
				leader, other = h, name
				return true, seen, nil
			}
		}
		return false, seen, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.logs.Keep(ctx)

	// Both waits count from the delete. The deleted pod's preStop sleep
	// delays its SIGTERM, and so the release of its Lease: within the margin.
	budget := cfg.LeaderElection.LeaseDuration.Duration + handoverMargin
	start := time.Now()
	if out, err := e.c.Kubectl(ctx, "-n", Namespace, "delete", "pod", leader, "--wait=false"); err != nil {
		t.Fatalf("kubectl delete pod %s: %v\n%s", leader, err, out)
	}
	var now string
	what = fmt.Sprintf("Lease %s to move from the deleted %s to a running replica", LeaseName, leader)
	err = WaitFor(ctx, what, 250*time.Millisecond, budget, func(ctx context.Context) (bool, string, error) {
		_ = e.logs.Keep(ctx) // what the deleted pod logs until it goes
		h, lease, err := holder(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		after, err := DeploymentPods(ctx, e.c, e.deployment(t))
		if err != nil {
			return false, err.Error(), nil
		}
		seen := fmt.Sprintf("held by %q; pods: %s", deref(lease.Spec.HolderIdentity), DescribePods(after))
		for _, p := range after {
			if h != leader && p.Name == h && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				now = h
				return true, seen, nil
			}
		}
		return false, seen, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	moved := time.Since(start)

	// A change made now can only be the new leader's to reconcile.
	const key = "clients.e2e-handover.clientSecret"
	patch := []byte(`{"spec":{"data":{"clients":{"e2e-handover":{"clientSecret":"<random:24>"}}}}}`)
	seed := &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: SeedNamespace, Name: keycloakName}}
	if err := e.c.Client.Patch(ctx, seed, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("changing VaultSeed %s after the handover: %v", keycloakName, err)
	}
	ready := SeedReady(e.c, SeedNamespace, keycloakName)
	what = fmt.Sprintf("generation %d of %s (new key %s) reconciled into Vault by %s, within the lease duration %s + %s of the delete",
		seed.Generation, keycloakName, key, now, cfg.LeaderElection.LeaseDuration.Duration, handoverMargin)
	err = WaitFor(ctx, what, 250*time.Millisecond, budget-time.Since(start), func(ctx context.Context) (bool, string, error) {
		done, seen, err := ready(ctx)
		if !done || err != nil {
			return done, seen, err
		}
		flat, err := e.vault.ReadPath(ctx, keycloakPath)
		if err != nil {
			return false, err.Error(), nil
		}
		if _, ok := flat[key]; !ok {
			return false, fmt.Sprintf("Ready, but %s has keys %v", keycloakPath, Keys(flat)), nil
		}
		e.secrets = append(e.secrets, Secret{What: keycloakPath + " " + key, Value: fmt.Sprint(flat[key])})
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The survivor and the replacement the ReplicaSet starts at once both
	// try for the released Lease: either may win.
	who := "the other replica"
	if now != other {
		who = "the replacement pod"
	}
	t.Logf("deleted the Lease holder %s: %s (%s) held the Lease %s after the delete, and the change made then was in Vault %s after it (lease duration %s)",
		leader, now, who, moved.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond), cfg.LeaderElection.LeaseDuration.Duration)
}

// noSecretInLogs: the logs of every controller pod of the run (the ones
// the rollout, the drain and the delete removed too) hold none of the generated
// values nor the webhook's private key.
func (e *env) noSecretInLogs(t *testing.T) {
	ctx := t.Context()
	if err := e.logs.Keep(ctx); err != nil {
		t.Fatal(err)
	}
	secrets := append([]Secret(nil), e.secrets...)
	tlsKey, err := e.webhookKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, tlsKey...)
	logs := e.logs.Logs()
	// Two pods at the install, two from the rollout, two from the drain, one replacing the deleted one.
	if len(logs) < 7 || len(secrets) < 5 {
		t.Fatalf("kept the logs of %d pods and %d secret values, want those of the whole run (7 pods, 5 values)", len(logs), len(secrets))
	}
	mentions := 0
	for pod, l := range logs {
		if strings.Contains(l, keycloakName) {
			mentions++
		}
		for _, s := range secrets {
			if strings.Contains(l, s.Value) {
				t.Errorf("pod %s logged a secret value: %s", pod, s.What)
			}
		}
	}
	// The control: the logs searched are those of the pods that handled the values.
	if mentions == 0 {
		t.Errorf("no pod's logs mention %s: the logs searched are not those of the reconciles", keycloakName)
	}
	size := 0
	for _, l := range logs {
		size += len(l)
	}
	t.Logf("searched the logs of %d pods (%d bytes, %d mention %s) for %d secret values", len(logs), size, mentions, keycloakName, len(secrets))
}

// webhookKey is the webhook's serving key, as lines of its PEM body.
func (e *env) webhookKey(ctx context.Context) ([]Secret, error) {
	var name string
	for _, v := range e.dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			name = v.Secret.SecretName
		}
	}
	s := &corev1.Secret{}
	if err := e.c.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, s); err != nil {
		return nil, fmt.Errorf("reading the webhook's Secret %q: %w", name, err)
	}
	block, _ := pem.Decode(s.Data["tls.key"])
	if block == nil {
		return nil, fmt.Errorf("Secret %s has no PEM tls.key", name)
	}
	var out []Secret
	for i, line := range strings.Split(strings.TrimSpace(string(pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes}))), "\n") {
		if !strings.HasPrefix(line, "-----") {
			out = append(out, Secret{What: fmt.Sprintf("the webhook's private key (Secret %s, line %d)", name, i), Value: line})
		}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
