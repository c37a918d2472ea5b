package vaultseed

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/ohmlab/ohmlab-controller/planner"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// sources remembers reads of reference sources, so that one Vault read of
// a source serves every object that references it: one read per distinct
// path per resync period, however many objects reference it.
//
// Only the path of an object of this process is remembered and served
// (keeps): that object keeps its entry fresh, since its own read at each
// of its resyncs refreshes the entry (and an entry that held another
// version or other data makes its dependents look at once, reader), and
// so do this process's writes of the path. Any other path (written by hand
// or by another shard's process) is read from Vault at every reconcile of
// every dependent: a reference is kept equal to its source at every
// resync. What remains: a key of an object's path that
// is edited by someone else reaches the dependents at that object's next
// resync, within one period (docs/DESIGN.md, "Reference sources"), or at
// once when a person asks for a reconcile of that object or of a dependent
// (readFresh).
//
// An entry is fresh for one resync period after the read that made it. A
// read replaces the entry only when it started after the read or write
// that made it, so a slower read never brings an older state back and a
// path deleted and re-created (its versions start again at 1) replaces
// the entry of its former life. A path read absent or deleted has no
// entry. Entries hold the data of a path only (no custom_metadata), the
// part references read. Safe for concurrent use; a nil *sources remembers
// nothing and reads Vault every time.
//
// A dependent that finds no fresh entry for a path whose own object is
// being reconciled (begin) waits for that reconcile, up to sourceWait,
// before reading: objects created together are reconciled side by side,
// and a source read just before its object writes it would send the
// dependent to RefPending, a status write, a retry and a second read of its
// own path: a new path costs one read.
type sources struct {
	ttl time.Duration
	now func() time.Time
	// keeps reports whether path is the own path of an object of this
	// process.
	keeps func(ctx context.Context, path string) bool

	mu      sync.Mutex
	entries map[string]sourceEntry
	swept   time.Time
	// writing holds the paths whose own object's reconcile runs, each
	// with a channel closed when it ends; readers, by path, the
	// dependents being reconciled that will read it, or wait for its
	// reconcile, after now: a write of it serves them, so
	// notifyDependents need not reconcile them again.
	writing map[string]chan struct{}
	readers map[string]map[string]int
}

// sourceWait bounds how long a dependent waits for its source's reconcile
// (a source whose Vault hangs, or an undetected cycle, costs a dependent
// this much, then it reads as before).
const sourceWait = 10 * time.Second

type sourceEntry struct {
	secret *vaultkv.Secret // never modified once stored
	// read is when the read that made the entry started, or when the
	// write that made it was answered.
	read time.Time
}

// newSources returns an empty set whose entries are fresh for ttl (the
// resync period); now is time.Now in production.
func newSources(ttl time.Duration, now func() time.Time, keeps func(ctx context.Context, path string) bool) *sources {
	return &sources{ttl: ttl, now: now, keeps: keeps, entries: map[string]sourceEntry{}, swept: now(), writing: map[string]chan struct{}{}, readers: map[string]map[string]int{}}
}

// read returns path from a fresh entry, or reads it from Vault, recording
// the read when an object of this process keeps the path.
func (s *sources) read(ctx context.Context, kv planner.KVReader, path string) (*vaultkv.Secret, error) {
	return s.readFor(ctx, kv, path, func() {})
}

// readFor is read calling reading after any wait for path's reconcile and
// before the entry or Vault is read: a write of path before that call is
// seen by this read.
func (s *sources) readFor(ctx context.Context, kv planner.KVReader, path string, reading func()) (*vaultkv.Secret, error) {
	if s == nil || !s.keeps(ctx, path) {
		reading()
		return kv.Read(ctx, path)
	}
	s.mu.Lock()
	e, ok := s.entries[path]
	busy := s.writing[path]
	s.mu.Unlock()
	if busy != nil && !(ok && s.now().Sub(e.read) < s.ttl) {
		wait := time.NewTimer(sourceWait)
		select {
		case <-busy:
		case <-wait.C:
		case <-ctx.Done():
		}
		wait.Stop()
	}
	reading()
	start := s.now()
	s.mu.Lock()
	e, ok = s.entries[path]
	s.mu.Unlock()
	if ok && start.Sub(e.read) < s.ttl {
		return e.secret, nil
	}
	secret, err := kv.Read(ctx, path)
	if err != nil {
		return nil, err
	}
	s.put(path, secret, start)
	return secret, nil
}

// put records a read of path that started at start. It reports whether
// the entry held another version or other data: the path changed without
// this process writing it, so its dependents should look.
func (s *sources) put(path string, secret *vaultkv.Secret, start time.Time) (changed bool) {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(s.now())
	old, had := s.entries[path]
	switch {
	case had && old.read.After(start):
		return false // a slower read, which may show an older state
	case secret == nil || !secret.Exists || secret.Deleted:
		delete(s.entries, path)
		return had
	}
	s.entries[path] = sourceEntry{secret: &vaultkv.Secret{Exists: true, Version: secret.Version, Data: secret.Data}, read: start}
	return had && (old.secret.Version != secret.Version || !sameTree(old.secret.Data, secret.Data))
}

