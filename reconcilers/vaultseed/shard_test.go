package vaultseed

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

func TestShardPredicates(t *testing.T) {
	inA := labels.SelectorFromSet(labels.Set{ohmlabv1alpha1.ShardLabel: "a"})
	obj := func(shard string) *ohmlabv1alpha1.VaultSeed {
		o := &ohmlabv1alpha1.VaultSeed{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}
		if shard != "" {
			o.Labels = map[string]string{ohmlabv1alpha1.ShardLabel: shard}
		}
		return o
	}
	tests := []struct {
		name              string
		old, new          string
		wantMine, wantMov bool
	}{
		{name: "stays in the shard", old: "a", new: "a", wantMine: true},
		{name: "joins the shard", old: "b", new: "a", wantMine: true, wantMov: true},
		{name: "leaves the shard", old: "a", new: "", wantMine: true, wantMov: true},
		{name: "another shard's", old: "b", new: "b"},
	}
	r := &Reconciler{Selector: inA}
	mine, moved := r.shardPredicates()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := event.UpdateEvent{ObjectOld: obj(tt.old), ObjectNew: obj(tt.new)}
			if got := mine.Update(e); got != tt.wantMine {
				t.Errorf("mine = %v, want %v", got, tt.wantMine)
			}
			if got := moved.Update(e); got != tt.wantMov {
				t.Errorf("moved = %v, want %v", got, tt.wantMov)
			}
		})
	}
	// The process an object left marks it ShardChanged: the update passes
	// in the shard the object joined, once, and nowhere else.
	handed := func(shard, reason string) *ohmlabv1alpha1.VaultSeed {
		o := obj(shard)
		o.Status.Conditions = []metav1.Condition{{Type: ohmlabv1alpha1.ConditionReady, Status: metav1.ConditionUnknown, Reason: reason}}
		return o
	}
	for _, tt := range []struct {
		name     string
		old, new *ohmlabv1alpha1.VaultSeed
		want     bool
	}{
		{name: "marked ShardChanged, in the shard", old: handed("a", ohmlabv1alpha1.ReasonReconciled), new: handed("a", ohmlabv1alpha1.ReasonShardChanged), want: true},
		{name: "already ShardChanged", old: handed("a", ohmlabv1alpha1.ReasonShardChanged), new: handed("a", ohmlabv1alpha1.ReasonShardChanged)},
		{name: "marked ShardChanged, another shard's", old: handed("b", ohmlabv1alpha1.ReasonReconciled), new: handed("b", ohmlabv1alpha1.ReasonShardChanged)},
		{name: "another status change", old: handed("a", ohmlabv1alpha1.ReasonShardChanged), new: handed("a", ohmlabv1alpha1.ReasonReconciled)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := moved.Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}); got != tt.want {
				t.Errorf("moved = %v, want %v", got, tt.want)
			}
		})
	}
	if mine.Create(event.CreateEvent{Object: obj("b")}) || !mine.Create(event.CreateEvent{Object: obj("a")}) {
		t.Error("a create passes only for the shard's objects")
	}
	if moved.Create(event.CreateEvent{Object: obj("a")}) {
		t.Error("moved passes only updates")
	}
	if !(&Reconciler{}).owns(obj("b")) {
		t.Error("a reconciler without a selector owns every object")
	}
}

