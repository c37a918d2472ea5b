package vaultseed

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// lastWrites remembers, per object, what this process's last writes of it
// (status, finalizer) made of it, until the cache shows them (issue 23,
// item 3): a reconcile that starts on a copy older than them (a dependent's
// wake-up or a requeue before the informer has seen the write) plans with
// what was written, never with the older status.managedKeys. The writes are
// locked on the resourceVersion they read, so each one directly follows the
// copy it was based on: a cached copy at one of those resourceVersions is
// older than the last write, and any other one is the write itself or
// newer (the cache never goes back), maybe written by another process.
// The zero value is empty and ready to use; safe for concurrent use.
type lastWrites struct {
	mu      sync.Mutex
	objects map[types.NamespacedName]lastWrite
}

// lastWrite holds only the parts of the object that the writes change, so
// an entry costs a status, not an object, until the next reconcile.
type lastWrite struct {
	uid types.UID
	// before are the resourceVersions the writes were based on, oldest
	// first: the copies older than resourceVersion.
	before          []string
	resourceVersion string
	finalizers      []string
	status          ohmlabv1alpha1.VaultSeedStatus
}

// wrote records obj as a write based on the copy at resourceVersion base
// returned it.
func (w *lastWrites) wrote(base string, obj *ohmlabv1alpha1.VaultSeed) {
	key := client.ObjectKeyFromObject(obj)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.objects == nil {
		w.objects = map[types.NamespacedName]lastWrite{}
	}
	var before []string
	if prev, ok := w.objects[key]; ok && prev.uid == obj.UID && prev.resourceVersion == base {
		before = prev.before
	}
	w.objects[key] = lastWrite{
		uid:             obj.UID,
		before:          append(before, base),
		resourceVersion: obj.ResourceVersion,
		finalizers:      slices.Clone(obj.Finalizers),
		status:          *obj.Status.DeepCopy(),
	}
}

// latest brings a cached copy up to this process's last write of the
// object when the copy is older, and forgets the write once the cache
// shows it or something newer.
func (w *lastWrites) latest(seed *ohmlabv1alpha1.VaultSeed) {
	key := client.ObjectKeyFromObject(seed)
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.objects[key]
	if !ok {
		return
	}
	if last.uid != seed.UID || !slices.Contains(last.before, seed.ResourceVersion) {
		delete(w.objects, key)
		return
	}
	seed.ResourceVersion = last.resourceVersion
	seed.Finalizers = slices.Clone(last.finalizers)
	seed.Status = *last.status.DeepCopy()
}

// forget drops what is remembered of key.
func (w *lastWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.objects, key)
}
