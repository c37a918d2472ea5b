package planner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// Actions of a plan. They name the changes in the Drifted condition, in
// events and in the ohmlab_planned_changes metric (product document,
// "Conditions").
const (
	ActionCreate      = "create" // the path does not exist: create it with its owner marker
	ActionAdopt       = "adopt"  // the path has no owner marker: record ours, leave the data alone
	ActionCreateField = templating.ActionCreateField
	ActionUpdateField = templating.ActionUpdateField
	ActionDeleteField = "delete-field" // prune a managed key that data no longer declares
	ActionRotate      = templating.ActionRotate
	ActionRecordToken = "record-token" // record rotate.token after the rotated keys are written
	// ActionRecordRotation records ohmlab.fr/rotated-at alone: rotate.every's
	// period starts on a path that has no time recorded, or the time of a
	// rotation that landed without it is recorded.
	ActionRecordRotation = "record-rotation"
	ActionDelete         = "delete" // remove the path and all its versions (deletionPolicy Delete)
)

// actionOrder is the order in which summaries, metrics and `ohmlab plan`
// list actions.
var actionOrder = []string{ActionCreate, ActionAdopt, ActionCreateField, ActionUpdateField, ActionDeleteField, ActionRotate, ActionRecordToken, ActionRecordRotation, ActionDelete}

// ActionOrder returns every action name, in the order summaries list them.
func ActionOrder() []string { return slices.Clone(actionOrder) }

// Action is one planned change; Key is the dotted key path for field
// actions and "" for path actions.
type Action struct {
	Name string
	Key  string
}

// Outcome is what a plan says to do.
type Outcome int

const (
	// OutcomeApply: write what the plan holds (possibly nothing).
	OutcomeApply Outcome = iota
	// OutcomeWait: a reference source is missing or empty (RefPending);
	// the object retries with backoff. When the copy is missing on the path
	// nothing is written; when it exists, the rest of the plan is applied.
	OutcomeWait
	// OutcomeStop: the object cannot go on as declared (invalid, on a
	// reference cycle, a Delete not allowed, OwnedByAnother, PathDeleted,
	// or keys only a person can unblock: InvalidSpec); it is checked again
	// at the next resync or change. The keys that can be computed are
	// still applied: a stall on one key does not freeze the path.
	OutcomeStop
	// OutcomeNewer: a newer generation of the object wrote the path; this
	// copy writes nothing and waits, without backoff, for that generation
	// to reach the cache.
	OutcomeNewer
)

// Desired is what the object declares, with what the controller knows of
// it (its owner marker and status.managedKeys).
type Desired struct {
	// Owner is the owner marker of this object, "<namespace>/<name>".
	Owner string
	// Analysis is templating's analysis of the object, without problems.
	Analysis templating.Analysis
	// RotationToken is spec.rotate.token, "" without rotation.
	RotationToken string
	// Period is spec.rotate.every, 0 without one.
	Period time.Duration
	// Now is the planner's clock: when Period has passed since the time
	// the path records, and the time a rotation records.
	Now time.Time
	// Prune is spec.prune.
	Prune bool
	// ManagedKeys are the key names of status.managedKeys.
	ManagedKeys []string
	// WrittenAt is, for each managed key, a KV version of the path that
	// holds the value the controller last wrote to it
	// (status.managedKeys[].version; 0: unknown).
	WrittenAt map[string]int
	// CreatedAt is, for each managed key, the created_time of its
	// WrittenAt version (status.managedKeys[].createdTime): the record holds
	// only while that version has it. "" when an earlier release recorded
	// the key: its number is taken as that release took it.
	CreatedAt map[string]string
	// Version is the path's KV version that status last recorded
	// (status.version): recorded versions are carried forward (see
	// [carried]) only when the path has moved past it.
	Version int
}

// Observed is what one reconcile read from Vault.
type Observed struct {
	// Path is the object's own path.
	Path *vaultkv.Secret
	// Refs are the paths the object references (Analysis.RefPaths). A
	// path missing from the map is treated as absent.
	Refs map[string]*vaultkv.Secret
	// Written are the versions of the path that a prune or a carry
	// compares with ([versionReads]), by version. A version missing from
	// the map is one that was not read or can no longer be read.
	Written map[int]*vaultkv.Secret
	// LandedToken is the rotation token of a recorded write that landed
	// (intent.go): the keys it rotated are written, its token is not
	// recorded yet. "" when none.
	LandedToken string
	// LandedAt is the version that rotation made.
	LandedAt int
	// LandedRotatedAt is the time that landed write records (Record's
	// RotatedAt), "" when none.
	LandedRotatedAt string
	// Record holds the versions that tell whether the write record on the
	// path landed, nil when it needs no check.
	Record *RecordVersions
}

