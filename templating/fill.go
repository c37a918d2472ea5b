package templating

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Actions of a [Change], named as in the reconciler's plan and in the
// Drifted condition (product document, "Conditions").
const (
	// ActionCreateField writes a declared key that the path lacks.
	ActionCreateField = "create-field"
	// ActionUpdateField rewrites a reference that no longer equals its
	// source, or a derived key that no longer matches its source.
	ActionUpdateField = "update-field"
	// ActionRotate regenerates a generated key that the path has.
	ActionRotate = "rotate"
)

// FillInput is what [Generator.Fill] needs besides the analysis.
type FillInput struct {
	// Current are the values on the path now, flattened ([Flatten]): a key
	// present in the map exists on the path, whatever its value.
	Current map[string]any
	// Hidden is what the path holds that Current cannot show ([Hidden]):
	// keys whose name has a dot, and empty maps. No key is created where
	// it would replace one of them, and no key is created at, above or
	// under the dotted key path a dotted name spells (see
	// [ShapeConflictError]). May be nil.
	Hidden []HiddenKey
	// Regenerate are generated keys to regenerate although present
	// (rotation): usually Analysis.RotationKeys when the token changed.
	Regenerate []string
	// Refs are the resolved source values, as strings ([Stringify]), of
	// every reference key to another path, by the reference's key. The
	// caller resolves them (a missing or empty source is RefPending and
	// should not reach Fill). References to the object's own path are
	// resolved by Fill and need no entry.
	Refs map[string]string
	// Sources are the resolved values, as strings, of the references of
	// composed keys to other paths, by reference (one entry serves every
	// composed key that names it). A missing or empty one holds the key
	// back (RefPending); references to the own path need no entry.
	Sources map[Ref]string
	// Object names the object the values are for (its owner marker,
	// "namespace/name"): Generator.Cache keeps its bcrypt pairs under it.
	Object string
	// Checked are bcrypt pairs known to match, by the hash's key: the hash
	// and its source's value as the path held them at a KV version whose
	// pair the caller wrote or checked (the reconciler: the versions of
	// status.managedKeys). A stored hash and a source (new or
	// current) equal to its pair here match with no bcrypt compare; any
	// other pair is compared as usual. May be nil.
	Checked map[string]BcryptPair
}

// BcryptPair is a bcrypt hash and the value it hashes.
type BcryptPair struct {
	Hash, Source string
}

// Change is one key that Fill changes.
type Change struct {
	// Key is the dotted key path.
	Key string
	// Action is ActionCreateField, ActionUpdateField or ActionRotate.
	Action string
}

// FillResult is what [Generator.Fill] computed.
type FillResult struct {
	// Values are the new values of the changed keys, by dotted key path:
	// plain keys keep their declared type (string, bool, number), every
	// other kind is a string. Never nil. Apply them with [SetPath].
	Values map[string]any
	// Changes are the changed keys with their action, sorted by key; nil
	// when nothing changes.
	Changes []Change
	// Held are the keys that cannot be computed now, sorted by key: each
	// with its *EmptySourceError (a composed key's error joins one per
	// source: [EmptySources]), *InvalidValueError or
	// *ShapeConflictError. Their current value (if any) is left alone, and
	// every other key is still computed, so that one key waiting for a
	// person does not freeze the rest of the path.
	Held []Held
}

// Held is a key [Generator.Fill] holds back, and why.
type Held struct {
	Key string
	Err error
}

// EmptySourceError is returned by Fill when a key derives from an empty or
// missing value: a bcrypt of an empty key (typically a placeholder "" not
// filled in yet), or a reference whose source is empty. The object cannot
// be completed until the source is filled in (product document,
// "Conditions": Stalled, checked again at every resync).
type EmptySourceError struct {
	// Key is the bcrypt, reference or composed key.
	Key string
	// Source is the dotted key path it derives from, or "mount/path#key"
	// for a reference to another path (alone or in a composed value).
	Source string
}

// Error names both keys, never a value.
func (e *EmptySourceError) Error() string {
	return fmt.Sprintf("templating: %s derives from %s, which is empty", e.Key, e.Source)
}

