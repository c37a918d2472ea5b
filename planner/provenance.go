package planner

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// Provenance of the managed keys (docs/DESIGN.md, "Provenance"): status.managedKeys
// records, for each key, a KV version that holds the value the controller
// wrote, and a prune compares the current value with the value at that
// version (product document, "Pruning"). Vault keeps only max_versions
// versions of a path, so the recorded version is carried forward while
// both versions still read and hold the same value: status stays free of
// values and digests, and a key nobody changed can be pruned after any
// number of later versions.

// Kept is a managed key that a prune leaves on the path, and why.
type Kept struct {
	Key string
	// Why is keptChanged, keptUnknownVersion or keptVersionGone's text.
	Why string
}

const (
	keptChanged = "changed since the controller wrote it"
	// keptUnknownVersion: status.managedKeys of the first release named the
	// keys without their version.
	keptUnknownVersion = "cannot tell: recorded by an earlier release without its version"
)

// keptVersionGone is why a key whose recorded version Vault no longer
// keeps (max_versions, delete_version_after, a destroyed version) is kept.
func keptVersionGone(version int) string {
	return fmt.Sprintf("cannot tell: version %d can no longer be read (deleted, destroyed or past max_versions)", version)
}

// KeptMessage groups kept keys by why, for the Kept event: "changed since
// the controller wrote it: a, b; cannot tell: version 3 can no longer be read (deleted, destroyed or past max_versions):
// c". It names keys, never values; each key is an item, so a capped
// message leaves out keys.
func KeptMessage(kept []Kept) Message {
	byWhy := map[string][]string{}
	var whys []string
	for _, k := range kept {
		if _, seen := byWhy[k.Why]; !seen {
			whys = append(whys, k.Why)
		}
		byWhy[k.Why] = append(byWhy[k.Why], k.Key)
	}
	var m Message
	for i, why := range whys {
		for j, key := range byWhy[why] {
			it := listItem{sep: ", ", text: key}
			if j == 0 {
				it = listItem{sep: "; ", text: why + ": " + key}
			}
			if i == 0 && j == 0 {
				it.sep = ""
			}
			m.items = append(m.items, it)
		}
	}
	return m
}

// CreatedTime is a version's created_time as status.managedKeys records
// it, "" for the zero time.
func CreatedTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// staleRecords are the managed keys whose record names a version the path
// does not have as recorded: past its latest version (lost to a restored
// snapshot, or of a former life of the path), or a version read whose
// created_time is not the recorded one (the path was deleted with its
// metadata and written again). Their values are not known to be the
// controller's: they are no longer managed, and never pruned. A record
// without created_time (an earlier release's) is taken at its number, as
// that release took it; a version not read tells nothing.
func staleRecords(d Desired, path *vaultkv.Secret, written map[int]*vaultkv.Secret) []string {
	if !path.Exists {
		return nil
	}
	var stale []string
	for _, k := range d.ManagedKeys {
		v, created := d.WrittenAt[k], d.CreatedAt[k]
		s := written[v]
		if v == path.Version {
			s = path
		}
		switch {
		case v > path.Version:
			stale = append(stale, k)
		case created == "" || s == nil || !s.Exists:
		case created != CreatedTime(s.Created):
			stale = append(stale, k)
		}
	}
	return stale
}

