package vaultseed

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// known is what this process remembers of each object it has met since it
// started: one small entry per object in one map (at 10,000 objects, one
// sync.Map per fact cost several MiB; issue 13). The zero value is empty and
// ready to use; safe for concurrent use.
type known struct {
	mu      sync.Mutex
	objects map[types.NamespacedName]fact
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

// add records f of key and reports whether it was already recorded.
func (k *known) add(key types.NamespacedName, f fact) (had bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.objects == nil {
		k.objects = map[types.NamespacedName]fact{}
	}
	had = k.objects[key]&f != 0
	k.objects[key] |= f
	return had
}

// has reports whether f is recorded of key.
func (k *known) has(key types.NamespacedName, f fact) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.objects[key]&f != 0
}

// forget drops everything recorded of key.
func (k *known) forget(key types.NamespacedName) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.objects, key)
}