// InvalidValueError is returned by Fill when a value on the path cannot be
// used to derive another: a stored age secret that does not parse, or a
// bcrypt source longer than 72 bytes. It never holds the value.
type InvalidValueError struct {
	// Key is the dotted key path of the unusable value.
	Key string
	// Reason says what is wrong, in plain English, without the value.
	Reason string
}

// Error names the key and the reason, never the value.
func (e *InvalidValueError) Error() string {
	return fmt.Sprintf("templating: the value of %s %s", e.Key, e.Reason)
}

// ShapeConflictError is returned by Fill when creating a declared key would
// overwrite another key of the path: a value stored where the declared tree
// has a map (Conflict is a prefix of Key), or a map stored where it has a
// leaf (Conflict is a key under Key, or in a map under Key, that Flatten
// does not show: a name with a dot, an empty map). A key whose name has a
// dot occupies the dotted key path it spells, as a reader that joins names
// with dots (Spring's, for one) sees it: no key is created at that path,
// above it or under it, which would stand beside it or shadow it. A key
// that exists is never overwritten (product document, "Seed once"), so
// someone must move it.
type ShapeConflictError struct {
	// Key is the declared key Fill would create.
	Key string
	// Conflict is the key on the path in the way: its dotted key path, or
	// for a name with a dot its HiddenKey.Name (app."a.b").
	Conflict string
}

// Error names both keys, never a value.
func (e *ShapeConflictError) Error() string {
	return fmt.Sprintf("templating: cannot create %s without overwriting %s on the path", e.Key, e.Conflict)
}

// StoppedError is returned by Fill when its context ends before every value
// is computed: bcrypt is slow by design, and an object with many hashes may
// not be filled in the time its caller has. It holds no value.
type StoppedError struct {
	// Key is the key Fill was about to compute.
	Key string
	// Err is the context's error.
	Err error
}

// Error names the key, never a value.
func (e *StoppedError) Error() string {
	return fmt.Sprintf("templating: stopped before computing %s: %v", e.Key, e.Err)
}

// Unwrap returns the context's error.
func (e *StoppedError) Unwrap() error { return e.Err }

// Fill computes the values of one path that must change, in dependency
// order: a key comes after the keys it derives from (bcrypt source, private
// key of its pair, references to the own path), otherwise in key order, which is also
// the order in which generated values consume g.Rand (product document,
// "What the controller does with a path", "Seed once" and "References
// follow their source"):
//   - plain (including ""): created with the declared value when absent,
//     never touched when present, whatever its value;
//   - generated: created when absent; regenerated (rotate) when present and
//     listed in in.Regenerate;
//   - ref: created when absent; updated when its stored value, as a string,
//     differs from its source (in.Refs, or the same path's new or current
//     value for a reference to the own path);
//   - compose: the same, with its text and each reference's source value
//     (in.Sources, or the same path's value) as its value;
//   - bcrypt: created when absent; updated only when the stored hash no
//     longer matches its source's value, new or current (in.Checked, else
//     [Generator.Matches]: a hash that still matches is never rewritten, so
//     no new salt appears);
//   - the public key of a key pair (age-public, ssh-public): created when
//     absent; updated when it differs from the public key of the object's
//     private key of its pair (new or current), so a rotated private key
//     takes its public with it, and a public key edited by hand is put
//     back.
//
// A key that cannot be computed is held back (FillResult.Held) rather than
// failing the whole fill: [*EmptySourceError] (a bcrypt or a reference of
// an empty or missing source), [*InvalidValueError] (a stored private key
// that does not parse, a bcrypt source over 72 bytes) and
// [*ShapeConflictError]. A key deriving from a held key that the path lacks
// is held too. Errors: an analysis with problems, a Regenerate key that is
// not a generated leaf, a failing Rand, and [*StoppedError] when ctx ends
// before a bcrypt hash or compare, or a private key's generation, starts
// (the costly values, [CostlyKeys]; one already running finishes first).
// No error contains a value.
func (g Generator) Fill(ctx context.Context, a Analysis, in FillInput) (FillResult, error) {
	if n := len(a.Problems); n > 0 {
		return FillResult{}, fmt.Errorf("templating: Fill needs an analysis without problems, this one has %d", n)
	}
	regen := make(map[string]bool, len(in.Regenerate))
	for _, k := range in.Regenerate {
		if !a.Leaves[k].Generated() {
			return FillResult{}, fmt.Errorf("templating: cannot regenerate %s: not a generated key of the object", k)
		}
		regen[k] = true
	}
	f := filler{ctx: ctx, g: g, a: a, in: in, res: FillResult{Values: make(map[string]any)}, under: make(map[string]string),
		hiddenAt: make(map[string]string), hiddenUnder: make(map[string]string), publics: make(map[*keyPair][2]string)}
	for k := range in.Current {
		for i := strings.LastIndexByte(k, '.'); i > 0; i = strings.LastIndexByte(k[:i], '.') {
			if u, ok := f.under[k[:i]]; !ok || k < u {
				f.under[k[:i]] = k
			}
		}
	}
	for _, h := range in.Hidden {
		if u, ok := f.hiddenAt[h.Path]; !h.EmptyMap && (!ok || h.Name < u) {
			f.hiddenAt[h.Path] = h.Name
		}
		for i := strings.LastIndexByte(h.Path, '.'); i > 0; i = strings.LastIndexByte(h.Path[:i], '.') {
			if u, ok := f.hiddenUnder[h.Path[:i]]; !ok || h.Name < u {
				f.hiddenUnder[h.Path[:i]] = h.Name
			}
		}
	}
	order, privates := fillOrder(a)
	f.privates = privates
	for _, k := range order {
		if err := f.fill(k, regen[k]); err != nil {
			if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
				return FillResult{}, &StoppedError{Key: k, Err: ctx.Err()}
			}
			if !holdable(err) {
				return FillResult{}, err
			}
			f.res.Held = append(f.res.Held, Held{Key: k, Err: err})
		}
	}
	sort.Slice(f.res.Changes, func(i, j int) bool { return f.res.Changes[i].Key < f.res.Changes[j].Key })
	sort.Slice(f.res.Held, func(i, j int) bool { return f.res.Held[i].Key < f.res.Held[j].Key })
	return f.res, nil
}