// RecordsOn returns the managed keys whose record the path, as read, still
// shows: none on a path without the owner marker (or none at all), and none
// past its version or at its version with another created_time
// (staleRecords). A reconcile that read the path and applied no plan
// reports these, so that status names no version the path lacks.
func RecordsOn(path *vaultkv.Secret, owner string, managed []ohmlabv1alpha1.ManagedKey) []ohmlabv1alpha1.ManagedKey {
	if !path.Exists || path.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey] != owner {
		return nil
	}
	var out []ohmlabv1alpha1.ManagedKey
	for _, m := range managed {
		if m.Version > int64(path.Version) || m.Version == int64(path.Version) && m.CreatedTime != "" && m.CreatedTime != CreatedTime(path.Created) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// forget returns d without the records of keys: they are no longer
// managed.
func (d Desired) forget(keys []string) Desired {
	if len(keys) == 0 {
		return d
	}
	d.ManagedKeys = slices.DeleteFunc(slices.Clone(d.ManagedKeys), func(k string) bool { return slices.Contains(keys, k) })
	if len(d.ManagedKeys) == 0 {
		d.ManagedKeys = nil
	}
	d.WrittenAt, d.CreatedAt = maps.Clone(d.WrittenAt), maps.Clone(d.CreatedAt)
	for _, k := range keys {
		delete(d.WrittenAt, k)
		delete(d.CreatedAt, k)
	}
	return d
}

// carried returns the managed keys (sorted) that the plan does not write
// and whose recorded version, older than the version read, holds the same
// value as the version read: their record moves up to it. A key whose value
// differs was changed by someone since the controller wrote it: its record
// stays where it is, so it is never pruned and a prune says why
// (keptChanged while that version is kept, keptVersionGone after).
func carried(d Desired, managed []string, changes []templating.Change, current map[string]any, version int, written map[int]*vaultkv.Secret) []string {
	h := history{written: written}
	var out []string
	for _, k := range managed {
		v := d.WrittenAt[k]
		if v <= 0 || v >= version || slices.ContainsFunc(changes, func(c templating.Change) bool { return c.Key == k }) {
			continue
		}
		then, _ := h.at(v)
		if was, ok := then[k]; ok && reflect.DeepEqual(was, current[k]) {
			out = append(out, k)
		}
	}
	return out
}

// checkedPairs are the bcrypt pairs of the path that match with no bcrypt
// compare: for each declared hash recorded at version V
// (Desired.WrittenAt), the hash and its source as version V holds them, V
// being the version read or an older one read anyway ([versionReads]). No
// pair comes from an unknown version, from a path without this object's
// owner marker, or from a version past status.version. Why a record at V
// vouches for the pair: docs/DESIGN.md, "Hashes a restart need not compare".
func checkedPairs(d Desired, path *vaultkv.Secret, current map[string]any, written map[int]*vaultkv.Secret) map[string]templating.BcryptPair {
	if !path.Exists || path.Deleted || path.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey] != d.Owner {
		return nil
	}
	h := history{written: written}
	var out map[string]templating.BcryptPair
	for k, l := range d.Analysis.Leaves {
		v := d.WrittenAt[k]
		if l.Kind != templating.KindBcrypt || v <= 0 || v > d.Version {
			continue
		}
		then := current
		if v != path.Version {
			then, _ = h.at(v)
		}
		hash, ok := then[k]
		source, found := then[l.Source]
		if !ok || !found {
			continue
		}
		if out == nil {
			out = map[string]templating.BcryptPair{}
		}
		out[k] = templating.BcryptPair{Hash: templating.Stringify(hash), Source: templating.Stringify(source)}
	}
	return out
}

// history is the versions of a path that a reconcile read, flattened once
// each.
type history struct {
	written map[int]*vaultkv.Secret
	flat    map[int]versionRead
}

type versionRead struct {
	values   map[string]any
	readable bool
}

// at returns the flattened tree of a version and whether it could be read.
func (h *history) at(version int) (map[string]any, bool) {
	r, ok := h.flat[version]
	if !ok {
		if s := h.written[version]; s != nil && s.Exists && !s.Deleted {
			r = versionRead{values: templating.Flatten(s.Data), readable: true}
		}
		if h.flat == nil {
			h.flat = map[int]versionRead{}
		}
		h.flat[version] = r
	}
	return r.values, r.readable
}

// ManagedStatus is status.managedKeys after a plan: the keys it wrote at the
// version of its write, the others at the version they were written before,
// carried forward to the version the plan read (Plan.Carried) and on to the
// version of its write, which holds their value unchanged. Each record
// carries its version's created_time; a record of an earlier release
// without one takes the version's when the plan read that version on the
// path this object owns.
func ManagedStatus(p Plan, before []ohmlabv1alpha1.ManagedKey, applied bool, written vaultkv.Written) []ohmlabv1alpha1.ManagedKey {
	records := make(map[string]ohmlabv1alpha1.ManagedKey, len(before))
	for _, m := range before {
		m.StoredAsName = false
		if m.Version > 0 && m.Version == int64(p.CAS) && m.CreatedTime == "" {
			m.CreatedTime = CreatedTime(p.Base)
		}
		records[m.Key] = m
	}
	for _, k := range p.Carried {
		records[k] = ohmlabv1alpha1.ManagedKey{Key: k, Version: int64(p.CAS), CreatedTime: CreatedTime(p.Base)}
	}
	rewrote := applied && p.Data != nil
	wrote := map[string]bool{}
	if rewrote {
		for _, a := range p.Actions {
			if a.Key != "" {
				wrote[a.Key] = true
			}
		}
	}
	out := make([]ohmlabv1alpha1.ManagedKey, 0, len(p.ManagedKeys))
	for _, k := range p.ManagedKeys {
		m, recorded := records[k]
		if wrote[k] || rewrote && m.Version > 0 && m.Version == int64(p.CAS) {
			m = ohmlabv1alpha1.ManagedKey{Version: int64(written.Version), CreatedTime: CreatedTime(written.Created)}
		}
		m.Key = k
		// Version 0 was recorded by the first release: the key stays
		// managed, at a version nobody can tell.
		if m.Version > 0 || recorded {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