// Plan is what a reconcile does to one path. It holds values only in Data,
// which is written to Vault and never logged.
type Plan struct {
	Outcome Outcome
	// Reason and Message explain OutcomeWait and OutcomeStop; Message names
	// keys and paths, never values.
	Reason  string
	Message Message
	// Actions are the planned changes, in actionOrder then key order.
	Actions []Action
	// Mark is the custom_metadata to merge before the data write (the owner
	// marker, and the rotation token of a new path); nil when none.
	Mark map[string]string
	// Data is the whole tree to write with check-and-set; nil when the data
	// does not change.
	Data map[string]any
	// CAS is the version the data write names (the version read).
	CAS int
	// Base is the created_time of version CAS (zero when the path has no
	// version): a record carried to CAS takes it.
	Base time.Time
	// RecordToken is the rotation token to record after the data write, ""
	// when none.
	RecordToken string
	// RecordRotatedAt is the time to record under
	// ohmlabv1alpha1.RotatedAtMetadataKey with RecordToken, after the data
	// write (RFC 3339, UTC): the plan's rotation, a landed one's, or the
	// start of rotate.every's period; "" when none.
	RecordRotatedAt string
	// Rotated is the version at which the rotation for RecordToken (or, with
	// no token, RecordRotatedAt) landed, when the plan only records it
	// (Observed.LandedAt); 0 otherwise.
	Rotated int
	// ManagedKeys are the key names of status.managedKeys after the plan
	// is applied; the keys of Actions are written by it, the others keep
	// their Desired.WrittenAt, or CAS for the keys of Carried.
	ManagedKeys []string
	// Carried are the managed keys, not written by the plan, whose
	// recorded version moves up to CAS: the path holds the same value at
	// CAS as at that older version (sorted).
	Carried []string
	// Kept are managed keys that data no longer declares and that prune
	// leaves alone, with why: they are no longer managed.
	Kept []Kept
	// Late is a write of the object that landed unreported, reported with
	// this plan; nil when none.
	Late *Late
	// Vanished: the path is read absent although status says the object
	// wrote it (status.version or managed keys), whatever the plan does
	// about it. The plan creates it anew with new values, as it would a
	// new path; a caller that sees many of a target's paths vanish at once
	// holds such writes back (Vault lost data rather than a person deleted
	// one path).
	Vanished bool
}

// Empty says whether applying the plan changes nothing in Vault.
func (p Plan) Empty() bool { return len(p.Actions) == 0 }

// Creates says whether the plan creates the path: it was read absent.
func (p Plan) Creates() bool {
	return slices.ContainsFunc(p.Actions, func(a Action) bool { return a.Name == ActionCreate })
}

// Counts returns the number of planned changes per action.
func (p Plan) Counts() map[string]int {
	c := make(map[string]int, len(actionOrder))
	for _, a := range p.Actions {
		c[a.Name]++
	}
	return c
}

// EventReason names what the plan mainly did, for the event of its write.
func (p Plan) EventReason() string {
	c := p.Counts()
	switch {
	case c[ActionCreate] > 0:
		return ohmlabv1alpha1.EventReasonCreated
	case c[ActionRotate] > 0 || c[ActionRecordToken] > 0 || p.Rotated > 0:
		return ohmlabv1alpha1.EventReasonRotated
	case c[ActionAdopt] > 0:
		return ohmlabv1alpha1.EventReasonAdopted
	}
	return ohmlabv1alpha1.EventReasonUpdated
}

// WriteNote is the note of the event of the plan's write: what it changed
// and the KV version it wrote.
func (p Plan) WriteNote(version int) Message {
	return p.SummaryMessage().WithTail(fmt.Sprintf(" (KV version %d)", version))
}

// maxKeysInSummary bounds the key names a summary lists per action.
const maxKeysInSummary = 10

// Summary sums the changes by action and names the keys behind them, for
// example "1 adopt, 1 update-field (keycloak.clientSecret)". It never holds
// a value (product document, "Conditions": Drifted).
func (p Plan) Summary() string { return p.SummaryMessage().String() }