// holdable says whether err is about one key's value, which holds back
// that key only.
func holdable(err error) bool {
	var empty *EmptySourceError
	var invalid *InvalidValueError
	var shape *ShapeConflictError
	return errors.As(err, &empty) || errors.As(err, &invalid) || errors.As(err, &shape)
}

type filler struct {
	ctx      context.Context
	g        Generator
	a        Analysis
	in       FillInput
	res      FillResult
	privates map[*keyPair]string // the private key of each key pair the object holds
	under    map[string]string   // prefix of a current key -> smallest current key under it
	// The keys of in.Hidden by the dotted key path they occupy: a name
	// with a dot at that path (not an empty map, which a key may fill), and
	// the smallest of any kind under it.
	hiddenAt, hiddenUnder map[string]string
	// publics holds, per key pair, the last private key derived and its
	// public key: every public key of a pair derives from one private key,
	// derived once.
	publics map[*keyPair][2]string
}

// value is k's new value when it changes in this Fill, else its current
// one.
func (f *filler) value(k string) (v any, ok bool) {
	if v, ok := f.res.Values[k]; ok {
		return v, true
	}
	v, ok = f.in.Current[k]
	return v, ok
}

// generatedNow says whether k is a generated key that this fill creates or
// rotates.
func (f *filler) generatedNow(k string) bool {
	_, changed := f.res.Values[k]
	return changed && f.a.Leaves[k].Generated()
}

func (f *filler) set(k, action string, v any) error {
	if action == ActionCreateField {
		if u, ok := f.under[k]; ok {
			return &ShapeConflictError{Key: k, Conflict: u}
		}
		if u, ok := f.hiddenUnder[k]; ok {
			return &ShapeConflictError{Key: k, Conflict: u}
		}
		if u, ok := f.hiddenAt[k]; ok {
			return &ShapeConflictError{Key: k, Conflict: u}
		}
		for i := strings.LastIndexByte(k, '.'); i > 0; i = strings.LastIndexByte(k[:i], '.') {
			if _, ok := f.in.Current[k[:i]]; ok {
				return &ShapeConflictError{Key: k, Conflict: k[:i]}
			}
			if u, ok := f.hiddenAt[k[:i]]; ok {
				return &ShapeConflictError{Key: k, Conflict: u}
			}
		}
	}
	f.res.Values[k] = v
	f.res.Changes = append(f.res.Changes, Change{Key: k, Action: action})
	return nil
}

