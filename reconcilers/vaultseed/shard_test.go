package vaultseed

import (
	"testing"

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