// SummaryMessage is Summary as a Message listing one item per action.
func (p Plan) SummaryMessage() Message {
	keys := map[string][]string{}
	counts := p.Counts()
	for _, a := range p.Actions {
		if a.Key != "" {
			keys[a.Name] = append(keys[a.Name], a.Key)
		}
	}
	var parts []string
	for _, name := range actionOrder {
		n := counts[name]
		if n == 0 {
			continue
		}
		part := fmt.Sprintf("%d %s", n, name)
		if ks := keys[name]; len(ks) > 0 {
			more := ""
			if len(ks) > maxKeysInSummary {
				more = fmt.Sprintf(", and %d more", len(ks)-maxKeysInSummary)
				ks = ks[:maxKeysInSummary]
			}
			part += " (" + strings.Join(ks, ", ") + more + ")"
		}
		parts = append(parts, part)
	}
	return List("", parts, ", ", "")
}

// decide decides what one reconcile does to a path (product document, "What
// the controller does with a path"). It reads and writes nothing; the values
// it generates come from g (random, hex and uuid from g.Rand; age keys and
// bcrypt salts from crypto/rand, see templating.Generator). The error is
// returned only when values cannot be generated (a failing Rand, or
// *templating.StoppedError when ctx ends before they are); every problem of
// the object or of the path is an outcome.
func decide(ctx context.Context, d Desired, o Observed, g templating.Generator) (Plan, error) {
	p, err := decidePath(ctx, d, o, g)
	if err != nil {
		return Plan{}, err
	}
	p.Vanished = d.vanished(o.Path)
	return p, nil
}

// vanished says whether path, as read, is missing although status says the
// object wrote it. Told before ownRecords, which forgets every record of a
// path without the object's owner marker, as an absent path is.
func (d Desired) vanished(path *vaultkv.Secret) bool {
	return (path == nil || !path.Exists) && (d.Version > 0 || len(d.ManagedKeys) > 0)
}

// decidePath is decide without the Vanished signal.
func decidePath(ctx context.Context, d Desired, o Observed, g templating.Generator) (Plan, error) {
	path := o.Path
	if path == nil {
		path = &vaultkv.Secret{}
	}
	owner := path.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey]
	d = d.ownRecords(owner, path, o.Written)
	if stop, ok := pathStop(d, owner, path); ok {
		return stop, nil
	}
	p := Plan{CAS: path.Version, Base: path.Created}
	p.markPath(d, owner, path)
	regenerate := p.rotation(d, owner, path, o)

	current := templating.Flatten(path.Data)
	// Pruned keys are taken out before Fill, so that a declared key can
	// take the place of a managed key it replaces (a leaf a becoming a map
	// a.b, or the reverse) instead of stalling on a shape conflict.
	var pruned map[string]bool
	if d.Prune {
		pruned, p.Kept = pruneDecisions(d, current, o.Written)
	}
	remaining := withoutKeys(current, pruned)
	refs, sources, pending, unusable := resolveRefs(d.Analysis, o.Refs)
	if lacksPendingCopy(pending, remaining) {
		// The plan holds back every key (below), so the fill only tells
		// what waits: a dry one, without the bcrypt hash of a password
		// that is never written (a dependent reconciled before its
		// source's first write would hash for nothing).
		g.Dry = true
	}
	// Hidden: the keys with a dot in their name (and empty maps) that
	// Flatten leaves out are in the tree the plan writes back, and no
	// declared key is created in their place.
	fill, err := g.Fill(ctx, d.Analysis, templating.FillInput{Current: remaining, Hidden: templating.Hidden(path.Data), Regenerate: regenerate, Refs: refs, Sources: sources, Object: d.Owner,
		Checked: checkedPairs(d, path, current, o.Written)})
	if err != nil {
		return Plan{}, err
	}
	h := heldKeys(d.Analysis, fill.Held, remaining, pending, unusable)
	if kept := composedKept(d, current, o.Written, fill.Changes); len(kept) > 0 {
		fill.Changes = slices.DeleteFunc(fill.Changes, func(c templating.Change) bool {
			return kept[c.Key] || kept[d.Analysis.DerivesFrom(c.Key)]
		})
		for _, k := range slices.Sorted(maps.Keys(kept)) {
			h.stalled = append(h.stalled, composedKeptMessage(k, d.Analysis.Path))
		}
	}
	if h.copyMissing {
		held := hold(d, path, OutcomeWait, ohmlabv1alpha1.ReasonRefPending, "")
		held.Message = waitingMessage(h.waiting)
		return held, nil
	}
	switch {
	case len(h.stalled) > 0:
		p.Outcome, p.Reason, p.Message = OutcomeStop, ohmlabv1alpha1.ReasonInvalidSpec, List("", h.stalled, "; ", "")
	case len(h.waiting) > 0:
		p.Outcome, p.Reason, p.Message = OutcomeWait, ohmlabv1alpha1.ReasonRefPending, waitingMessage(h.waiting)
	}
	p.write(d, path, current, fill, pruned, o.Written)
	return p, nil
}

