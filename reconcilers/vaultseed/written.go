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
// an entry costs a status, not an object, until the cache holds the write.
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

// get returns what is remembered of key, nil when nothing. A reconcile
// takes it before it reads the cached copy, and passes it to latest: the
// watch forgets a write only once the cache holds it or something newer
// (cached), so the copy read after is older than what was taken, or is the
// write itself or newer.
func (w *lastWrites) get(key types.NamespacedName) *lastWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.objects[key]
	if !ok {
		return nil
	}
	return &last
}

// latest brings seed, a cached copy read after get returned last, up to
// last when the copy is older, and forgets last when the copy is the write
// itself or newer (the watch's event of it came before the write was
// recorded, or the object is another one created under the name).
func (w *lastWrites) latest(seed *ohmlabv1alpha1.VaultSeed, last *lastWrite) {
	if last == nil {
		return
	}
	if last.uid != seed.UID || !slices.Contains(last.before, seed.ResourceVersion) {
		// Only this reconcile writes the object: what is remembered is
		// last, or nothing.
		w.forget(client.ObjectKeyFromObject(seed))
		return
	}
	seed.ResourceVersion = last.resourceVersion
	seed.Finalizers = slices.Clone(last.finalizers)
	seed.Status = *last.status.DeepCopy()
}

// cached forgets the write of obj's object once the cache holds obj and obj
// is the write itself or newer. The controller's watch calls it with each
// object the cache holds after a change (SetupWithManager), so a write is
// forgotten a few milliseconds after it rather than at the object's next
// reconcile, which for a quiet object is its resync (issue 25, item 4).
// An object of another UID is another object (a late event of one deleted
// since): it says nothing of the write.
func (w *lastWrites) cached(obj client.Object) {
	key := client.ObjectKeyFromObject(obj)
	w.mu.Lock()
	defer w.mu.Unlock()
	if last, ok := w.objects[key]; ok && last.uid == obj.GetUID() && !slices.Contains(last.before, obj.GetResourceVersion()) {
		delete(w.objects, key)
	}
}

// forget drops what is remembered of key.
func (w *lastWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.objects, key)
}
