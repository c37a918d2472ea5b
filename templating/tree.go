package templating

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Flatten turns a nested KV data tree (a KV v2 secret's data as read from
// Vault: map[string]any whose nodes are map[string]any) into dotted key path
// -> leaf value. Every value that is not a map[string]any is a leaf and is
// kept as it is (lists and nil included); empty maps have no leaf and vanish.
// A key whose name contains a dot (`vault kv patch P a.b=x` writes one) is
// left out: no declared key can name it (key names in a spec have no dot),
// and taken in it would pass for the nested a.b, so that the controller
// would rewrite a.b forever or hash and copy the wrong value. Left out, it
// is neither compared nor deleted, and a write keeps it as it is; [Hidden]
// lists it, so that no write replaces it unseen.
func Flatten(tree map[string]any) map[string]any {
	out := make(map[string]any)
	flattenInto(out, "", tree)
	return out
}

func flattenInto(out map[string]any, prefix string, m map[string]any) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.Contains(k, ".") {
			continue
		}
		p := joinKey(prefix, k)
		if sub, ok := m[k].(map[string]any); ok {
			flattenInto(out, p, sub)
			continue
		}
		out[p] = m[k]
	}
}

// HiddenKey is a part of a data tree that [Flatten] does not show.
type HiddenKey struct {
	// Path is the dotted key path its names spell when joined with dots:
	// "app.spring.datasource.password" for the key
	// "spring.datasource.password" of the map app.
	Path string
	// Name names it without ambiguity, every name with a dot quoted:
	// app."spring.datasource.password" (jq reads it so).
	Name string
	// EmptyMap is true for an empty map whose names have no dot: it holds
	// no value, and only the map around it is not empty for it.
	EmptyMap bool
}

// Hidden returns what tree holds that [Flatten] leaves out, sorted by Path:
// every key whose name contains a dot (whatever is under it, which is left
// out with it), and every empty map. A map that holds only these is not
// empty although Flatten shows nothing of it: a write that put a value in
// its place would lose them ([Generator.Fill] sees them through
// FillInput.Hidden).
func Hidden(tree map[string]any) []HiddenKey {
	var out []HiddenKey
	hiddenInto(&out, "", tree)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// hiddenInto appends the hidden keys of m, the map at prefix (whose names
// have no dot: the walk stops at a name with one).
func hiddenInto(out *[]HiddenKey, prefix string, m map[string]any) {
	for k, v := range m {
		p := joinKey(prefix, k)
		if strings.Contains(k, ".") {
			*out = append(*out, HiddenKey{Path: p, Name: joinKey(prefix, strconv.Quote(k))})
			continue
		}
		sub, ok := v.(map[string]any)
		switch {
		case !ok:
		case len(sub) == 0:
			*out = append(*out, HiddenKey{Path: p, Name: p, EmptyMap: true})
		default:
			hiddenInto(out, p, sub)
		}
	}
}

// At returns the node at the dotted key path key of tree, a leaf or a map,
// and whether there is one: what [Flatten] cannot say of a map.
func At(tree map[string]any, key string) (any, bool) {
	var v any = tree
	for _, s := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[s]; !ok {
			return nil, false
		}
	}
	return v, true
}

// SetPath sets the dotted key path key ("a.b.c") of a nested tree to v,
// creating the maps on the way. A value on the way that is not a
// map[string]any is replaced by a map (callers that must not lose it check
// first; [Generator.Fill] does, see [ShapeConflictError]).
func SetPath(tree map[string]any, key string, v any) {
	segs := strings.Split(key, ".")
	m := tree
	for _, s := range segs[:len(segs)-1] {
		sub, ok := m[s].(map[string]any)
		if !ok {
			sub = make(map[string]any)
			m[s] = sub
		}
		m = sub
	}
	m[segs[len(segs)-1]] = v
}

// DeletePath removes the dotted key path key from a nested tree, then every
// map on the way that it left empty. A key that is not there is a no-op.
func DeletePath(tree map[string]any, key string) {
	deleteSegs(tree, strings.Split(key, "."))
}

func deleteSegs(m map[string]any, segs []string) {
	if len(segs) == 1 {
		delete(m, segs[0])
		return
	}
	sub, ok := m[segs[0]].(map[string]any)
	if !ok {
		return
	}
	deleteSegs(sub, segs[1:])
	if len(sub) == 0 {
		delete(m, segs[0])
	}
}

// Stringify returns the string form of a leaf value, as references copy it
// and bcrypt hashes it: a string as is, json.Number as written, a boolean as
// "true"/"false", integers in decimal, a float64 as encoding/json writes it
// (3, 0.5, 1e+21), nil as "". Other values (not leaves) get fmt's %v.
// The reconciler uses it for the Refs of [FillInput] so that one rule
// applies everywhere.
func Stringify(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return string(v)
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		if b, err := json.Marshal(v); err == nil {
			return string(b)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func joinKey(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// CloneTree deep-copies the maps of a KV data tree; leaves are shared (they
// are never mutated).
func CloneTree(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = CloneTree(sub)
		}
		out[k] = v
	}
	return out
}