// ownRecords is d with only the records that are the controller's on this
// path. A path without this object's owner marker is not the path it
// wrote, or no longer is (deleted with its metadata and put again, or
// another object's): none of its values is the controller's. Nor are the
// values of a record that names a version the path does not have as
// recorded.
func (d Desired) ownRecords(owner string, path *vaultkv.Secret, written map[int]*vaultkv.Secret) Desired {
	if owner != d.Owner {
		d = d.forget(d.ManagedKeys)
	}
	return d.forget(staleRecords(d, path, written))
}

// pathStop is the plan of a path the object cannot write: another object's
// (OwnedByAnother), or one whose latest version is deleted (PathDeleted).
func pathStop(d Desired, owner string, path *vaultkv.Secret) (Plan, bool) {
	switch {
	case owner != "" && owner != d.Owner:
		return hold(d, path, OutcomeStop, ohmlabv1alpha1.ReasonOwnedByAnother, ownedByAnotherMessage(owner, d.Analysis.Path)), true
	case path.Deleted:
		return hold(d, path, OutcomeStop, ohmlabv1alpha1.ReasonPathDeleted,
			fmt.Sprintf("the latest version (%d) of the path is deleted: undelete it (vault kv undelete -versions=%d %s), or delete the path's metadata (vault kv metadata delete %s) to have it created anew", path.Version, path.Version, d.Analysis.Path, d.Analysis.Path)), true
	}
	return Plan{}, false
}

// markPath plans the owner marker of a path that lacks it: created with a
// new path, or written on a path made by hand (adoption), each with the
// rotation token recorded, so that neither rotates: rotation starts with
// the next token. Adoption leaves the data alone (product document,
// "Migrating": the takeover writes only the markers).
func (p *Plan) markPath(d Desired, owner string, path *vaultkv.Secret) {
	switch {
	case !path.Exists:
		p.Actions = append(p.Actions, Action{Name: ActionCreate})
	case owner == "":
		p.Actions = append(p.Actions, Action{Name: ActionAdopt})
	default:
		return
	}
	p.Mark = map[string]string{ohmlabv1alpha1.OwnerMetadataKey: d.Owner}
	if d.RotationToken != "" {
		p.Mark[ohmlabv1alpha1.RotationTokenMetadataKey] = d.RotationToken
	}
	if d.Period > 0 {
		// The period starts with the path's values, or with the adoption.
		p.Mark[ohmlabv1alpha1.RotatedAtMetadataKey] = d.rotatedAt()
	}
}

// rotation plans the record of a rotation and returns the keys to
// regenerate: once for a declared token the object's path does not carry
// (at once, whatever the period: it starts again), once rotate.every has
// passed since the time the path records. A write that rotated landed and
// its record did not (its process stopped, or another process under
// another Lease is about to record it): the record is made, nothing
// rotates twice. A period on a path that records no time (declared on a
// path the controller already owned, or its time edited by hand) starts
// now, without rotating: rotating at once is asked for with a new token.
func (p *Plan) rotation(d Desired, owner string, path *vaultkv.Secret, o Observed) []string {
	if owner == "" {
		// Created or adopted: markPath records the token and the time.
		return nil
	}
	recorded := path.CustomMetadata[ohmlabv1alpha1.RotatedAtMetadataKey]
	tokenDue := d.RotationToken != "" && path.CustomMetadata[ohmlabv1alpha1.RotationTokenMetadataKey] != d.RotationToken
	if !tokenDue && d.Period > 0 && o.LandedToken == "" && o.LandedRotatedAt != "" && o.LandedRotatedAt != recorded {
		p.Rotated, p.RecordRotatedAt = o.LandedAt, o.LandedRotatedAt
		return nil
	}
	at, err := time.Parse(time.RFC3339, recorded)
	switch {
	case tokenDue:
		p.RecordToken, p.RecordRotatedAt = d.RotationToken, d.rotatedAt()
		if o.LandedToken == d.RotationToken {
			p.Rotated = o.LandedAt
			if o.LandedRotatedAt != "" {
				p.RecordRotatedAt = o.LandedRotatedAt
			}
			return nil
		}
		return d.Analysis.RotationKeys
	case d.Period > 0 && err != nil:
		p.RecordRotatedAt = d.rotatedAt()
	case d.Period > 0 && !d.Now.Before(at.Add(d.Period)):
		p.RecordRotatedAt = d.rotatedAt()
		return d.Analysis.RotationKeys
	}
	return nil
}

