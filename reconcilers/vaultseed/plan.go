package vaultseed

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

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
	ActionDelete      = "delete"       // remove the path and all its versions (deletionPolicy Delete)
)

// actionOrder is the order in which summaries list actions.
var actionOrder = []string{ActionCreate, ActionAdopt, ActionCreateField, ActionUpdateField, ActionDeleteField, ActionRotate, ActionRecordToken, ActionDelete}

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
	// nothing is written, the object retries with backoff.
	OutcomeWait
	// OutcomeStop: the object cannot go on as declared (OwnedByAnother,
	// or Stalled with InvalidSpec); nothing is written until the next
	// resync or a change.
	OutcomeStop
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
	// Prune is spec.prune.
	Prune bool
	// ManagedKeys is status.managedKeys.
	ManagedKeys []string
}

// Observed is what one reconcile read from Vault.
type Observed struct {
	// Path is the object's own path.
	Path *vaultkv.Secret
	// Refs are the paths the object references (Analysis.RefPaths). A
	// path missing from the map is treated as absent.
	Refs map[string]*vaultkv.Secret
}

// Plan is what a reconcile does to one path. It holds values only in Data,
// which is written to Vault and never logged.
type Plan struct {
	Outcome Outcome
	// Reason and Message explain OutcomeWait and OutcomeStop; Message names
	// keys and paths, never values.
	Reason, Message string
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
	// RecordToken is the rotation token to record after the data write, ""
	// when none.
	RecordToken string
	// ManagedKeys is status.managedKeys after the plan is applied.
	ManagedKeys []string
}

// Empty says whether applying the plan changes nothing in Vault.
func (p Plan) Empty() bool { return len(p.Actions) == 0 }

// Counts returns the number of planned changes per action.
func (p Plan) Counts() map[string]int {
	c := make(map[string]int, len(actionOrder))
	for _, a := range p.Actions {
		c[a.Name]++
	}
	return c
}

// maxKeysInSummary bounds the key names a summary lists per action.
const maxKeysInSummary = 10

// Summary sums the changes by action and names the keys behind them, for
// example "1 adopt, 1 update-field (keycloak.clientSecret)". It never holds
// a value (product document, "Conditions": Drifted).
func (p Plan) Summary() string {
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
	return strings.Join(parts, ", ")
}

// plan decides what one reconcile does to a path (product document, "What
// the controller does with a path"). It reads and writes nothing; the values
// it generates come from g (random, hex and uuid from g.Rand; age keys and
// bcrypt salts from crypto/rand, see templating.Generator). The error is
// returned only when values cannot be generated (a failing Rand); every
// problem of the object or of the path is an outcome.
func plan(d Desired, o Observed, g templating.Generator) (Plan, error) {
	path := o.Path
	if path == nil {
		path = &vaultkv.Secret{}
	}
	owner := path.CustomMetadata[ohmlabv1alpha1.OwnerMetadataKey]
	if owner != "" && owner != d.Owner {
		return Plan{Outcome: OutcomeStop, Reason: ohmlabv1alpha1.ReasonOwnedByAnother,
			Message: fmt.Sprintf("the path is owned by %s (custom_metadata %s); delete one of the two objects, or remove the marker to hand the path over", owner, ohmlabv1alpha1.OwnerMetadataKey)}, nil
	}

	if path.Deleted {
		return Plan{Outcome: OutcomeStop, Reason: ohmlabv1alpha1.ReasonPathDeleted,
			Message: fmt.Sprintf("the latest version (%d) of the path is deleted: undelete it (vault kv undelete -versions=%d), or delete the path's metadata (vault kv metadata delete) to have it created anew", path.Version, path.Version)}, nil
	}

	refs, pending := resolveRefs(d.Analysis, o.Refs)
	if len(pending) > 0 {
		return Plan{Outcome: OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending,
			Message: "waiting for " + strings.Join(pending, ", ")}, nil
	}

	p := Plan{CAS: path.Version}
	switch {
	case !path.Exists:
		p.Actions = append(p.Actions, Action{Name: ActionCreate})
		p.Mark = map[string]string{ohmlabv1alpha1.OwnerMetadataKey: d.Owner}
		if d.RotationToken != "" {
			// A new path is created with the token recorded, so creation
			// never rotates a second time.
			p.Mark[ohmlabv1alpha1.RotationTokenMetadataKey] = d.RotationToken
		}
	case owner == "":
		// Adoption writes the owner marker and leaves the data alone
		// (product document, "Migrating": the takeover writes only the
		// markers). The token is recorded with it, so adopting a path never
		// rotates it: rotation starts with the next token.
		p.Actions = append(p.Actions, Action{Name: ActionAdopt})
		p.Mark = map[string]string{ohmlabv1alpha1.OwnerMetadataKey: d.Owner}
		if d.RotationToken != "" {
			p.Mark[ohmlabv1alpha1.RotationTokenMetadataKey] = d.RotationToken
		}
	}

	var regenerate []string
	if owner != "" && d.RotationToken != "" && path.CustomMetadata[ohmlabv1alpha1.RotationTokenMetadataKey] != d.RotationToken {
		regenerate = d.Analysis.RotationKeys
		p.RecordToken = d.RotationToken
	}

	current := templating.Flatten(path.Data)
	// Pruned keys are taken out before Fill, so that a declared key can
	// take the place of a managed key it replaces (a leaf a becoming a map
	// a.b, or the reverse) instead of stalling on a shape conflict.
	pruned := map[string]bool{}
	if d.Prune {
		for _, k := range d.ManagedKeys {
			if _, declared := d.Analysis.Leaves[k]; declared {
				continue
			}
			if _, present := current[k]; present {
				pruned[k] = true
			}
		}
	}
	kept := current
	if len(pruned) > 0 {
		kept = maps.Clone(current)
		for k := range pruned {
			delete(kept, k)
		}
	}
	fill, err := g.Fill(d.Analysis, templating.FillInput{Current: kept, Regenerate: regenerate, Refs: refs, Object: d.Owner})
	if err != nil {
		var empty *templating.EmptySourceError
		if errors.As(err, &empty) && d.Analysis.Leaves[empty.Key].Kind == templating.KindRef {
			// A reference to the object's own path whose source is empty
			// waits like any other reference (RefPending).
			return Plan{Outcome: OutcomeWait, Reason: ohmlabv1alpha1.ReasonRefPending,
				Message: fmt.Sprintf("waiting for %s#%s (empty)", d.Analysis.Path, empty.Source)}, nil
		}
		if msg, ok := stallMessage(err); ok {
			return Plan{Outcome: OutcomeStop, Reason: ohmlabv1alpha1.ReasonInvalidSpec, Message: msg}, nil
		}
		return Plan{}, err
	}

	tree := cloneTree(path.Data)
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
	if len(fill.Changes) > 0 || len(pruned) > 0 || !path.Exists {
		p.Data = tree
	}
	p.ManagedKeys = managedKeys(d.ManagedKeys, current, fill.Changes, pruned)
	sortActions(p.Actions)
	return p, nil
}

