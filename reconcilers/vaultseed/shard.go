package vaultseed

import (
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// owns says whether the object belongs to this process's shard (issue 13,
// "Scale past one process"). A nil Selector owns every object.
func (r *Reconciler) owns(o client.Object) bool {
	return r.Selector == nil || r.Selector.Matches(labels.Set(o.GetLabels()))
}

// shardPredicates are the predicates of the watch of the process's own
// objects: an event passes when the object belongs to the shard before or
// after it (an object that leaves the shard is reconciled once more, to be
// forgotten), and a label change that moves an object in or out of the
// shard passes even when the generation does not change. With a cache
// filtered by the shard's selector, the API server already turns an object
// leaving the shard into a delete event and one joining it into a create.
func (r *Reconciler) shardPredicates() (mine, moved predicate.Predicate) {
	mine = predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return r.owns(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return r.owns(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return r.owns(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return r.owns(e.ObjectOld) || r.owns(e.ObjectNew) },
	}
	moved = predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return r.owns(e.ObjectOld) != r.owns(e.ObjectNew) },
	}
	return mine, moved
}