// rotatedAt is the time a rotation planned now records.
func (d Desired) rotatedAt() string {
	return d.Now.UTC().Format(time.RFC3339)
}

// withoutKeys is current without the keys of drop (current itself when
// there is none).
func withoutKeys(current map[string]any, drop map[string]bool) map[string]any {
	if len(drop) == 0 {
		return current
	}
	out := maps.Clone(current)
	for k := range drop {
		delete(out, k)
	}
	return out
}

// held is why the keys a fill held back wait or stall.
type held struct {
	// waiting are the references waited for ("mount/path#key (why)"),
	// sorted; stalled the messages of keys only a person can unblock.
	waiting, stalled []string
	// copyMissing: a reference waits and its copy is not on the path, so
	// nothing is written.
	copyMissing bool
}

// heldKeys sorts the keys that cannot be computed. A reference that waits
// for its source writes nothing while its copy is missing (product
// document, "References follow their source"); otherwise the rest of the
// path is still maintained.
func heldKeys(a templating.Analysis, fillHeld []templating.Held, remaining map[string]any, pending map[string][]string, unusable map[string]string) held {
	var h held
	isHeld := map[string]bool{}
	for _, k := range fillHeld {
		isHeld[k.Key] = true
	}
	for _, k := range fillHeld {
		if why, ok := unusable[k.Key]; ok {
			h.stalled = append(h.stalled, why)
			continue
		}
		if isHeld[a.DerivesFrom(k.Key)] {
			// Held because the key it is computed from is: that key's
			// reason says why both wait (a copy of a key held by a shape
			// conflict does not wait for a source).
			continue
		}
		if whys, ok := pendingReasons(a, k, pending, isHeld); ok {
			if len(whys) == 0 {
				continue // it waits only for keys held for their own reason
			}
			h.waiting = append(h.waiting, whys...)
			if _, present := remaining[k.Key]; !present {
				h.copyMissing = true
			}
			continue
		}
		h.stalled = append(h.stalled, stallMessage(k, a.Path))
	}
	slices.Sort(h.waiting)
	h.waiting = slices.Compact(h.waiting)
	return h
}

// write plans the data write: the tree the path holds, pruned and with the
// fill's changes, written when anything changes or the path is new; and
// the managed keys after it.
func (p *Plan) write(d Desired, path *vaultkv.Secret, current map[string]any, fill templating.FillResult, pruned map[string]bool, written map[int]*vaultkv.Secret) {
	tree := templating.CloneTree(path.Data)
	for k := range pruned {
		p.Actions = append(p.Actions, Action{Name: ActionDeleteField, Key: k})
		templating.DeletePath(tree, k)
	}
	for _, c := range fill.Changes {
		p.Actions = append(p.Actions, Action{Name: c.Action, Key: c.Key})
		templating.SetPath(tree, c.Key, fill.Values[c.Key])
	}
	if p.RecordToken != "" {
		p.Actions = append(p.Actions, Action{Name: ActionRecordToken})
	}
	if p.RecordRotatedAt != "" && p.RecordToken == "" && !rotates(fill.Changes) {
		p.Actions = append(p.Actions, Action{Name: ActionRecordRotation})
	}
	if len(fill.Changes) > 0 || len(pruned) > 0 || !path.Exists {
		p.Data = tree
	}
	p.ManagedKeys = managedKeys(d.ManagedKeys, current, fill.Changes, pruned, p.Kept)
	p.Carried = carried(d, p.ManagedKeys, fill.Changes, current, path.Version, written)
	sortActions(p.Actions)
}

// lacksPendingCopy says whether the path lacks the copy of a reference
// whose source is pending: Fill holds that key (its source is not in the
// refs it is given), and the plan then holds back everything.
func lacksPendingCopy(pending map[string][]string, current map[string]any) bool {
	for k := range pending {
		if _, present := current[k]; !present {
			return true
		}
	}
	return false
}

// hold is a plan that writes nothing and leaves the managed keys as they
// are.
// Its Base is left zero: a plan that stops before it looks at the path's
// values tells nothing of its records.
func hold(d Desired, path *vaultkv.Secret, o Outcome, reason, message string) Plan {
	return Plan{Outcome: o, Reason: reason, Message: Text(message), CAS: path.Version, ManagedKeys: d.ManagedKeys}
}

