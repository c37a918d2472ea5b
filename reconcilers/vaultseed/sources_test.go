package vaultseed

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ohmlab/ohmlab-controller/vaultkv"
	"github.com/ohmlab/ohmlab-controller/vaultkv/fake"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

const srcPath = "ohmlab/src"

// keeper says which paths are the own paths of objects of the process.
type keeper map[string]bool

func (k keeper) keeps(_ context.Context, path string) bool { return k[path] }

// sourcesFixture is a fake Vault holding srcPath at version 1, and an
// empty sources over it with a one-minute period, in which srcPath is the
// path of an object of the process.
func sourcesFixture(t *testing.T) (*fake.KV, *sources, *clock, keeper) {
	t.Helper()
	kv := fake.New()
	if _, err := kv.Write(context.Background(), srcPath, map[string]any{"password": "one"}, 0); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1000, 0)}
	k := keeper{srcPath: true}
	return kv, newSources(time.Minute, c.now, k.keeps), c, k
}

func readVersion(t *testing.T, s *sources, kv vaultkv.KV, path string) int {
	t.Helper()
	got, err := s.read(context.Background(), kv, path)
	if err != nil {
		t.Fatal(err)
	}
	return got.Version
}

func TestSources(t *testing.T) {
	tests := []struct {
		name string
		// steps runs against the fixture; it returns the version a
		// dependent reads at the end.
		steps       func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper)
		wantVersion int
		wantReads   int
	}{
		{name: "one read serves every dependent of the period", wantVersion: 1, wantReads: 1, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			for range 4 {
				readVersion(t, s, dep, srcPath)
				c.t = c.t.Add(10 * time.Second)
			}
		}},
		{name: "read again once the period is over", wantVersion: 1, wantReads: 2, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			readVersion(t, s, dep, srcPath)
			c.t = c.t.Add(time.Minute)
		}},
		{name: "the source's own read refreshes the entry", wantVersion: 2, wantReads: 1, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			readVersion(t, s, dep, srcPath)
			if _, err := kv.Write(context.Background(), srcPath, map[string]any{"password": "two"}, 1); err != nil {
				t.Fatal(err)
			}
			own, _ := kv.Read(context.Background(), srcPath)
			if !s.put(srcPath, own, c.t) {
				t.Error("put of a newer version does not report a change")
			}
		}},
		{name: "an own read before any dependent serves them", wantVersion: 1, wantReads: 0, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			own, _ := kv.Read(context.Background(), srcPath)
			if s.put(srcPath, own, c.t) {
				t.Error("a first put reports a change")
			}
			if s.put(srcPath, own, c.t) {
				t.Error("a put of the same version reports a change")
			}
		}},
		{name: "a read that started before a write does not replace it", wantVersion: 3, wantReads: 0, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			started := c.t
			c.t = c.t.Add(time.Second)
			s.wrote(srcPath, 3, map[string]any{"password": "three"})
			if s.put(srcPath, &vaultkv.Secret{Exists: true, Version: 2}, started) {
				t.Error("a slower read reports a change")
			}
		}},
		{name: "a path deleted and re-created replaces the entry of its former life", wantVersion: 1, wantReads: 0, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			s.wrote(srcPath, 3, map[string]any{"password": "three"})
			c.t = c.t.Add(time.Second)
			if !s.put(srcPath, &vaultkv.Secret{Exists: true, Version: 1, Data: map[string]any{"password": "one"}}, c.t) {
				t.Error("a re-created path does not report a change")
			}
		}},
		{name: "the same version with other data is a change", wantVersion: 1, wantReads: 1, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			readVersion(t, s, dep, srcPath)
			if !s.put(srcPath, &vaultkv.Secret{Exists: true, Version: 1, Data: map[string]any{"password": "re-created"}}, c.t) {
				t.Error("other data at the same version does not report a change")
			}
		}},
		{name: "a path that is no object's is read every time", wantVersion: 1, wantReads: 4, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			k[srcPath] = false
			for range 3 {
				readVersion(t, s, dep, srcPath)
			}
		}},
		{name: "an entry is not served once no object has the path", wantVersion: 1, wantReads: 2, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			readVersion(t, s, dep, srcPath)
			k[srcPath] = false
		}},
		{name: "the controller's write refreshes the entry", wantVersion: 2, wantReads: 1, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			readVersion(t, s, dep, srcPath)
			s.wrote(srcPath, 2, map[string]any{"password": "two"})
		}},
		{name: "forget drops the entry", wantVersion: 1, wantReads: 2, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			readVersion(t, s, dep, srcPath)
			s.forget(srcPath)
		}},
		{name: "a deleted path drops the entry", wantVersion: 1, wantReads: 2, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			readVersion(t, s, dep, srcPath)
			if !s.put(srcPath, &vaultkv.Secret{Exists: true, Version: 2, Deleted: true}, c.t) {
				t.Error("a deleted path does not report a change")
			}
		}},
		{name: "a failed read is not remembered", wantVersion: 1, wantReads: 2, steps: func(t *testing.T, kv *fake.KV, dep vaultkv.KV, s *sources, c *clock, k keeper) {
			kv.FailNext(vaultkv.OpRead, vaultkv.ErrUnavailable)
			if _, err := s.read(context.Background(), dep, srcPath); err == nil {
				t.Error("a failed read returns no error")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv, s, c, k := sourcesFixture(t)
			dep := &countingKV{KV: kv}
			tt.steps(t, kv, dep, s, c, k)
			if got := readVersion(t, s, dep, srcPath); got != tt.wantVersion {
				t.Errorf("a dependent reads version %d, want %d", got, tt.wantVersion)
			}
			if dep.reads != tt.wantReads {
				t.Errorf("%d Vault reads by dependents, want %d", dep.reads, tt.wantReads)
			}
		})
	}
}

