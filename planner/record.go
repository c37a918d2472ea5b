package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf16"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// A Record is the record of one data write, merged into the path's
// custom_metadata (ohmlabv1alpha1.WriteMetadataKey) before the write, in
// the owner marker's request when there is one (docs/DESIGN.md,
// "Provenance").
// A process that reads the path at or past the version it names, and whose
// object's status does not tell of that write (its writer was killed, lost
// its Lease, or lost the write's answer), reports the write as its writer
// would have; and a rotation token the write applied is recorded, not
// rotated a second time. It names keys and versions, never a value.
type Record struct {
	// Version is the KV version the write creates: its check-and-set + 1.
	Version int `json:"version"`
	// UID and Generation are the writing object's: a record of another
	// object (one deleted and created again under the same name) is never
	// reported, and a copy of the object older than the one that wrote is
	// stale and writes nothing.
	UID        string `json:"uid,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	// Status is the writer's status.version when it planned: a status
	// still there tells of a writer that stopped before reporting.
	Status int64 `json:"status,omitempty"`
	// Base is the created_time of the version the write was planned on, ""
	// for a new path: a version Version of another life of the path (deleted
	// with its metadata and written again) follows another version.
	Base string `json:"base,omitempty"`
	// Until is when the writer gives up its write (its reconcile's
	// deadline): a version created later, allowing for clock skew, is not
	// its write.
	Until string `json:"until,omitempty"`
	// Void: the write was refused; the record tells of nothing but
	// Rotated.
	Void bool `json:"void,omitempty"`
	// Rotated is the version at which a rotation for Token landed, when
	// this write only records that token (its writer found the rotation
	// landed and its token not recorded): whether or not this write lands,
	// that rotation is not made again. 0 when none.
	Rotated int `json:"rotated,omitempty"`
	// Token is the rotation token recorded after the write, "" when none.
	Token string `json:"token,omitempty"`
	// RotatedAt is the time recorded after the write under
	// ohmlabv1alpha1.RotatedAtMetadataKey, "" when the write rotates
	// nothing: a rotation without a token (rotate.every) is known by it.
	RotatedAt string `json:"rotatedAt,omitempty"`
	// Actions are the write's actions: the keys of each field action, an
	// empty list for a path action (create, adopt, record-token).
	Actions map[string][]string `json:"actions,omitempty"`
	// Unlisted: the keys were too many to record; Keys is then the digest
	// of their names (keysDigest), which the keys a version changed must
	// match.
	Unlisted bool   `json:"unlisted,omitempty"`
	Keys     string `json:"keys,omitempty"`
}

// keysDigest is the SHA-256 of key names, sorted, one per line: what an
// unlisted record keeps of its keys.
func keysDigest(keys []string) string {
	sorted := slices.Sorted(slices.Values(keys))
	sum := sha256.Sum256([]byte(strings.Join(sorted, "\n")))
	return hex.EncodeToString(sum[:])
}

// keys are the names of the record's field actions.
func (w Record) keys() []string {
	var out []string
	for _, keys := range w.Actions {
		out = append(out, keys...)
	}
	return out
}

// maxIntentParts bounds the custom_metadata values one record takes: 8 of
// Vault's 512 bytes hold a few hundred key names, and leave the rest of
// Vault's 64 keys to the path's other custom_metadata.
const maxIntentParts = 8

// maxClockSkew is how far Vault's clock, which stamps created_time, may be
// ahead of the controller's, which sets a record's Until.
const maxClockSkew = time.Minute

// NewRecord is the record of p's data write by seed, given up at deadline
// (zero: none).
func NewRecord(p Plan, seed *ohmlabv1alpha1.VaultSeed, deadline time.Time) Record {
	w := Record{Version: p.CAS + 1, UID: string(seed.UID), Generation: seed.Generation, Status: seed.Status.Version, Base: CreatedTime(p.Base),
		Token: p.RecordToken, RotatedAt: p.RecordRotatedAt, Rotated: p.Rotated, Actions: map[string][]string{}}
	if !deadline.IsZero() {
		w.Until = deadline.UTC().Format(time.RFC3339Nano)
	}
	for _, a := range p.Actions {
		keys := w.Actions[a.Name]
		if keys == nil {
			keys = []string{}
		}
		if a.Key != "" {
			keys = append(keys, a.Key)
		}
		w.Actions[a.Name] = keys
	}
	return w
}

// intentKey is the custom_metadata key of a record's part i (from 0).
func intentKey(i int) string {
	if i == 0 {
		return ohmlabv1alpha1.WriteMetadataKey
	}
	return fmt.Sprintf("%s-%d", ohmlabv1alpha1.WriteMetadataKey, i+1)
}

// metadata is the record as custom_metadata: JSON in printable ASCII (Vault
// refuses unprintable characters), cut into values of Vault's size. A
// record too long for maxIntentParts values becomes Unlisted.
func (w Record) metadata() map[string]string {
	s := asciiJSON(w)
	if len(s) > maxIntentParts*vaultkv.MaxMetadataValueBytes {
		s = asciiJSON(Record{Version: w.Version, UID: w.UID, Generation: w.Generation, Base: w.Base, Until: w.Until, Token: w.Token,
			RotatedAt: w.RotatedAt, Rotated: w.Rotated, Unlisted: true, Keys: keysDigest(w.keys())})
	}
	md := map[string]string{}
	for i := 0; s != ""; i++ {
		n := min(len(s), vaultkv.MaxMetadataValueBytes)
		md[intentKey(i)] = s[:n]
		s = s[n:]
	}
	return md
}

// asciiJSON is v as JSON with every non-ASCII character escaped.
func asciiJSON(v any) string {
	// An Record holds strings and ints only: Marshal cannot fail.
	b, _ := json.Marshal(v)
	var out strings.Builder
	for _, r := range string(b) {
		if r < 0x80 {
			out.WriteRune(r)
			continue
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != '\uFFFD' {
			fmt.Fprintf(&out, `\u%04x\u%04x`, r1, r2)
		} else {
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return out.String()
}

// RecordOn returns the record a path's custom_metadata holds. Its
// parts are read in order until they make a JSON object: a part left over
// from a longer record written earlier is never reached, since the object
// of a record closes in its last part. ok is false without a record, or
// when it does not parse (edited by hand).
func RecordOn(md map[string]string) (Record, bool) {
	var s strings.Builder
	for i := range maxIntentParts {
		part, ok := md[intentKey(i)]
		if !ok {
			break
		}
		s.WriteString(part)
		var w Record
		if json.Unmarshal([]byte(s.String()), &w) == nil && w.Version > 0 {
			return w, true
		}
	}
	return Record{}, false
}

// reported says whether the object's status tells of the write, or of
// anything but the version it was planned on: status.version elsewhere,
// or status.managedKeys (as this process knows them) holding the keys it
// wrote at its version and not the keys it pruned.
func (w Record) reported(statusVersion int64, managed []ohmlabv1alpha1.ManagedKey) bool {
	// Only a status left as the writer planned with it, or as a writer
	// that lost the write's answer reports it (at the version it read),
	// tells of a write not reported yet; one anywhere else was written
	// since, or lost or cleared, and is no reason to report it again.
	if statusVersion != w.Status && statusVersion != int64(w.Version-1) {
		return true
	}
	if w.Unlisted {
		return false
	}
	at := make(map[string]int64, len(managed))
	for _, m := range managed {
		at[m.Key] = m.Version
	}
	for name, keys := range w.Actions {
		for _, k := range keys {
			v, ok := at[k]
			if name == ActionDeleteField && ok || name != ActionDeleteField && v < int64(w.Version) {
				return false
			}
		}
	}
	return true
}

// landedIn says whether written, the path's version w.Version, is the
// recorded write, compared with before, the version it was planned on (nil
// for a path that had none): the keys it wrote are present and changed,
// the keys it pruned are gone, and no other key changed. A version that a
// person wrote instead (the write's check-and-set then failed) changes
// other keys or leaves a recorded key as it was.
func (w Record) landedIn(written, before *vaultkv.Secret) bool {
	if written == nil || !written.Exists || written.Deleted || written.Version != w.Version || !w.inTime(written.Created) {
		return false
	}
	var was map[string]any
	if before != nil {
		if !before.Exists || before.Deleted || CreatedTime(before.Created) != w.Base {
			return false
		}
		was = before.Data
	}
	now, then := templating.Flatten(written.Data), templating.Flatten(was)
	if w.Unlisted {
		return w.Keys != "" && keysDigest(changed(then, now)) == w.Keys
	}
	recorded := map[string]bool{}
	for name, keys := range w.Actions {
		for _, k := range keys {
			recorded[k] = true
			old, had := then[k]
			v, has := now[k]
			if name == ActionDeleteField && has || name != ActionDeleteField && (!has || had && reflect.DeepEqual(old, v)) {
				return false
			}
		}
	}
	for _, tree := range []map[string]any{now, then} {
		for k := range tree {
			if !recorded[k] && !reflect.DeepEqual(now[k], then[k]) {
				return false
			}
		}
	}
	return true
}

// reportable says whether the write may still be reported late at now: no
// later than one reconcile (within) after its writer's deadline. A record
// without a deadline (an earlier release's) may be.
func (w Record) reportable(now time.Time, within time.Duration) bool {
	return w.before(now, within)
}

// before says whether t comes before the writer's deadline, plus clock
// skew and margin. No deadline (an earlier release's record) bounds
// nothing; one that does not parse (edited by hand) admits nothing.
func (w Record) before(t time.Time, margin time.Duration) bool {
	if w.Until == "" {
		return true
	}
	until, err := time.Parse(time.RFC3339Nano, w.Until)
	return err == nil && !t.After(until.Add(maxClockSkew+margin))
}

// changed are the keys whose value differs between two flattened trees,
// present in one only included.
func changed(then, now map[string]any) []string {
	var out []string
	for k, v := range now {
		if was, ok := then[k]; !ok || !reflect.DeepEqual(was, v) {
			out = append(out, k)
		}
	}
	for k := range then {
		if _, ok := now[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// inTime says whether a version created at created may be the record's
// write: before its writer gave up, allowing for clock skew. A record
// without Until (an earlier release's) bounds nothing.
func (w Record) inTime(created time.Time) bool {
	return w.before(created, 0)
}

// report is the part of the recorded write's plan that its report needs: its
// actions, the token record only when the path shows it. An unlisted
// record's field actions are read off the versions it changed (written,
// and before, nil for a new path).
func (w Record) report(tokenRecorded bool, written, before *vaultkv.Secret) Plan {
	p := Plan{CAS: w.Version - 1}
	actions := w.Actions
	if w.Unlisted && written != nil {
		actions = unlistedActions(w.Token, written, before)
	}
	for name, keys := range actions {
		if name == ActionRecordToken && !tokenRecorded {
			continue
		}
		if len(keys) == 0 {
			p.Actions = append(p.Actions, Action{Name: name})
		}
		for _, k := range keys {
			p.Actions = append(p.Actions, Action{Name: name, Key: k})
		}
	}
	sortActions(p.Actions)
	return p
}

// unlistedActions are the field actions a write made, read off the
// version it wrote and the one before: a key it added was created, one it
// removed pruned, one it changed rotated when it recorded a token, else
// updated.
func unlistedActions(token string, written, before *vaultkv.Secret) map[string][]string {
	var was map[string]any
	if before != nil {
		was = before.Data
	}
	then, now := templating.Flatten(was), templating.Flatten(written.Data)
	out := map[string][]string{}
	if token != "" {
		out[ActionRecordToken] = []string{}
	}
	for _, k := range changed(then, now) {
		_, had := then[k]
		_, has := now[k]
		name := ActionUpdateField
		switch {
		case !had:
			name = ActionCreateField
		case !has:
			name = ActionDeleteField
		case token != "":
			name = ActionRotate
		}
		out[name] = append(out[name], k)
	}
	return out
}

// rotated says whether the write applied a rotation the object still
// declares and the path does not record yet: one for the declared token
// that the path does not carry, or, without a token, one of the declared
// period whose time the path does not carry. Its keys are rotated, only
// the record is left: a shard move never rotates twice.
func (w Record) rotated(declared declaredRotation, path *vaultkv.Secret) bool {
	if w.Token != "" {
		return w.Token == declared.token && path.CustomMetadata[ohmlabv1alpha1.RotationTokenMetadataKey] != declared.token
	}
	return declared.period && w.RotatedAt != "" && path.CustomMetadata[ohmlabv1alpha1.RotatedAtMetadataKey] != w.RotatedAt
}

// readable says whether a version was read with its data.
func readable(s *vaultkv.Secret) bool {
	return s != nil && s.Exists && !s.Deleted
}

// staleCopy says whether the path's last recorded write was made by a newer
// generation of this object than seed: seed is a stale copy (a process whose
// cache lags behind another's during a shard move), and planning from it
// could undo that write or rotate for an older token.
func staleCopy(seed *ohmlabv1alpha1.VaultSeed, path *vaultkv.Secret) bool {
	w, ok := RecordOn(path.CustomMetadata)
	return ok && seed.UID != "" && w.UID == string(seed.UID) && w.Generation > seed.Generation
}

// MarkWith is the custom_metadata apply merges before p's data write: the
// plan's own (the owner marker) and the write's record w, in one request.
func (p Plan) MarkWith(w Record) map[string]string {
	md := w.metadata()
	maps.Copy(md, p.Mark)
	return md
}

// Voids says whether cur, the record a path holds now, is still w: another
// writer's record (a second process, during a shard move) is never voided.
func (w Record) Voids(cur Record) bool {
	return cur.Version == w.Version && cur.UID == w.UID && cur.Until == w.Until
}

// VoidMetadata is the custom_metadata that voids w, a write Vault refused,
// so that no later version (a person's, made while the controller waits)
// is taken for it. It keeps what a successor needs of a rotation.
func (w Record) VoidMetadata() map[string]string {
	return map[string]string{intentKey(0): asciiJSON(Record{Version: w.Version, UID: w.UID, Token: w.Token, RotatedAt: w.RotatedAt, Rotated: w.Rotated, Void: true})}
}

// RecordVersions are the versions of the path that tell whether the write
// record on it landed: the version it names, and the one before (nil for a
// write that created the path).
type RecordVersions struct {
	Written, Before *vaultkv.Secret
}

// Late is a write of the object that landed and that its writer did not
// report (it was killed, lost its Lease, or lost the write's answer): the
// reconcile reports it as its writer would have, with an event and the
// write metric.
type Late struct {
	// Version is the KV version the write made.
	Version int
	// Plan holds the write's actions, for the event.
	Plan Plan
}

// recordOnPath is the write record on the path when it is one of this
// object's path (owner marker) that a reconcile checks.
func (in Input) recordOnPath(path *vaultkv.Secret) (Record, bool) {
	w, ok := RecordOn(path.CustomMetadata)
	if !in.CheckRecord || !ok || !path.Exists || path.Deleted || path.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey] != seeds.Owner(in.Seed) {
		return Record{}, false
	}
	return w, true
}

// rotationRecorded is the rotation a writer found landed and whose token it
// did not record, whether or not its own write did: it is not made again.
func (in Input) rotationRecorded(w Record, path *vaultkv.Secret) (*Record, bool) {
	if w.Rotated > 0 && w.Rotated <= path.Version && w.rotated(in.declared(), path) {
		return &Record{Version: w.Rotated, Token: w.Token, RotatedAt: w.RotatedAt}, true
	}
	return nil, false
}

// reportedAlready says whether the recorded write needs no report: another
// object's (one deleted and created again under the same name), one the
// caller holds unreported, or one status tells of.
func (in Input) reportedAlready(w Record) bool {
	return w.UID != string(in.Seed.UID) || in.Unreported || w.reported(in.Seed.Status.Version, in.Managed)
}

// recordToCheck is the record on the path whose versions Observe reads:
// one past which the path is, not voided, and either not reported or
// carrying the declared rotation token the path does not (a rotation is
// never made twice).
func (in Input) recordToCheck(path *vaultkv.Secret) (Record, bool) {
	w, ok := in.recordOnPath(path)
	if !ok || staleCopy(in.Seed, path) {
		return Record{}, false
	}
	if _, ok := in.rotationRecorded(w, path); ok || w.Void || path.Version < w.Version {
		return Record{}, false
	}
	if in.reportedAlready(w) && !w.rotated(in.declared(), path) {
		return Record{}, false
	}
	return w, true
}

// landed returns the recorded write of the object when it landed and
// either status does not tell of it or its rotation token is left to
// record, nil otherwise; and the write to report late, nil when none. Its
// keys are not made managed: only a write whose answer the controller saw
// makes a key one a prune may remove (docs/DESIGN.md, "Provenance").
func (in Input) landed(o Observed) (*Record, *Late) {
	w, ok := in.recordOnPath(o.Path)
	if !ok {
		return nil, nil
	}
	if r, ok := in.rotationRecorded(w, o.Path); ok {
		return r, nil
	}
	if o.Record == nil {
		return nil, nil
	}
	written, before := o.Record.Written, o.Record.Before
	rotated := w.rotated(in.declared(), o.Path)
	if !readable(written) || w.Version > 1 && !readable(before) {
		// Not knowing whether the rotation landed must not rotate again:
		// the token is recorded.
		if rotated {
			return &w, nil
		}
		return nil, nil
	}
	if !w.landedIn(written, before) {
		return nil, nil
	}
	// A status cleared after a first write is at the version it was
	// planned on too: a write is reported late only within one reconcile
	// of its writer's deadline, when a writer that stopped has been
	// replaced; after that, it is history.
	var late *Late
	if !in.reportedAlready(w) && w.reportable(in.Now, in.ReportWithin) {
		late = &Late{Version: w.Version, Plan: w.report(o.Path.CustomMetadata[ohmlabv1alpha1.RotationTokenMetadataKey] == w.Token, written, before)}
	}
	return &w, late
}