// waitingMessage is RefPending's message: the references waited for,
// "mount/path#key (why)", sorted.
func waitingMessage(waiting []string) Message {
	return List("waiting for ", waiting, ", ", "")
}

// ownedByAnotherMessage names the owner and the command that hands the path
// over (product document, "Conditions": OwnedByAnother).
func ownedByAnotherMessage(owner, path string) string {
	return fmt.Sprintf("the path is owned by %s (custom_metadata %s): delete one of the two objects, or hand the path over with: vault kv metadata patch -remove-custom-metadata=%s %s",
		owner, ohmlabv1alpha1.OwnerMetadataKey, ohmlabv1alpha1.OwnerMetadataKey, path)
}

// pruneCandidates are the managed keys that data no longer declares and
// that the path still holds.
func pruneCandidates(d Desired, current map[string]any) []string {
	var out []string
	for _, k := range d.ManagedKeys {
		if _, declared := d.Analysis.Leaves[k]; declared {
			continue
		}
		if _, present := current[k]; present {
			out = append(out, k)
		}
	}
	return out
}

// composedKept are the composed keys the fill changes whose value on the
// path the controller may not have composed, so that a person may have
// typed it: it is kept.
// An earlier release stored such a leaf's text as a plain value, seeded
// once, so a value a person typed over that text since must not be taken
// for a stale composition. A key holding the declared text is composed; a
// value the controller wrote (its record's version holds the same value)
// follows its sources, and so does a hand edit of a value the controller
// composed there; any other value (over the declared text, on a path the
// controller did not write, or whose record can no longer be read) is kept.
func composedKept(d Desired, current map[string]any, written map[int]*vaultkv.Secret, changes []templating.Change) map[string]bool {
	var kept map[string]bool
	h := history{written: written}
	for _, c := range changes {
		k, l := c.Key, d.Analysis.Leaves[c.Key]
		cur, present := current[k]
		// A key that already holds its composition has no change: it is in
		// sync, whoever wrote it.
		if l.Kind != templating.KindCompose || !present || templating.Stringify(cur) == l.Declared() {
			continue
		}
		v := d.WrittenAt[k]
		then, readable := h.at(v)
		was, ok := then[k]
		if v > 0 && readable && ok && templating.Stringify(was) != l.Declared() {
			continue
		}
		if kept == nil {
			kept = map[string]bool{}
		}
		kept[k] = true
	}
	return kept
}

// composedKeptMessage says why a composed key is kept, and what to do.
func composedKeptMessage(key, path string) string {
	return fmt.Sprintf("%s: holds a value the controller did not compose (typed over the text an earlier release stored, or on a path it did not write), "+
		"which is kept (a value on the path is never overwritten): delete the key (%s) and the next resync composes it", key, deleteKeyCommand(path, key))
}

// deleteKeyCommand is the command that deletes key of path by hand: a JSON
// merge patch setting it to null.
func deleteKeyCommand(path, key string) string {
	segs := strings.Split(key, ".")
	patch := "null"
	for i := len(segs) - 1; i >= 0; i-- {
		patch = fmt.Sprintf(`{%q:%s}`, segs[i], patch)
	}
	return fmt.Sprintf("echo '%s' | vault kv patch %s -", patch, path)
}