// fill computes key k's value by its leaf's kind and records a change when
// the path needs one.
func (f *filler) fill(k string, regenerate bool) error {
	l := f.a.Leaves[k]
	cur, present := f.in.Current[k]
	switch {
	case l.Kind == KindPlain:
		if !present {
			return f.set(k, ActionCreateField, l.Value)
		}
		return nil
	case l.Generated():
		return f.fillGenerated(k, l, present, regenerate)
	case l.Kind == KindRef:
		return f.fillRef(k, l, cur, present)
	case l.Kind == KindCompose:
		return f.fillCompose(k, l, cur, present)
	case l.Kind == KindBcrypt:
		return f.fillBcrypt(k, l, cur, present)
	case isPublic(l.Kind):
		return f.fillPublic(k, l, cur, present)
	}
	return errors.New("templating: unknown leaf kind " + string(l.Kind) + " at " + k)
}

// follow records k's change to v, a value that follows its source (a copy,
// a public key): created when absent, updated when it differs.
func (f *filler) follow(k string, cur any, present bool, v string) error {
	switch {
	case !present:
		return f.set(k, ActionCreateField, v)
	case Stringify(cur) != v:
		return f.set(k, ActionUpdateField, v)
	}
	return nil
}

// fillGenerated generates a key that is absent, or regenerates it for a
// rotation.
func (f *filler) fillGenerated(k string, l Leaf, present, regenerate bool) error {
	if present && !regenerate {
		return nil
	}
	if isPrivate(l.Kind) && !f.g.Dry {
		if err := f.ctx.Err(); err != nil {
			return err
		}
	}
	v, err := f.g.generate(f.ctx, l)
	if err != nil && l.Kind == KindVaultPassword {
		// Vault's refusal names the policy, not the key that asked.
		return fmt.Errorf("templating: generating %s: %w", k, err)
	}
	if err != nil {
		return err
	}
	if present {
		return f.set(k, ActionRotate, v)
	}
	return f.set(k, ActionCreateField, v)
}

// fillRef copies a reference's source: another path's value (f.in.Refs) or
// a key of the same path.
func (f *filler) fillRef(k string, l Leaf, cur any, present bool) error {
	src, ok := f.in.Refs[k]
	source := l.Ref.String()
	if l.Ref.Path == f.a.Path {
		v, found := f.value(l.Ref.Key)
		src, ok, source = Stringify(v), found, l.Ref.Key
	}
	if !ok || src == "" {
		return &EmptySourceError{Key: k, Source: source}
	}
	return f.follow(k, cur, present, src)
}

// fillCompose composes a composed key's text with its sources' values
// (f.in.Sources, or the same path's new or current value), and keeps the
// key equal to it as a copy is kept equal to its source. A missing or empty
// source holds it back: an error holding one *EmptySourceError per such
// source ([EmptySources]).
func (f *filler) fillCompose(k string, l Leaf, cur any, present bool) error {
	v, missing := l.Compose(func(r Ref) (string, bool) {
		if r.Path == f.a.Path {
			v, ok := f.value(r.Key)
			return Stringify(v), ok
		}
		v, ok := f.in.Sources[r]
		return v, ok
	})
	if missing == nil {
		return f.follow(k, cur, present, v)
	}
	errs := make([]error, 0, len(missing))
	for _, r := range missing {
		source := r.String()
		if r.Path == f.a.Path {
			source = r.Key
		}
		errs = append(errs, &EmptySourceError{Key: k, Source: source})
	}
	return errors.Join(errs...)
}

// EmptySources returns the *EmptySourceError that err holds, in order: the
// one of a bcrypt or a reference, each source of a composed key.
func EmptySources(err error) []*EmptySourceError {
	var out []*EmptySourceError
	var walk func(error)
	walk = func(err error) {
		var empty *EmptySourceError
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		default:
			if errors.As(err, &empty) {
				out = append(out, empty)
			}
		}
	}
	walk(err)
	return out
}

