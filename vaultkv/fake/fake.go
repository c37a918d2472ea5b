// Package fake is an in-memory vaultkv.KV for unit tests of the code that
// uses Vault: versions, check-and-set, custom_metadata merge, soft delete,
// injected errors and request counters, with Vault's semantics.
package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// KV is an in-memory vaultkv.KV. The zero value is not usable: call New.
// It is safe for concurrent use.
//
// As with Vault, data trees go through JSON: a read returns a fresh copy
// with numbers as json.Number, and a path that has metadata (from Mark) but
// no version reads as absent.
type KV struct {
	mu    sync.Mutex
	paths map[string]*entry
	fail  map[string][]error
	calls map[string]int
	now   func() time.Time
}

type entry struct {
	versions []version // version i+1
	custom   map[string]string
}

// version is one KV version: its JSON, nil when deleted, and its
// created_time.
type version struct {
	data    []byte
	created time.Time
}

var _ vaultkv.KV = (*KV)(nil)

// New returns an empty KV.
func New() *KV {
	return &KV{paths: map[string]*entry{}, fail: map[string][]error{}, calls: map[string]int{}, now: time.Now}
}

// SetClock makes the created_time of later versions come from now, for
// tests that replay a history exactly. now must never go back: Vault's
// created_time names one write of a path.
func (f *KV) SetClock(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// Snapshot is a copy of every path, as a Vault snapshot holds them.
type Snapshot struct{ paths map[string]*entry }

// Snapshot returns a copy of every path.
func (f *KV) Snapshot() Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Snapshot{paths: clonePaths(f.paths)}
}

// Restore puts every path back as snap holds it, as restoring a Vault
// snapshot does: versions written since are gone, and the next write of a
// path takes a number a lost version had.
func (f *KV) Restore(snap Snapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = clonePaths(snap.paths)
}

func clonePaths(paths map[string]*entry) map[string]*entry {
	out := make(map[string]*entry, len(paths))
	for p, e := range paths {
		out[p] = &entry{versions: slices.Clone(e.versions), custom: maps.Clone(e.custom)}
	}
	return out
}

// FailNext makes the next call of op (vaultkv.OpRead, OpWrite, OpMark or
// OpDelete) return err without any effect. Calls queue: the second call
// of FailNext for the same op fails the call after the next, and so on.
// err is returned as is: use a vaultkv sentinel or *vaultkv.Error so that
// vaultkv.ClassOf classifies it.
func (f *KV) FailNext(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[op] = append(f.fail[op], err)
}

// Calls returns how many times op was called, failed calls included.
func (f *KV) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// SoftDelete deletes the latest version of path, as `vault kv delete`
// does: the path reads as present, empty, at the same version. It returns
// false when the path has no version.
func (f *KV) SoftDelete(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.paths[path]
	if e == nil || len(e.versions) == 0 {
		return false
	}
	e.versions[len(e.versions)-1].data = nil
	return true
}

// begin counts a call of op and returns its injected error, if any; f.mu
// is held.
func (f *KV) begin(op string) error {
	f.calls[op]++
	if q := f.fail[op]; len(q) > 0 {
		f.fail[op] = q[1:]
		return q[0]
	}
	return nil
}

func invalid(op, path string, err error) error {
	return &vaultkv.Error{Op: op, Path: path, Class: vaultkv.ClassInvalid, Reason: err.Error()}
}

// GeneratePassword implements vaultkv.KV: this Vault has no password
// policy, so every name is ClassNotFound, as Vault answers for a policy it
// does not have.
func (f *KV) GeneratePassword(_ context.Context, policy string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	path := "sys/policies/password/" + policy + "/generate"
	if err := f.begin(vaultkv.OpGenerate); err != nil {
		return "", err
	}
	return "", &vaultkv.Error{Op: vaultkv.OpGenerate, Path: path, Class: vaultkv.ClassNotFound, Status: http.StatusNotFound, Reason: "policy does not exist"}
}

// Read implements vaultkv.KV.
func (f *KV) Read(_ context.Context, path string) (*vaultkv.Secret, error) {
	return f.read(path, 0)
}

// ReadVersion implements vaultkv.KV.
func (f *KV) ReadVersion(_ context.Context, path string, version int) (*vaultkv.Secret, error) {
	if version < 1 {
		return nil, invalid(vaultkv.OpRead, path, fmt.Errorf("version %d is not positive", version))
	}
	return f.read(path, version)
}

