package templating

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"sync"
	"sync/atomic"
)

// Slot is where a bcrypt hash lives: the object (its owner marker,
// "namespace/name") and the dotted key path of the hash.
type Slot struct {
	Object, Key string
}

// HashCache remembers, for each [Slot] it serves, the last (bcrypt hash,
// source) pair that bcrypt verified there or that this process generated
// there, so that a resync does not pay bcrypt's cost again for an unchanged
// pair (product document, "Quiet resyncs"). It holds one entry
// per slot, so its size follows the objects it serves rather than a fixed
// bound: there is no size above which every resync pays bcrypt again.
// [HashCache.Forget] drops the slots of a deleted object. An entry is an
// HMAC-SHA256 digest of the pair under a random key drawn when the cache is
// made, never the hash or the source. Safe for concurrent use. Make it with
// [NewHashCache]; a nil *HashCache caches nothing.
type HashCache struct {
	key []byte // nil: the cache is disabled and every lookup runs bcrypt

	mu sync.Mutex
	// objects holds each object's slots in a slice rather than a map: an
	// object has a few hashes, and a map per object cost three times the
	// memory (docs/maintainers/performance.md, "Memory").
	objects map[string][]slotDigest
	slots   int

	// compares counts the bcrypt compares the cache did not spare.
	compares atomic.Uint64
}

type slotDigest struct {
	key    string
	digest [sha256.Size]byte
}

// NewHashCache returns an empty cache keyed by 32 bytes read from rand
// (crypto/rand.Reader in production). If rand fails, the cache is disabled:
// [HashCache.Matches] still answers, through bcrypt every time.
func NewHashCache(rand io.Reader) *HashCache {
	c := &HashCache{objects: make(map[string][]slotDigest)}
	key := make([]byte, 32)
	if _, err := io.ReadFull(rand, key); err == nil {
		c.key = key
	}
	return c
}

// Matches reports whether hash is a bcrypt hash of source: from the cache
// when the slot holds this very pair, else by bcrypt.CompareHashAndPassword,
// remembering the pair in the slot when it matches (so an unchanged pair is
// compared at most once in the life of the process). Mismatches are not
// remembered. A source over 72 bytes never matches.
func (c *HashCache) Matches(at Slot, hash, source string) bool {
	ok, _ := c.matches(context.Background(), at, hash, source, seat{})
	return ok
}

// matches is Matches with its bcrypt compare run in a slot of wait; ctx's
// error when ctx ends before a compare it needs starts.
func (c *HashCache) matches(ctx context.Context, at Slot, hash, source string, wait seat) (bool, error) {
	if c == nil {
		return bcryptMatches(ctx, hash, source, wait)
	}
	if c.key == nil {
		return c.compare(ctx, hash, source, wait)
	}
	d := c.digest(hash, source)
	c.mu.Lock()
	held := c.objects[at.Object]
	i := slotIndex(held, at.Key)
	ok := i >= 0 && held[i].digest == d
	c.mu.Unlock()
	if ok {
		return true, nil
	}
	if ok, err := c.compare(ctx, hash, source, wait); !ok || err != nil {
		return false, err
	}
	c.store(at, d)
	return true, nil
}

// compare is bcryptMatches, counted when bcrypt runs.
func (c *HashCache) compare(ctx context.Context, hash, source string, wait seat) (bool, error) {
	ok, err := bcryptMatches(ctx, hash, source, wait)
	if err == nil && len(source) <= MaxBcryptInput {
		c.compares.Add(1)
	}
	return ok, err
}

// Record remembers that hash was generated from source for the slot, so
// that the next [HashCache.Matches] of the pair costs no bcrypt. The caller
// vouches for the pair: record only what [Generator.Bcrypt] returned for
// source.
func (c *HashCache) Record(at Slot, hash, source string) {
	if c == nil || c.key == nil || len(source) > MaxBcryptInput {
		return
	}
	c.store(at, c.digest(hash, source))
}

// Forget drops every slot of object (a deleted object).
func (c *HashCache) Forget(object string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slots -= len(c.objects[object])
	delete(c.objects, object)
}

// Compares returns how many bcrypt compares the cache has run since it was
// made: those it could not answer from a slot. Each costs tens of
// milliseconds of a core, so this is what a restart's first resync pays.
func (c *HashCache) Compares() uint64 {
	if c == nil {
		return 0
	}
	return c.compares.Load()
}

// Len returns the number of slots the cache holds.
func (c *HashCache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slots
}

func (c *HashCache) store(at Slot, d [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := c.objects[at.Object]
	if i := slotIndex(held, at.Key); i >= 0 {
		held[i].digest = d
		return
	}
	c.objects[at.Object] = append(held, slotDigest{key: at.Key, digest: d})
	c.slots++
}

// slotIndex returns the index of key's slot in held, or -1.
func slotIndex(held []slotDigest, key string) int {
	for i := range held {
		if held[i].key == key {
			return i
		}
	}
	return -1
}

// digest is HMAC-SHA256(key, len(hash) || hash || source): the length
// prefix keeps ("ab", "c") and ("a", "bc") apart.
func (c *HashCache) digest(hash, source string) [sha256.Size]byte {
	m := hmac.New(sha256.New, c.key)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(hash)))
	m.Write(n[:])
	m.Write([]byte(hash))
	m.Write([]byte(source))
	var d [sha256.Size]byte
	m.Sum(d[:0])
	return d
}
