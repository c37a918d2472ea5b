package vaultseed

import (
	"context"
	"sync"
	"time"

	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// sources remembers the paths read in the current resync period, so that
// one Vault read of a reference source serves every object that references
// it (issue 13: at most one read per distinct path per resync period,
// however many objects reference it). An entry is fresh for one resync
// period after the read that made it. It is refreshed, never served, by an
// object's read of its own path (which always goes to Vault), and by this
// process's own writes of the path; a newer KV version is never replaced by
// an older one read concurrently. A path read absent or deleted has no
// entry: an object waiting for its source (RefPending) reads Vault at each
// retry. Entries hold the data of a path only (no custom_metadata), the
// part references read. Safe for concurrent use; a nil *sources remembers
// nothing and reads Vault every time.
type sources struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]sourceEntry
	swept   time.Time
}

type sourceEntry struct {
	secret *vaultkv.Secret // never modified once stored
	read   time.Time
}

// newSources returns an empty set whose entries are fresh for ttl (the
// resync period); now is time.Now in production.
func newSources(ttl time.Duration, now func() time.Time) *sources {
	return &sources{ttl: ttl, now: now, entries: map[string]sourceEntry{}, swept: now()}
}

// read returns path from a fresh entry, or reads it from Vault and records
// the read.
func (s *sources) read(ctx context.Context, kv KVReader, path string) (*vaultkv.Secret, error) {
	if s == nil {
		return kv.Read(ctx, path)
	}
	now := s.now()
	s.mu.Lock()
	e, ok := s.entries[path]
	s.mu.Unlock()
	if ok && now.Sub(e.read) < s.ttl {
		return e.secret, nil
	}
	secret, err := kv.Read(ctx, path)
	if err != nil {
		return nil, err
	}
	s.put(path, secret)
	return secret, nil
}

// put records a read of path made outside read (an object's read of its
// own path). It reports whether the entry held an older version: the path
// changed without this process writing it, so its dependents should look.
func (s *sources) put(path string, secret *vaultkv.Secret) (changed bool) {
	if s == nil {
		return false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	old, had := s.entries[path]
	switch {
	case secret == nil || !secret.Exists || secret.Deleted:
		delete(s.entries, path)
		return had
	case had && old.secret.Version > secret.Version:
		return false // a slower read of an older version
	}
	s.entries[path] = sourceEntry{secret: &vaultkv.Secret{Exists: true, Version: secret.Version, Data: secret.Data}, read: now}
	return had && old.secret.Version != secret.Version
}

// wrote records this process's write of data as version of path: the
// dependents it notifies read the new version without a request.
func (s *sources) wrote(path string, version int, data map[string]any) {
	s.put(path, &vaultkv.Secret{Exists: true, Version: version, Data: data})
}

// forget drops the entry of path (this process deleted it).
func (s *sources) forget(path string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, path)
}

// sweep drops stale entries, at most once per ttl, so that the paths of
// deleted objects do not stay: O(1) amortised per put.
func (s *sources) sweep(now time.Time) {
	if now.Sub(s.swept) < s.ttl {
		return
	}
	s.swept = now
	for p, e := range s.entries {
		if now.Sub(e.read) >= s.ttl {
			delete(s.entries, p)
		}
	}
}

// reader returns kv with the reads of paths other than own served through
// s; a read of own goes to Vault and, when an object references own
// (referenced), refreshes its entry, calling changed when the entry held an
// older version. The entry of a path that nothing references is dropped
// instead: it would serve nobody, and at 10,000 objects the entries of every
// path were a large part of the heap (issue 13).
func (s *sources) reader(kv KVReader, own string, referenced func() bool, changed func()) KVReader {
	return sourcedReader{KVReader: kv, s: s, own: own, referenced: referenced, changed: changed}
}

type sourcedReader struct {
	KVReader
	s          *sources
	own        string
	referenced func() bool
	changed    func()
}

func (r sourcedReader) Read(ctx context.Context, path string) (*vaultkv.Secret, error) {
	if path != r.own {
		return r.s.read(ctx, r.KVReader, path)
	}
	secret, err := r.KVReader.Read(ctx, path)
	if err != nil {
		return secret, err
	}
	if !r.referenced() {
		r.s.forget(path)
	} else if r.s.put(path, secret) {
		r.changed()
	}
	return secret, nil
}