// versionReads returns the older versions of the path to read, sorted, one
// read per distinct version: those a prune compares its candidates with
// (product document, "Pruning": keys written by anybody else are never
// removed), and, when the path has moved past status.version, those of the
// managed keys it still holds, to carry them forward ([carried]). A quiet
// resync reads none: once carried, every recorded version is the path's.
func versionReads(d Desired, path *vaultkv.Secret) []int {
	if path == nil || !path.Exists || path.Deleted {
		return nil
	}
	current := templating.Flatten(path.Data)
	candidate := map[string]bool{}
	if d.Prune {
		for _, k := range pruneCandidates(d, current) {
			candidate[k] = true
		}
	}
	moved := path.Version != d.Version
	set := map[int]bool{}
	for _, k := range d.ManagedKeys {
		v := d.WrittenAt[k]
		if _, present := current[k]; !present || v <= 0 || v >= path.Version {
			// A record past the path's version names a version the path
			// does not have (staleRecords): nothing to read.
			continue
		}
		if candidate[k] || moved && v < path.Version || composedOver(d, k, current) {
			set[v] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// composedOver says whether key is a composed key whose value is not its
// declared text: whether the controller composed it is told by the version
// its record names (composedKept).
func composedOver(d Desired, key string, current map[string]any) bool {
	l, ok := d.Analysis.Leaves[key]
	return ok && l.Kind == templating.KindCompose && templating.Stringify(current[key]) != l.Declared()
}

// pruneDecisions splits the prune candidates into the keys to remove, whose
// value is still the one the controller wrote at Desired.WrittenAt, and the
// keys to keep, in candidate order, with why: changed since by someone
// else, or the controller cannot tell (the version is unknown or can no
// longer be read).
func pruneDecisions(d Desired, current map[string]any, written map[int]*vaultkv.Secret) (map[string]bool, []Kept) {
	pruned := map[string]bool{}
	var kept []Kept
	h := history{written: written}
	for _, k := range pruneCandidates(d, current) {
		v := d.WrittenAt[k]
		then, readable := h.at(v)
		switch was, ok := then[k]; {
		case v <= 0:
			kept = append(kept, Kept{Key: k, Why: keptUnknownVersion})
		case !readable:
			kept = append(kept, Kept{Key: k, Why: keptVersionGone(v)})
		case ok && reflect.DeepEqual(was, current[k]):
			pruned[k] = true
		default:
			kept = append(kept, Kept{Key: k, Why: keptChanged})
		}
	}
	return pruned, kept
}

// pendingReasons says whether a held key is a reference or a composed
// value waiting for its sources, and describes each wait ("mount/path#key
// (why)"): the sources on other paths that pending names, and the keys of
// the own path that are empty, but for those held for a reason of their
// own (that reason says why both wait).
func pendingReasons(a templating.Analysis, h templating.Held, pending map[string][]string, isHeld map[string]bool) ([]string, bool) {
	l := a.Leaves[h.Key]
	empties := templating.EmptySources(h.Err)
	if l.Kind != templating.KindRef && l.Kind != templating.KindCompose || len(empties) == 0 {
		return nil, false
	}
	whys := slices.Clone(pending[h.Key])
	own := map[string]bool{}
	for _, r := range l.Refs() {
		if r.Path == a.Path {
			own[r.Key] = true
		}
	}
	for _, e := range empties {
		// A reference to the object's own path whose source is empty
		// waits like any other reference (RefPending).
		if own[e.Source] && !isHeld[e.Source] {
			whys = append(whys, fmt.Sprintf("%s#%s (empty)", a.Path, e.Source))
		}
	}
	return whys, true
}

// resolveRefs returns the source value of every reference to another path:
// of a plain reference by the referring key (refs), of a composed value's
// references by reference (sources); why the others cannot be resolved yet
// ("mount/path#key (why)", one per source), by the referring key; and the
// keys that waiting cannot resolve, with the message of their stall: those
// with a source key that is a map, not a value.
func resolveRefs(a templating.Analysis, paths map[string]*vaultkv.Secret) (refs map[string]string, sources map[templating.Ref]string, pending map[string][]string, unusable map[string]string) {
	refs, sources, pending, unusable = map[string]string{}, map[templating.Ref]string{}, map[string][]string{}, map[string]string{}
	flat := map[string]map[string]any{}
	for _, k := range a.Keys {
		l := a.Leaves[k]
		var stalls []string
		for _, r := range l.Refs() {
			if r.Path == a.Path {
				continue
			}
			v, why, stall := resolveRef(r, paths[r.Path], flat)
			switch {
			case stall != "":
				stalls = append(stalls, fmt.Sprintf("%s: %s", k, stall))
			case why != "":
				pending[k] = append(pending[k], why)
			case l.Kind == templating.KindRef:
				refs[k] = v
			default:
				sources[r] = v
			}
		}
		if stalls != nil {
			unusable[k] = strings.Join(stalls, "; ")
		}
	}
	return refs, sources, pending, unusable
}

// resolveRef is the value of reference r on its path src (flat keeps the
// paths flattened), or why it waits ("mount/path#key (why)"), or the
// message of a source key that is a map, which waiting cannot resolve.
func resolveRef(r templating.Ref, src *vaultkv.Secret, flat map[string]map[string]any) (v, why, stall string) {
	switch {
	case src == nil || !src.Exists:
		return "", r.String() + " (path missing)", ""
	case src.Deleted:
		return "", r.String() + " (latest version deleted)", ""
	}
	values, ok := flat[r.Path]
	if !ok {
		values = templating.Flatten(src.Data)
		flat[r.Path] = values
	}
	value, ok := values[r.Key]
	switch s := templating.Stringify(value); {
	case !ok:
		if node, found := templating.At(src.Data, r.Key); found {
			if _, isMap := node.(map[string]any); isMap {
				return "", "", fmt.Sprintf("%s names %s, which is a map on %s, not a value: a reference copies one value; name one of its keys (<ref:%s#%s.<key>>)",
					r.Template(), r.Key, r.Path, r.Path, r.Key)
			}
		}
		return "", r.String() + " (key missing" + dottedHint(src.Data, r.Key) + ")", ""
	case s == "":
		return "", r.String() + " (empty)", ""
	default:
		return s, "", ""
	}
}

// dottedHint says, for a reference whose source key is missing, that the
// source path has a key whose name has a dot and spells that key: a
// reference reads nested maps only (templating.Flatten), so it waits for
// the nested key.
func dottedHint(tree map[string]any, key string) string {
	for _, h := range templating.Hidden(tree) {
		if h.Path == key && !h.EmptyMap {
			return fmt.Sprintf("; the path has %s, a key whose name has a dot, which is not the nested %s", h.Name, key)
		}
	}
	return ""
}

// fillInCommand is the command that fills key of path in by hand. A nested
// key takes a JSON merge patch: `vault kv patch P a.b=x` would write a key
// named "a.b" beside a, which is not a.b (templating.Flatten).
func fillInCommand(path, key string) string {
	segs := strings.Split(key, ".")
	if len(segs) == 1 {
		return fmt.Sprintf("vault kv patch %s %s=...", path, key)
	}
	patch := `"..."`
	for i := len(segs) - 1; i >= 0; i-- {
		patch = fmt.Sprintf(`{%q:%s}`, segs[i], patch)
	}
	return fmt.Sprintf("echo '%s' | vault kv patch %s -", patch, path)
}

// stallMessage says why a held key waits for a person, naming the keys and
// what to do, never a value.
func stallMessage(h templating.Held, path string) string {
	var empty *templating.EmptySourceError
	var invalid *templating.InvalidValueError
	var shape *templating.ShapeConflictError
	switch {
	case errors.As(h.Err, &empty):
		return fmt.Sprintf("%s: cannot be computed while %s is empty; fill it in (%s)", empty.Key, empty.Source, fillInCommand(path, empty.Source))
	case errors.As(h.Err, &invalid):
		return fmt.Sprintf("%s: cannot be computed: the value of %s on the path %s; that value is kept (a value on the path is never overwritten): replace it (%s)",
			h.Key, invalid.Key, invalid.Reason, fillInCommand(path, invalid.Key))
	case errors.As(h.Err, &shape):
		return fmt.Sprintf("%s: cannot be created without overwriting %s on the path, which is kept (a value on the path is never overwritten): move or delete that key by hand, and the next resync creates %s",
			shape.Key, shape.Conflict, shape.Key)
	}
	return fmt.Sprintf("%s: cannot be computed", h.Key)
}

// managedKeys returns the key names of status.managedKeys after a plan: the
// keys this controller wrote before that are still on the path, neither
// pruned nor kept, and the keys it writes now, sorted.
func managedKeys(before []string, current map[string]any, changes []templating.Change, pruned map[string]bool, kept []Kept) []string {
	set := map[string]bool{}
	for _, k := range before {
		if _, present := current[k]; present && !pruned[k] && !slices.ContainsFunc(kept, func(c Kept) bool { return c.Key == k }) {
			set[k] = true
		}
	}
	for _, c := range changes {
		set[c.Key] = true
	}
	if len(set) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(set))
}

func sortActions(actions []Action) {
	rank := map[string]int{}
	for i, a := range actionOrder {
		rank[a] = i
	}
	slices.SortStableFunc(actions, func(a, b Action) int {
		if d := rank[a.Name] - rank[b.Name]; d != 0 {
			return d
		}
		return strings.Compare(a.Key, b.Key)
	})
}

// rotates says whether changes rotate a key.
func rotates(changes []templating.Change) bool {
	return slices.ContainsFunc(changes, func(c templating.Change) bool { return c.Action == ActionRotate })
}

// RotationRecord is the custom_metadata recorded after the data write: the
// rotation token and the time of the rotation, in one request; nil when
// there is none.
func (p Plan) RotationRecord() map[string]string {
	if p.RecordToken == "" && p.RecordRotatedAt == "" {
		return nil
	}
	md := map[string]string{}
	if p.RecordToken != "" {
		md[ohmlabv1alpha1.RotationTokenMetadataKey] = p.RecordToken
	}
	if p.RecordRotatedAt != "" {
		md[ohmlabv1alpha1.RotatedAtMetadataKey] = p.RecordRotatedAt
	}
	return md
}
