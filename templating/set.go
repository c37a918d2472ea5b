package templating

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// AnalyseSet returns the problems between objects (the CLI passes its
// files, the webhook the cached objects
// plus the one under review), never the problems of one object alone
// ([Analyse] finds those):
//   - DuplicatePath: one Problem per object whose spec.path another object
//     declares too, naming the others (invalid paths are left to Analyse);
//   - DuplicateName: one Problem per namespace/name given more than once;
//   - RefCycle: one Problem per key whose reference leads on along a ring
//     of references between paths (one without a Key for an object on the
//     ring's path with no such key); the Message lists the ring in order,
//     starting at its smallest path, for example
//     "reference cycle: a/x -> a/y -> a/x". A path on several rings is
//     reported with one of its shortest.
//
// A reference to a path that no object declares is not a problem (the path
// may be hand-made). Problems are sorted by Object, then Reason, Message
// and Key; nil when there are none. Linear in the size of the objects plus
// one breadth-first search per ring.
func AnalyseSet(objs []Object) []Problem {
	var out []Problem
	byPath := map[string][]string{}
	byName := map[string]int{}
	onPath := map[string][]int{}
	refs := graph{}
	for i, o := range objs {
		id := objectID(o)
		byPath[o.Path] = append(byPath[o.Path], id)
		onPath[o.Path] = append(onPath[o.Path], i)
		byName[id]++
		for _, p := range Analyse(o).RefPaths {
			refs.add(o.Path, p)
		}
	}
	for path, ids := range byPath {
		if len(ids) < 2 || !ValidPath(path) {
			continue // an invalid path is Analyse's problem
		}
		sort.Strings(ids)
		for i, id := range ids {
			others := append(append([]string{}, ids[:i]...), ids[i+1:]...)
			out = append(out, Problem{Reason: ReasonDuplicatePath, Object: id,
				Message: fmt.Sprintf("path %s is also declared by %s", path, strings.Join(others, ", "))})
		}
	}
	for id, n := range byName {
		if n > 1 {
			out = append(out, Problem{Reason: ReasonDuplicateName, Object: id,
				Message: fmt.Sprintf("%s is declared %d times", id, n)})
		}
	}
	for path, ring := range refs.rings() {
		next := ring[(slices.Index(ring, path)+1)%len(ring)]
		// Analysed again: rings are rare, and keeping every analysis
		// until here would hold the whole set's leaves (the webhook's
		// cache) for each admission.
		for _, i := range onPath[path] {
			keys := refKeysTo(Analyse(objs[i]), next)
			if len(keys) == 0 {
				keys = []string{""} // a second object on the path: DuplicatePath says which
			}
			for _, k := range keys {
				out = append(out, Problem{Reason: ReasonRefCycle, Object: objectID(objs[i]), Key: k,
					Message: "reference cycle: " + ringString(ring)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		p, q := out[i], out[j]
		if p.Object != q.Object {
			return p.Object < q.Object
		}
		if p.Reason != q.Reason {
			return p.Reason < q.Reason
		}
		if p.Message != q.Message {
			return p.Message < q.Message
		}
		return p.Key < q.Key
	})
	return out
}

// refKeysTo returns the keys of a whose references read path, in order: the
// keys to change to break the ring.
func refKeysTo(a Analysis, path string) []string {
	var keys []string
	for _, k := range a.Keys {
		if slices.ContainsFunc(a.Leaves[k].Refs(), func(r Ref) bool { return r.Path == path }) {
			keys = append(keys, k)
		}
	}
	return keys
}

// objectID is "namespace/name", or "name" without a namespace.
func objectID(o Object) string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}
