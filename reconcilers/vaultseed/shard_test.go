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
