package templating

import (
	"fmt"
	"slices"
	"strings"
)

// Limits of one Vault write, for the size a path's values come to.
const (
	// MaxWriteBytes is Vault's default listener max_request_size: it
	// refuses a larger request whatever its storage. The controller would
	// generate the values in memory before Vault refuses them, at every
	// attempt, so such an object is refused before that.
	MaxWriteBytes = 32 << 20
	// MaxEntryBytes is what Vault's integrated storage (raft) stores in one
	// entry by default (max_entry_size); one KV v2 version is one entry.
	MaxEntryBytes = 1 << 20
)

// generatedSize is an upper bound of the characters of each generated or
// derived template's value, for the estimate of a path's size.
var generatedSize = map[Kind]int{
	KindUUID:       36,
	KindAgeSecret:  74,
	KindAgePublic:  62,
	KindSSHPrivate: 420, // an ed25519 key in OpenSSH's PEM, newlines escaped
	KindSSHPublic:  100,
	KindBcrypt:     60,
	// Vault's password policies generate at most 100 characters.
	KindVaultPassword: 100,
}

// valueLen is the characters of the value of l, a leaf that is not a
// reference, without JSON's quotes: what it holds or generates. 0 for "", a
// value filled by hand; a composed value's text (refSizes.leafSize adds its
// sources).
func valueLen(l Leaf) int {
	switch l.Kind {
	case KindPlain:
		return len(Stringify(l.Value))
	case KindRandom, KindHex, KindPassword:
		return l.Length
	case KindCompose:
		return l.literalLen()
	}
	return generatedSize[l.Kind]
}

// refSizes is the size of the value a reference copies, as far as the
// objects known say: its source key's declared value when an object
// declares the source's path (following a reference to a reference, from
// key to key), else 0, unknown (a key filled by hand, a path no object
// declares, a ring): Vault's own limits bound those.
type refSizes struct {
	// leaves returns the leaves of the one object that declares path, nil
	// when none or several do.
	leaves func(path string) map[string]Leaf
	memo   map[Ref]int
}

func (r *refSizes) size(ref Ref) int {
	if n, ok := r.memo[ref]; ok {
		return n
	}
	r.memo[ref] = 0 // a ring of references counts as unknown
	n := 0
	if l, ok := r.leaves(ref.Path)[ref.Key]; ok {
		n = r.leafSize(l)
	}
	r.memo[ref] = n
	return n
}

// leafSize is the size of l's value: a reference's source's, a composed
// value's text plus each of its sources' (a source named twice counts
// twice), any other leaf's own (valueLen).
func (r *refSizes) leafSize(l Leaf) int {
	switch l.Kind {
	case KindRef:
		return r.size(l.Ref)
	case KindCompose:
		n := l.literalLen()
		for _, p := range l.Parts {
			if p.IsRef() {
				n += r.size(p.Ref)
			}
		}
		return n
	}
	return valueLen(l)
}

// ownRefs are the sizes of references within a's own path only.
func ownRefs(a Analysis) *refSizes {
	return &refSizes{memo: map[Ref]int{}, leaves: func(path string) map[string]Leaf {
		if path == a.Path {
			return a.Leaves
		}
		return nil
	}}
}

// writeSize estimates, from below, the bytes of JSON of the data the
// object's path holds: every key and every value it declares, a reference
// counted as its source's value as far as refs knows it (refSizes), a
// composed value as its text plus its sources' values.
func writeSize(a Analysis, refs *refSizes) int {
	n := 2
	for _, k := range a.Keys {
		l := a.Leaves[k]
		name := k[strings.LastIndexByte(k, '.')+1:]
		n += len(name) + 4 // "name":...,
		if l.Kind == KindRef {
			if m := refs.size(l.Ref); m > 0 {
				n += m + 2
			}
			continue
		}
		n += refs.leafSize(l) + 2
	}
	return n
}

// checkSize refuses a path whose values cannot be written in one request,
// and warns of one that Vault's integrated storage cannot hold.
func (an *analyser) checkSize() {
	if p, ok := sizeProblem(writeSize(an.a, ownRefs(an.a)), ""); ok {
		if p.Reason == "" {
			an.a.Warnings = append(an.a.Warnings, p)
		} else {
			an.a.Problems = append(an.a.Problems, p)
		}
	}
}

// sizeProblem is the refusal (over MaxWriteBytes) or the warning (over
// MaxEntryBytes, an empty Reason) of a path whose values come to n bytes of
// JSON; counting says what n counts besides the object's own values.
func sizeProblem(n int, counting string) (Problem, bool) {
	switch {
	case n > MaxWriteBytes:
		return Problem{Reason: ReasonInvalidSpec, Message: fmt.Sprintf("the values of the path come to at least %s of JSON%s, more than the 32 MiB Vault "+
			"accepts in one request (its listener's max_request_size): split the keys over several objects", mebibytes(n), counting)}, true
	case n > MaxEntryBytes:
		return Problem{Message: fmt.Sprintf("the values of the path come to at least %s of JSON%s, more than "+
			"the 1 MiB Vault's integrated storage (raft) keeps in one entry by default (max_entry_size; Consul: 512 KiB): "+
			"the write fails on such a Vault; split the keys over several objects", mebibytes(n), counting)}, true
	}
	return Problem{}, false
}

// SetSizes returns, for the objects of objs analysed together, the
// refusals and warnings of their paths' size that Analyse of each object
// alone cannot give: a <ref:> to another object's path counts as its
// source key's declared value (refSizes: <random:N> N characters, a plain
// value its own, a reference the value it copies in turn, a composed value
// its text and the values its references copy; a key filled by
// hand, or of a path no object of objs declares, counts nothing), so that
// many references to one large value are refused too. An object whose own
// values already pass a bound gets no second problem for it (Analyse
// reports it). Problems carry the Object; warnings an empty Reason. Sorted
// by Object.
func SetSizes(objs []Object) (problems, warnings []Problem) {
	byPath := map[string][]int{}
	type dependent struct {
		i int
		a Analysis
	}
	var dependents []dependent
	for i, o := range objs {
		byPath[o.Path] = append(byPath[o.Path], i)
		if a := Analyse(o); len(a.RefPaths) > 0 {
			dependents = append(dependents, dependent{i, a})
		}
	}
	if len(dependents) == 0 {
		return nil, nil
	}
	// Sources are analysed when a reference reaches them, once each.
	analysed := map[string]map[string]Leaf{}
	refs := &refSizes{memo: map[Ref]int{}, leaves: func(path string) map[string]Leaf {
		on := byPath[path]
		if len(on) != 1 {
			return nil // DuplicatePath says which object to remove
		}
		l, ok := analysed[path]
		if !ok {
			l = Analyse(objs[on[0]]).Leaves
			analysed[path] = l
		}
		return l
	}}
	for _, d := range dependents {
		i, a := d.i, d.a
		own, all := writeSize(a, ownRefs(a)), writeSize(a, refs)
		p, ok := sizeProblem(all, ", counting the values its references copy from other objects' paths")
		switch {
		case !ok:
		case p.Reason != "" && own <= MaxWriteBytes:
			p.Object = objectID(objs[i])
			problems = append(problems, p)
		case p.Reason == "" && own <= MaxEntryBytes:
			p.Object = objectID(objs[i])
			warnings = append(warnings, p)
		}
	}
	byObject := func(p, q Problem) int { return strings.Compare(p.Object, q.Object) }
	slices.SortStableFunc(problems, byObject)
	slices.SortStableFunc(warnings, byObject)
	return problems, warnings
}

func mebibytes(n int) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