func TestShardChangedMessage(t *testing.T) {
	tests := []struct {
		name     string
		shard    string
		labelled bool
		want     string
	}{
		{name: "to a shard", shard: "b", labelled: true,
			want: "labelled ohmlab.fr/shard=b: the process of shard b reconciles it now; until it does, this status is not kept up to date"},
		{name: "to the process without a shard",
			want: "no longer labelled ohmlab.fr/shard: the process without a shard reconciles it now; until it does, this status is not kept up to date"},
		{name: "an empty label", labelled: true,
			want: "labelled ohmlab.fr/shard with an empty value: no process reconciles it (remove the label or name a shard of targets.vault.shards); this status is not kept up to date"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shardChangedMessage(tt.shard, tt.labelled); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// shardOf is the selector of a shard's process.
func shardOf(shard string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{ohmlabv1alpha1.ShardLabel: shard})
}

// TestShardChangedWhenLeaving: the process of shard a (its cache unfiltered
// here, as the process that serves the webhook) marks an object it
// reconciled ShardChanged when its label moves it away, naming where, and
// changes nothing else in its status.
func TestShardChangedWhenLeaving(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{name: "to a shard nobody runs", labels: map[string]string{ohmlabv1alpha1.ShardLabel: "nobody"}, want: shardChangedMessage("nobody", true)},
		{name: "to the process without a shard", want: shardChangedMessage("", false)},
	}
	f := startController(t, controllerOptions{selector: shardOf("a")})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			name := "leaves-" + map[bool]string{true: "labelled", false: "unlabelled"}[tt.labels != nil]
			s := f.seed(name, f.path(name), `{"password":"<random:16>"}`)
			s.Labels = map[string]string{ohmlabv1alpha1.ShardLabel: "a"}
			f.create(s)
			before := f.waitReady(name)
			f.update(name, func(s *ohmlabv1alpha1.VaultSeed) { s.Labels = tt.labels })
			after := f.waitReason(name, ohmlabv1alpha1.ReasonShardChanged, 10*time.Second)
			for _, typ := range []string{ohmlabv1alpha1.ConditionReady, ohmlabv1alpha1.ConditionReconciling} {
				c := apimeta.FindStatusCondition(after.Status.Conditions, typ)
				g.Expect(c).NotTo(BeNil(), typ)
				g.Expect(*c).To(And(
					HaveField("Status", map[string]metav1.ConditionStatus{ohmlabv1alpha1.ConditionReady: metav1.ConditionUnknown, ohmlabv1alpha1.ConditionReconciling: metav1.ConditionTrue}[typ]),
					HaveField("Reason", ohmlabv1alpha1.ReasonShardChanged),
					HaveField("Message", tt.want),
				), typ)
			}
			g.Expect(after.Status.Conditions).To(HaveLen(2))
			g.Expect(after.Status.ManagedKeys).To(Equal(before.Status.ManagedKeys))
			g.Expect(after.Status.ObservedGeneration).To(Equal(before.Status.ObservedGeneration))
			g.Expect(after.Finalizers).To(Equal(before.Finalizers))
			// It forgets the object right after the status write.
			g.Eventually(func() bool {
				_, served := f.gaugeValue("ohmlab_object_ready", map[string]string{"name": name})
				return served
			}, 5*time.Second, 10*time.Millisecond).Should(BeFalse(), "the process forgets the object")
		})
	}
}

// TestShardChangedWhenJoining: the process of shard b takes an object Ready
// under shard a, whose first reconcile here waits for its resync phase (an
// hour); when the process it left then marks it ShardChanged, shard b
// reconciles it at once and writes its own Ready status over it.
func TestShardChangedWhenJoining(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := startController(t, controllerOptions{selector: shardOf("b")})
	s := f.seed("joins", f.path("joins"), `{"password":"<random:16>"}`)
	s.Labels = map[string]string{ohmlabv1alpha1.ShardLabel: "a"}
	f.create(s)
	// Ready under shard a (written here as its process would have).
	s = f.get("joins")
	ready := metav1.Condition{Type: ohmlabv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ohmlabv1alpha1.ReasonReconciled,
		Message: "the path holds what is declared (KV version 1)", ObservedGeneration: s.Generation, LastTransitionTime: metav1.Now()}
	s.Status.ObservedGeneration = s.Generation
	s.Status.Conditions = []metav1.Condition{ready}
	g.Expect(cp.Client.Status().Update(ctx, s)).To(Succeed())
	f.update("joins", func(s *ohmlabv1alpha1.VaultSeed) { s.Labels[ohmlabv1alpha1.ShardLabel] = "b" })
	// Shard b took it and deferred its reconcile: its Ready series comes from the status.
	g.Eventually(func() bool {
		_, ok := f.gaugeValue("ohmlab_object_ready", map[string]string{"name": "joins"})
		return ok
	}).WithTimeout(10 * time.Second).Should(BeTrue())
	g.Expect(f.kv.Counts()).To(BeEmpty(), "the first reconcile waits for its phase: no Vault request")
	// Then the process it left writes ShardChanged.
	s = f.get("joins")
	moved := s.DeepCopy()
	msg := shardChangedMessage("b", true)
	apimeta.SetStatusCondition(&moved.Status.Conditions, metav1.Condition{Type: ohmlabv1alpha1.ConditionReady, Status: metav1.ConditionUnknown, Reason: ohmlabv1alpha1.ReasonShardChanged, Message: msg, ObservedGeneration: s.Generation})
	apimeta.SetStatusCondition(&moved.Status.Conditions, metav1.Condition{Type: ohmlabv1alpha1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: ohmlabv1alpha1.ReasonShardChanged, Message: msg, ObservedGeneration: s.Generation})
	g.Expect(cp.Client.Status().Update(ctx, moved)).To(Succeed())
	after := f.waitReady("joins")
	g.Expect(apimeta.FindStatusCondition(after.Status.Conditions, ohmlabv1alpha1.ConditionReconciling)).To(BeNil())
}