// countingKV counts the reads made through it: the dependents' reads, apart
// from the own reads the tests make on the fake directly.
type countingKV struct {
	vaultkv.KV
	reads int
}

func (c *countingKV) Read(ctx context.Context, path string) (*vaultkv.Secret, error) {
	c.reads++
	return c.KV.Read(ctx, path)
}

func TestSourcesAbsentIsNotRemembered(t *testing.T) {
	kv, s, _, _ := sourcesFixture(t)
	dep := &countingKV{KV: kv}
	for range 3 {
		if got, err := s.read(context.Background(), dep, "ohmlab/missing"); err != nil || got.Exists {
			t.Fatalf("read of a missing path = %+v, %v", got, err)
		}
	}
	if dep.reads != 3 {
		t.Errorf("%d reads of a missing path, want 3 (a waiting dependent must see its source appear)", dep.reads)
	}
}

func TestSourcesSweep(t *testing.T) {
	kv, s, c, _ := sourcesFixture(t)
	for _, p := range []string{"ohmlab/a", "ohmlab/b"} {
		s.wrote(p, 1, map[string]any{"k": "v"})
	}
	c.t = c.t.Add(time.Minute)
	readVersion(t, s, kv, srcPath)
	if len(s.entries) != 1 {
		t.Errorf("%d entries after a period, want 1 (stale entries are swept)", len(s.entries))
	}
}

func TestSourcesKeepNoMetadata(t *testing.T) {
	_, s, c, _ := sourcesFixture(t)
	s.put(srcPath, &vaultkv.Secret{Exists: true, Version: 1, Data: map[string]any{"k": "v"}, CustomMetadata: map[string]string{"ohmlab.fr/owner": "ns/o"}}, c.t)
	if e := s.entries[srcPath]; e.secret.CustomMetadata != nil || e.secret.Data["k"] != "v" {
		t.Errorf("entry = %+v, want the data only", e.secret)
	}
}

func TestSourcesNil(t *testing.T) {
	kv, _, _, _ := sourcesFixture(t)
	var s *sources
	dep := &countingKV{KV: kv}
	s.wrote(srcPath, 2, nil)
	s.forget(srcPath)
	if s.put(srcPath, &vaultkv.Secret{Exists: true, Version: 2}, time.Now()) {
		t.Error("a nil sources reports a change")
	}
	for range 2 {
		if got := readVersion(t, s, dep, srcPath); got != 1 {
			t.Errorf("read version %d, want 1", got)
		}
	}
	if dep.reads != 2 {
		t.Errorf("%d reads, want 2", dep.reads)
	}
}

