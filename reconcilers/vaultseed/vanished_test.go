package vaultseed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// deleteWithMetadata deletes a path and all its versions, as `vault kv
// metadata delete` does, or as a Vault restored from a snapshot taken
// before the path was written lacks it.
func deleteWithMetadata(t testing.TB, path string) {
	t.Helper()
	mount, rest, _ := strings.Cut(path, "/")
	if err := vault.Client.KVv2(mount).DeleteMetadata(context.Background(), rest); err != nil {
		t.Fatalf("deleting %s: %v", path, err)
	}
}

// pathGone says whether Vault has nothing at path, not even metadata: no
// write and no owner marker reached it.
func pathGone(t testing.TB, path string) bool {
	t.Helper()
	mount, rest, _ := strings.Cut(path, "/")
	_, err := vault.Client.KVv2(mount).GetMetadata(context.Background(), rest)
	if err != nil && !errors.Is(err, vaultapi.ErrSecretNotFound) {
		t.Fatalf("reading the metadata of %s: %v", path, err)
	}
	return err != nil
}

// askReconcile sets ohmlab.fr/reconcile-requested-at to value on the
// object, as `kubectl annotate` does, and waits until a reconcile handled
// it (status.lastHandledReconcileAt).
func (f *fixture) askReconcile(name, value string) *ohmlabv1alpha1.VaultSeed {
	f.t.Helper()
	f.update(name, func(o *ohmlabv1alpha1.VaultSeed) {
		metav1.SetMetaDataAnnotation(&o.ObjectMeta, ohmlabv1alpha1.ReconcileRequestAnnotation, value)
	})
	var obj *ohmlabv1alpha1.VaultSeed
	NewWithT(f.t).Eventually(func() string {
		obj = f.get(name)
		return obj.Status.LastHandledReconcileAt
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Equal(value), "reconcile of %s", name)
	return obj
}

// stop stops the fixture's manager and waits until it has stopped.
func (f *fixture) stop() {
	f.cancel()
	<-f.done
}

// TestBrakeOnVanishedPaths: of 30 paths the controller wrote, one deleted
// alone is created anew at once; 20 deleted at once (a Vault restored from
// an older snapshot) are not: the objects report Stalled VaultDataLoss with
// a Warning event, the metrics say so, nothing reaches Vault, and a restart
// does not change that; a restart with targets.vault.brake.releasedAt
// creates them anew.
func TestBrakeOnVanishedPaths(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{concurrency: 4})
	const n, lost = 30, 20
	name := func(i int) string { return fmt.Sprintf("p%02d", i) }
	for i := range n {
		f.create(f.seed(name(i), f.path(name(i)), `{"password": "<random:24>"}`))
	}
	before := map[int]any{}
	for i := range n {
		f.waitReady(name(i))
		before[i] = readPath(t, f.path(name(i))).Data["password"]
	}

	// One path deleted alone: created anew, with a new value.
	deleteWithMetadata(t, f.path(name(0)))
	obj := f.askReconcile(name(0), "alone")
	g.Expect(apimeta.FindStatusCondition(obj.Status.Conditions, ohmlabv1alpha1.ConditionReady).Reason).To(Equal(ohmlabv1alpha1.ReasonReconciled))
	again := readPath(t, f.path(name(0)))
	g.Expect(again.Version).To(Equal(1))
	g.Expect(again.Data["password"] != before[0]).To(BeTrue(), "the path deleted alone holds its old password")

	// Twenty deleted at once, among them the one created anew.
	for i := range lost {
		deleteWithMetadata(t, f.path(name(i)))
	}
	for i := range lost {
		f.askReconcile(name(i), "lost")
	}
	f.expectBraked(t, name, lost, n)
	g.Expect(f.events(name(lost - 1))).To(ContainElement(HavePrefix("Warning VaultDataLoss: the path is missing from Vault although this object wrote it (its status records the write); 20 of the 30 paths this target's objects wrote are missing within one resync period (the brake holds at 5 or more and above 50%)")))
	g.Expect(f.brakeGauges()).To(Equal([2]float64{lost, 1}), "ohmlab_vanished_paths, ohmlab_vanished_brake_holds")

	// A restarted process knows nothing of it, and holds all the same.
	f.stop()
	f = startController(t, controllerOptions{namespace: f.ns, concurrency: 4})
	for i := range lost {
		f.askReconcile(name(i), "after a restart")
	}
	f.expectBraked(t, name, lost, n)

	// Released: a person accepts the loss; the process restarts with it.
	f.stop()
	f = startController(t, controllerOptions{namespace: f.ns, concurrency: 4, brake: Brake{ReleasedAt: time.Now()}})
	for i := range lost {
		f.waitReady(name(i))
		p := readPath(t, f.path(name(i)))
		g.Expect(p.Version).To(Equal(1), "version of %s", name(i))
		g.Expect(p.Data["password"] != before[i]).To(BeTrue(), "%s holds its old password", name(i))
	}
	for i := lost; i < n; i++ {
		g.Expect(readPath(t, f.path(name(i))).Version).To(Equal(1), "version of %s", name(i))
	}
	g.Eventually(f.brakeGauges).Should(Equal([2]float64{0, 0}), "ohmlab_vanished_paths, ohmlab_vanished_brake_holds")
	emitted := f.emitted()
	for i := range n {
		for _, v := range []any{before[i], readPath(t, f.path(name(i))).Data["password"]} {
			if s, _ := v.(string); s == "" || strings.Contains(emitted, s) {
				t.Errorf("the password of %s is empty or in logs, events, status or metrics", name(i))
			}
		}
	}
}

// brakeGauges are the values of ohmlab_vanished_paths and
// ohmlab_vanished_brake_holds of the target.
func (f *fixture) brakeGauges() [2]float64 {
	f.t.Helper()
	var out [2]float64
	for i, family := range []string{"ohmlab_vanished_paths", "ohmlab_vanished_brake_holds"} {
		v, ok := f.gaugeValue(family, map[string]string{"target": "vault"})
		if !ok {
			f.t.Errorf("no series of %s", family)
		}
		out[i] = v
	}
	return out
}

// expectBraked checks that the first lost objects are Stalled VaultDataLoss,
// keep the records of their status, and that nothing reached their paths;
// and that the others' paths are as they were (version 1).
func (f *fixture) expectBraked(t *testing.T, name func(int) string, lost, n int) {
	t.Helper()
	g := NewWithT(t)
	for i := range lost {
		obj := f.waitReason(name(i), ohmlabv1alpha1.ReasonVaultDataLoss, 30*time.Second)
		g.Expect(apimeta.IsStatusConditionTrue(obj.Status.Conditions, ohmlabv1alpha1.ConditionStalled)).To(BeTrue(), "Stalled of %s", name(i))
		g.Expect(obj.Status.Version).To(BeEquivalentTo(1), "status.version of %s", name(i))
		g.Expect(obj.Status.ManagedKeys).To(HaveLen(1), "status.managedKeys of %s", name(i))
		g.Expect(pathGone(t, f.path(name(i)))).To(BeTrue(), "%s was written", f.path(name(i)))
	}
	for i := lost; i < n; i++ {
		g.Expect(readPath(t, f.path(name(i))).Version).To(Equal(1), "version of %s", name(i))
	}
}