// wrote records this process's write of data as version of path: the
// dependents it notifies read the new version without a request.
func (s *sources) wrote(path string, version int, data map[string]any) {
	if s == nil {
		return
	}
	s.put(path, &vaultkv.Secret{Exists: true, Version: version, Data: data}, s.now())
}

// begin records that the reconcile of path's own object runs; end, which
// it returns, that it is over. Dependents that find no fresh entry of path
// meanwhile wait for end (read).
func (s *sources) begin(path string) (end func()) {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.writing[path]; ok {
		return func() {} // two objects of one path: the first one's
	}
	done := make(chan struct{})
	s.writing[path] = done
	return func() {
		s.mu.Lock()
		delete(s.writing, path)
		s.mu.Unlock()
		close(done)
	}
}

// expect records that the dependent named reader will read path (or wait
// for its reconcile) after now; unexpect that it is about to read it.
func (s *sources) expect(path, reader string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readers[path] == nil {
		s.readers[path] = map[string]int{}
	}
	s.readers[path][reader]++
}

func (s *sources) unexpect(path, reader string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readers[path][reader]--; s.readers[path][reader] <= 0 {
		delete(s.readers[path], reader)
	}
	if len(s.readers[path]) == 0 {
		delete(s.readers, path)
	}
}

// expecting says whether the dependent named reader will read path, or
// wait for its reconcile, after now: a write of path serves it without
// another reconcile.
func (s *sources) expecting(path, reader string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readers[path][reader] > 0
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

// readFresh is readFor for a reconcile a person asked for
// (ohmlab.fr/reconcile-requested-at, reconcileAsked): path is read from
// Vault whatever the entry, since the person may have just changed it by
// hand, and the read refreshes the entry of a path an object of this
// process keeps, calling changed when the entry held another version or
// other data (its other dependents were served the old one).
func (s *sources) readFresh(ctx context.Context, kv planner.KVReader, path string, reading func(), changed func(path string)) (*vaultkv.Secret, error) {
	reading()
	if s == nil || !s.keeps(ctx, path) {
		return kv.Read(ctx, path)
	}
	start := s.now()
	secret, err := kv.Read(ctx, path)
	if err != nil {
		return nil, err
	}
	if s.put(path, secret, start) {
		changed(path)
	}
	return secret, nil
}

// reader returns kv with the reads of paths other than own served through
// s; a read of own goes to Vault and, when an object references own
// (referenced), refreshes its entry, calling changed when the entry held
// another version or other data. The entry of a path that nothing
// references is dropped instead: it would serve nobody, and at 10,000
// objects the entries of every path were a large part of the heap (issue
// 13).
func (s *sources) reader(kv planner.KVReader, own string, referenced func() bool, changed func()) planner.KVReader {
	if s == nil {
		return kv
	}
	return s.readerFor(kv, own, "", referenced, changed)
}

// readerFor is reader for the object named name, whose expected reads
// (sourcedReader.expect) the sources know of.
func (s *sources) readerFor(kv planner.KVReader, own, name string, referenced func() bool, changed func()) *sourcedReader {
	return &sourcedReader{KVReader: kv, s: s, own: own, name: name, referenced: referenced, changed: changed}
}

type sourcedReader struct {
	planner.KVReader
	s          *sources
	own        string
	name       string
	referenced func() bool
	changed    func()
	// fresh, when set, makes every path other than own read from Vault
	// (readFresh), and is called with a path whose entry that read found
	// out of date.
	fresh func(path string)

	mu   sync.Mutex
	left map[string]bool // the paths expected and not read yet
}

// expect records that the object will read paths in this reconcile, so
// that a write of one of them before the object reads it does not
// reconcile it again (notifyDependents); done forgets those not read.
func (r *sourcedReader) expect(paths []string) (done func()) {
	if r == nil || r.s == nil || r.name == "" {
		return func() {}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.left = map[string]bool{}
	for _, p := range paths {
		if p != r.own && !r.left[p] {
			r.left[p] = true
			r.s.expect(p, r.name)
		}
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for p := range r.left {
			r.s.unexpect(p, r.name)
		}
		r.left = nil
	}
}

// reading forgets the expected read of path: it starts now.
func (r *sourcedReader) reading(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left[path] {
		delete(r.left, path)
		r.s.unexpect(path, r.name)
	}
}

func (r *sourcedReader) Read(ctx context.Context, path string) (*vaultkv.Secret, error) {
	if r.s == nil {
		return r.KVReader.Read(ctx, path)
	}
	if path != r.own && r.fresh != nil {
		return r.s.readFresh(ctx, r.KVReader, path, func() { r.reading(path) }, r.fresh)
	}
	if path != r.own {
		return r.s.readFor(ctx, r.KVReader, path, func() { r.reading(path) })
	}
	start := r.s.now()
	secret, err := r.KVReader.Read(ctx, path)
	if err != nil {
		return secret, err
	}
	if !r.referenced() {
		r.s.forget(path)
	} else if r.s.put(path, secret, start) {
		r.changed()
	}
	return secret, nil
}

// sameTree says whether two KV data trees hold the same values, whatever
// the Go types of their numbers.
func sameTree(a, b map[string]any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