// resolveRefs returns the source value of every reference to another path,
// by the referring key, and the references that cannot be resolved yet
// ("mount/path#key (why)"), sorted.
func resolveRefs(a templating.Analysis, paths map[string]*vaultkv.Secret) (map[string]string, []string) {
	refs := map[string]string{}
	var pending []string
	flat := map[string]map[string]any{}
	for _, k := range a.Keys {
		l := a.Leaves[k]
		if l.Kind != templating.KindRef || l.Ref.Path == a.Path {
			continue
		}
		src := paths[l.Ref.Path]
		switch {
		case src == nil || !src.Exists:
			pending = append(pending, l.Ref.String()+" (path missing)")
			continue
		case src.Deleted:
			pending = append(pending, l.Ref.String()+" (latest version deleted)")
			continue
		}
		values, ok := flat[l.Ref.Path]
		if !ok {
			values = templating.Flatten(src.Data)
			flat[l.Ref.Path] = values
		}
		v, ok := values[l.Ref.Key]
		switch s := templating.Stringify(v); {
		case !ok:
			pending = append(pending, l.Ref.String()+" (key missing)")
		case s == "":
			pending = append(pending, l.Ref.String()+" (empty)")
		default:
			refs[k] = s
		}
	}
	slices.Sort(pending)
	pending = slices.Compact(pending)
	return refs, pending
}

// stallMessage turns the errors of Fill that only a person can fix into a
// Stalled message naming the keys.
func stallMessage(err error) (string, bool) {
	var empty *templating.EmptySourceError
	var invalid *templating.InvalidValueError
	var shape *templating.ShapeConflictError
	switch {
	case errors.As(err, &empty):
		return fmt.Sprintf("%s: cannot be computed while %s is empty; fill it in", empty.Key, empty.Source), true
	case errors.As(err, &invalid):
		return fmt.Sprintf("%s: the value on the path %s", invalid.Key, invalid.Reason), true
	case errors.As(err, &shape):
		return fmt.Sprintf("%s: cannot be created without overwriting %s on the path; move or delete that key by hand", shape.Key, shape.Conflict), true
	}
	return "", false
}

// managedKeys returns status.managedKeys after a plan: the keys this
// controller wrote before that are still on the path, and the keys it
// writes now, sorted.
func managedKeys(before []string, current map[string]any, changes []templating.Change, pruned map[string]bool) []string {
	set := map[string]bool{}
	for _, k := range before {
		if _, present := current[k]; present && !pruned[k] {
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

// cloneTree deep-copies the maps of a KV data tree; leaves are shared (they
// are never mutated).
func cloneTree(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = cloneTree(sub)
		}
		out[k] = v
	}
	return out
}
