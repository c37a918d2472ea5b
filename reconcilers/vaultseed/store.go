package vaultseed

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// store is what this process knows of each object beyond the cache, one
// small entry per object in one map (docs/DESIGN.md, "Per-object memory"):
// facts (reconciled, asked for), its last writes of the object that the
// cache may not show yet, and the managed keys of a Vault write that status
// does not record yet. The zero value is empty and ready to use; safe for
// concurrent use.
type store struct {
	mu      sync.Mutex
	objects map[types.NamespacedName]entry
}

type entry struct {
	facts fact
	// last is this process's last writes of the object (status, finalizer),
	// until the cache shows them.
	last *lastWrite
	// unreported is a Vault write that the status write after it failed to
	// record: the next status write carries it.
	unreported *unreported
}

// fact is a set of things true of an object.
type fact uint8

const (
	// factSeen: reconciled, or asked for (a dependent's source written),
	// since the start.
	factSeen fact = 1 << iota
	// factAttempted: reconciled at least once by this process.
	factAttempted
	// factWaitUnreported: a wait of the object was left unreported while
	// its source's object was yet to be reconciled (sourcesComing).
	factWaitUnreported
)

// unreported is what a reconcile wrote to Vault but could not record in
// status; an object of another UID (deleted and created again under the
// name) is another object, to which it does not belong.
type unreported struct {
	uid         types.UID
	managedKeys []ohmlabv1alpha1.ManagedKey
}

// lastWrite holds only the parts of the object that the writes change, so
// an entry costs a status, not an object, until the cache holds the write.
// The writes are locked on the resourceVersion they read, so each one
// directly follows the copy it was based on: a cached copy at one of those
// resourceVersions is older than the last write, and any other one is the
// write itself or newer (the cache never goes back), maybe written by
// another process.
type lastWrite struct {
	uid types.UID
	// before are the resourceVersions the writes were based on, oldest
	// first: the copies older than resourceVersion.
	before          []string
	resourceVersion string
	finalizers      []string
	status          ohmlabv1alpha1.VaultSeedStatus
}

// update runs f on key's entry under the lock, dropping an entry left
// empty.
func (s *store) update(key types.NamespacedName, f func(e *entry)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objects == nil {
		s.objects = map[types.NamespacedName]entry{}
	}
	e := s.objects[key]
	f(&e)
	if e == (entry{}) {
		delete(s.objects, key)
		return
	}
	s.objects[key] = e
}

// add records f of key and reports whether it was already recorded.
func (s *store) add(key types.NamespacedName, f fact) (had bool) {
	s.update(key, func(e *entry) {
		had = e.facts&f != 0
		e.facts |= f
	})
	return had
}

// has reports whether f is recorded of key.
func (s *store) has(key types.NamespacedName, f fact) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[key].facts&f != 0
}

// forget drops everything known of key.
func (s *store) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, key)
}

// managed returns status.managedKeys of seed, or what a status write that
// failed since would have made of them.
func (s *store) managed(seed *ohmlabv1alpha1.VaultSeed) (keys []ohmlabv1alpha1.ManagedKey, pending bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.objects[client.ObjectKeyFromObject(seed)].unreported; u != nil && u.uid == seed.UID {
		return u.managedKeys, true
	}
	return seed.Status.ManagedKeys, false
}

// setUnreported records the managed keys of a write of seed that status
// does not record; nil keys forget them (status records them).
func (s *store) setUnreported(seed *ohmlabv1alpha1.VaultSeed, keys []ohmlabv1alpha1.ManagedKey, pending bool) {
	s.update(client.ObjectKeyFromObject(seed), func(e *entry) {
		e.unreported = nil
		if pending {
			e.unreported = &unreported{uid: seed.UID, managedKeys: keys}
		}
	})
}

// wrote records obj as a write based on the copy at resourceVersion base.
func (s *store) wrote(base string, obj *ohmlabv1alpha1.VaultSeed) {
	s.update(client.ObjectKeyFromObject(obj), func(e *entry) {
		var before []string
		if prev := e.last; prev != nil && prev.uid == obj.UID && prev.resourceVersion == base {
			before = prev.before
		}
		e.last = &lastWrite{
			uid:             obj.UID,
			before:          append(before, base),
			resourceVersion: obj.ResourceVersion,
			finalizers:      slices.Clone(obj.Finalizers),
			status:          *obj.Status.DeepCopy(),
		}
	})
}

// lastWrite returns the last writes of key, nil when none. A reconcile
// takes it before it reads the cached copy, and passes it to latest: the
// watch forgets a write only once the cache holds it or something newer
// (cached), so the copy read after is older than what was taken, or is the
// write itself or newer.
func (s *store) lastWrite(key types.NamespacedName) *lastWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[key].last
}

// latest brings seed, a cached copy read after lastWrite returned last, up
// to last when the copy is older, and forgets last when the copy is the
// write itself or newer (the watch's event of it came before the write was
// recorded, or the object is another one created under the name).
func (s *store) latest(seed *ohmlabv1alpha1.VaultSeed, last *lastWrite) {
	if last == nil {
		return
	}
	if last.uid != seed.UID || !slices.Contains(last.before, seed.ResourceVersion) {
		// Only this reconcile writes the object: what is remembered is
		// last, or nothing.
		s.update(client.ObjectKeyFromObject(seed), func(e *entry) { e.last = nil })
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
// reconcile, which for a quiet object is its resync. An object of another
// UID is another object (a late event of one deleted since): it says
// nothing of the write.
func (s *store) cached(obj client.Object) {
	s.update(client.ObjectKeyFromObject(obj), func(e *entry) {
		if last := e.last; last != nil && last.uid == obj.GetUID() && !slices.Contains(last.before, obj.GetResourceVersion()) {
			e.last = nil
		}
	})
}
