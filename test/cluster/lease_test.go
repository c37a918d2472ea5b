package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// handoverMargin is added to the lease duration for a change made while
// the leader goes away to be in Vault: the new leader's retry period,
// one reconcile (a bcrypt hash), the watch, on a loaded machine.
const handoverMargin = 15 * time.Second

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

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