// TestSourcesOwnRead: an object's read of its own path keeps an entry only
// while an object references the path; an unreferenced path's entry goes.
func TestSourcesOwnRead(t *testing.T) {
	tests := []struct {
		name       string
		referenced bool
		wantEntry  bool
	}{
		{name: "a referenced path keeps its entry", referenced: true, wantEntry: true},
		{name: "an unreferenced path has no entry", referenced: false, wantEntry: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv, s, _, _ := sourcesFixture(t)
			// An entry from an earlier dependent's read.
			readVersion(t, s, kv, srcPath)
			r := s.reader(kv, srcPath, func() bool { return tt.referenced }, func() {})
			if _, err := r.Read(context.Background(), srcPath); err != nil {
				t.Fatal(err)
			}
			if _, ok := s.entries[srcPath]; ok != tt.wantEntry {
				t.Errorf("entry after the own read: %t, want %t", ok, tt.wantEntry)
			}
		})
	}
}

// TestSourcesWaitForTheSourcesReconcile: a dependent that finds no entry of
// a source whose object is being reconciled waits for that reconcile and is
// served its write, without a read of the path before it was written.
func TestSourcesWaitForTheSourcesReconcile(t *testing.T) {
	kv, s, c, k := sourcesFixture(t)
	const newSource = "ohmlab/new"
	k[newSource] = true
	dep := &countingKV{KV: kv}
	end := s.begin(newSource)
	got := make(chan *vaultkv.Secret)
	go func() {
		secret, err := s.read(context.Background(), dep, newSource)
		if err != nil {
			t.Error(err)
		}
		got <- secret
	}()
	// The source's object writes the path, then its reconcile ends.
	time.Sleep(50 * time.Millisecond)
	if _, err := kv.Write(context.Background(), newSource, map[string]any{"password": "two"}, 0); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(time.Second)
	s.wrote(newSource, 1, map[string]any{"password": "two"})
	end()
	if secret := <-got; !secret.Exists || secret.Version != 1 {
		t.Errorf("the dependent read %+v, want version 1", secret)
	}
	if dep.reads != 0 {
		t.Errorf("%d Vault reads by the dependent, want 0: the write serves it", dep.reads)
	}
}

// TestSourcesReadFresh: a reconcile a person asked for reads a source from
// Vault past a fresh entry, refreshes the entry (the next dependent is
// served the new version without a read) and says when it was out of date.
func TestSourcesReadFresh(t *testing.T) {
	tests := []struct {
		name string
		// kept: srcPath is the path of an object of the process.
		kept bool
		// edit writes srcPath by hand after a dependent's read made the entry.
		edit        bool
		wantChanged bool
		// wantReads are the Vault reads of the fresh read and of a
		// dependent's read after it.
		wantReads int
	}{
		{name: "an entry out of date is refreshed", kept: true, edit: true, wantChanged: true, wantReads: 1},
		{name: "an entry up to date", kept: true, wantReads: 1},
		{name: "a path that is no object's", kept: false, edit: true, wantReads: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv, s, c, k := sourcesFixture(t)
			k[srcPath] = tt.kept
			readVersion(t, s, kv, srcPath)
			want := 1
			if tt.edit {
				if _, err := kv.Write(context.Background(), srcPath, map[string]any{"password": "filled-by-hand"}, 1); err != nil {
					t.Fatal(err)
				}
				want = 2
			}
			c.t = c.t.Add(time.Second)
			dep := &countingKV{KV: kv}
			var changed []string
			var read bool
			got, err := s.readFresh(context.Background(), dep, srcPath, func() { read = true }, func(p string) { changed = append(changed, p) })
			if err != nil {
				t.Fatal(err)
			}
			if !read {
				t.Error("reading was not called")
			}
			if got.Version != want {
				t.Errorf("the fresh read returned version %d, want %d", got.Version, want)
			}
			if wantChanged := map[bool][]string{true: {srcPath}}[tt.wantChanged]; !slices.Equal(changed, wantChanged) {
				t.Errorf("changed called with %v, want %v", changed, wantChanged)
			}
			if v := readVersion(t, s, dep, srcPath); v != want {
				t.Errorf("a dependent's read after it returned version %d, want %d", v, want)
			}
			if dep.reads != tt.wantReads {
				t.Errorf("%d Vault reads, want %d", dep.reads, tt.wantReads)
			}
		})
	}
}