// fillBcrypt hashes a bcrypt key's source when the stored hash does not
// match it: a pair known to match (checked, or in the cache) costs no
// bcrypt compare.
func (f *filler) fillBcrypt(k string, l Leaf, cur any, present bool) error {
	v, ok := f.value(l.Source)
	src := Stringify(v)
	if !ok || src == "" {
		return &EmptySourceError{Key: k, Source: l.Source}
	}
	if len(src) > MaxBcryptInput {
		return &InvalidValueError{Key: l.Source, Reason: "is longer than 72 bytes, the most bcrypt accepts"}
	}
	action := ActionUpdateField
	switch {
	case !present:
		action = ActionCreateField
	case f.generatedNow(l.Source):
		// A value generated by this fill cannot match the stored hash:
		// no bcrypt compare needed.
	case f.checked(k, Stringify(cur), src):
		return nil
	default:
		ok, err := f.g.Cache.matches(f.ctx, Slot{Object: f.in.Object, Key: k}, Stringify(cur), src, f.g.seat())
		if err != nil || ok {
			return err
		}
	}
	h, err := f.g.bcrypt(f.ctx, src)
	if err != nil {
		return err
	}
	if !f.g.Dry {
		// The hash this process made needs no bcrypt compare at the
		// next resync (a dry one is no hash).
		f.g.Cache.Record(Slot{Object: f.in.Object, Key: k}, h, src)
	}
	return f.set(k, action, h)
}

// fillPublic derives a key pair's public key from its private key.
func (f *filler) fillPublic(k string, l Leaf, cur any, present bool) error {
	p := pairOf(l.Kind)
	private := f.privates[p]
	v, _ := f.value(private)
	pub, err := f.public(p, Stringify(v))
	if err != nil {
		return &InvalidValueError{Key: private, Reason: "is not " + p.what}
	}
	return f.follow(k, cur, present, pub)
}

// public is p.derive(private), derived once per private key and fill.
func (f *filler) public(p *keyPair, private string) (string, error) {
	if d, ok := f.publics[p]; ok && d[0] == private {
		return d[1], nil
	}
	pub, err := p.derive(private)
	if err != nil {
		return "", err
	}
	f.publics[p] = [2]string{private, pub}
	return pub, nil
}

// checked says whether the pair of hash key k is one the caller knows to
// match (FillInput.Checked).
func (f *filler) checked(k, hash, source string) bool {
	p, ok := f.in.Checked[k]
	return ok && p == BcryptPair{Hash: hash, Source: source}
}

// DerivesFrom returns the key of the same path that key k's value is
// computed from: a bcrypt's source, a public key's private key, a
// reference to the own path's source; "" for any other key. Fill holds a
// key whose source it holds and the path lacks.
func (a Analysis) DerivesFrom(k string) string {
	l := a.Leaves[k]
	switch {
	case l.Kind == KindBcrypt:
		return l.Source
	case l.Kind == KindRef && l.Ref.Path == a.Path:
		return l.Ref.Key
	case isPublic(l.Kind):
		if ks := privateKeys(a)[pairOf(l.Kind)]; len(ks) > 0 {
			return ks[0]
		}
	}
	return ""
}

// fillOrder returns the keys of a.Leaves so that every key comes after the
// keys it derives from (bcrypt source, private key of its pair, reference
// to the own path, a composed value's references to it), ties in key
// order, and the private key of each key pair the object holds.
func fillOrder(a Analysis) (order []string, privates map[*keyPair]string) {
	keys := make([]string, 0, len(a.Leaves))
	for k := range a.Leaves {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	privates = map[*keyPair]string{}
	for p, ks := range privateKeys(a) {
		privates[p] = ks[0]
	}
	state := make(map[string]int8, len(keys)) // 1 visiting, 2 done
	var visit func(k string)
	visit = func(k string) {
		l, ok := a.Leaves[k]
		if !ok || state[k] != 0 {
			return
		}
		state[k] = 1
		switch {
		case l.Kind == KindBcrypt:
			visit(l.Source)
		case isPublic(l.Kind):
			visit(privates[pairOf(l.Kind)])
		case l.Kind == KindRef || l.Kind == KindCompose:
			for _, r := range l.Refs() {
				if r.Path == a.Path {
					visit(r.Key)
				}
			}
		}
		state[k] = 2
		order = append(order, k)
	}
	for _, k := range keys {
		visit(k)
	}
	return order, privates
}
