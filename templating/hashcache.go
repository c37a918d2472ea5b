package templating

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"sync"
)

// DefaultHashCacheEntries is the size of a [HashCache] created with
// maxEntries < 1.
const DefaultHashCacheEntries = 4096

// HashCache remembers (bcrypt hash, source) pairs that bcrypt verified, so
// that a resync does not pay bcrypt's cost again for an unchanged pair
// (product document, "Quiet resyncs"). It keeps only an HMAC-SHA256 digest of
// each pair under a random key drawn when the cache is made, never the hash
// or the source. It holds at most its size in entries and forgets the oldest
// first. Safe for concurrent use. Make it with [NewHashCache]; the zero
// value caches nothing.
type HashCache struct {
	key []byte // nil: the cache is disabled and every lookup runs bcrypt

	mu      sync.Mutex
	entries map[[sha256.Size]byte]struct{}
	order   [][sha256.Size]byte // ring of the entries, oldest at next
	next    int
}

// NewHashCache returns a cache of at most maxEntries pairs (about 100 bytes
// each), DefaultHashCacheEntries when maxEntries < 1, keyed by 32 bytes read
// from rand (crypto/rand.Reader in production). If rand fails, the cache is
// disabled: [HashCache.Matches] still answers, through bcrypt every time.
func NewHashCache(rand io.Reader, maxEntries int) *HashCache {
	if maxEntries < 1 {
		maxEntries = DefaultHashCacheEntries
	}
	c := &HashCache{
		entries: make(map[[sha256.Size]byte]struct{}),
		order:   make([][sha256.Size]byte, 0, maxEntries),
	}
	key := make([]byte, 32)
	if _, err := io.ReadFull(rand, key); err == nil {
		c.key = key
	}
	return c
}

// Matches reports whether hash is a bcrypt hash of source: from the cache
// when the pair was verified before, else by bcrypt.CompareHashAndPassword,
// remembering the pair when it matches. Mismatches are not remembered. A
// source over 72 bytes never matches.
func (c *HashCache) Matches(hash, source string) bool {
	if c.key == nil {
		return bcryptMatches(hash, source)
	}
	d := c.digest(hash, source)
	c.mu.Lock()
	_, hit := c.entries[d]
	c.mu.Unlock()
	if hit {
		return true
	}
	if !bcryptMatches(hash, source) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[d]; ok {
		return true
	}
	if len(c.order) < cap(c.order) {
		c.order = append(c.order, d)
	} else {
		delete(c.entries, c.order[c.next])
		c.order[c.next] = d
		c.next = (c.next + 1) % len(c.order)
	}
	c.entries[d] = struct{}{}
	return true
}

// Len returns the number of pairs the cache holds.
func (c *HashCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
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