// ReadNew implements vaultkv.KV: one read counted for the metadata, a
// second one when the path has a version.
func (f *KV) ReadNew(_ context.Context, path string) (*vaultkv.Secret, error) {
	f.mu.Lock()
	if err := f.begin(vaultkv.OpRead); err != nil {
		f.mu.Unlock()
		return nil, err
	}
	if _, _, err := vaultkv.SplitPath(path); err != nil {
		f.mu.Unlock()
		return nil, invalid(vaultkv.OpRead, path, err)
	}
	var s *vaultkv.Secret
	switch e := f.paths[path]; {
	case e == nil:
		s = &vaultkv.Secret{NoMetadata: true}
	case len(e.versions) == 0:
		s = &vaultkv.Secret{}
		if len(e.custom) > 0 {
			s.CustomMetadata = maps.Clone(e.custom)
		}
	}
	f.mu.Unlock()
	if s != nil {
		return s, nil
	}
	return f.read(path, 0)
}

// read reads the latest version (0) or the given one.
func (f *KV) read(path string, version int) (*vaultkv.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(vaultkv.OpRead); err != nil {
		return nil, err
	}
	if _, _, err := vaultkv.SplitPath(path); err != nil {
		return nil, invalid(vaultkv.OpRead, path, err)
	}
	e := f.paths[path]
	if e == nil || len(e.versions) == 0 || version > len(e.versions) {
		return &vaultkv.Secret{}, nil
	}
	if version == 0 {
		version = len(e.versions)
	}
	s := &vaultkv.Secret{Exists: true, Version: version, Created: e.versions[version-1].created}
	if len(e.custom) > 0 {
		s.CustomMetadata = maps.Clone(e.custom)
	}
	latest := e.versions[version-1].data
	if latest == nil {
		s.Deleted = true
		return s, nil
	}
	dec := json.NewDecoder(bytes.NewReader(latest))
	dec.UseNumber()
	if err := dec.Decode(&s.Data); err != nil {
		panic(err) // stored by Write from a successful json.Marshal
	}
	return s, nil
}

// Write implements vaultkv.KV.
func (f *KV) Write(_ context.Context, path string, data map[string]any, cas int) (vaultkv.Written, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(vaultkv.OpWrite); err != nil {
		return vaultkv.Written{}, err
	}
	if _, _, err := vaultkv.SplitPath(path); err != nil {
		return vaultkv.Written{}, invalid(vaultkv.OpWrite, path, err)
	}
	if data == nil {
		data = map[string]any{}
	}
	b, err := json.Marshal(data)
	if err != nil {
		return vaultkv.Written{}, invalid(vaultkv.OpWrite, path, err)
	}
	e := f.paths[path]
	if e == nil {
		e = &entry{}
	}
	if cas != len(e.versions) {
		return vaultkv.Written{}, &vaultkv.Error{Op: vaultkv.OpWrite, Path: path, Class: vaultkv.ClassCASMismatch, Status: http.StatusBadRequest,
			Reason: "check-and-set parameter did not match the current version"}
	}
	// Vault's created_time is UTC, to the nanosecond.
	v := version{data: b, created: f.now().UTC()}
	e.versions = append(e.versions, v)
	f.paths[path] = e
	return vaultkv.Written{Version: len(e.versions), Created: v.created}, nil
}

// Mark implements vaultkv.KV.
func (f *KV) Mark(_ context.Context, path string, metadata map[string]string) error {
	return f.mark(path, metadata, false)
}

// MarkNew implements vaultkv.KV: the path's custom_metadata becomes
// metadata.
func (f *KV) MarkNew(_ context.Context, path string, metadata map[string]string) error {
	return f.mark(path, metadata, true)
}

// mark merges metadata into the path's custom_metadata, or replaces it.
func (f *KV) mark(path string, metadata map[string]string, replace bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(vaultkv.OpMark); err != nil {
		return err
	}
	if _, _, err := vaultkv.SplitPath(path); err != nil {
		return invalid(vaultkv.OpMark, path, err)
	}
	if err := vaultkv.ValidateMetadata(metadata); err != nil {
		return invalid(vaultkv.OpMark, path, err)
	}
	if len(metadata) == 0 {
		return nil
	}
	e := f.paths[path]
	if e == nil {
		e = &entry{}
		f.paths[path] = e
	}
	if replace || e.custom == nil {
		e.custom = map[string]string{}
	}
	maps.Copy(e.custom, metadata)
	return nil
}

// Delete implements vaultkv.KV.
func (f *KV) Delete(_ context.Context, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(vaultkv.OpDelete); err != nil {
		return err
	}
	if _, _, err := vaultkv.SplitPath(path); err != nil {
		return invalid(vaultkv.OpDelete, path, err)
	}
	delete(f.paths, path)
	return nil
}
