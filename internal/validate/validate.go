// Package validate is the one verdict on VaultSeed objects that the
// admission webhook and `ohmlab validate` share, so that the same input gets
// the same verdict from both. It runs templating's analysis of one
// object and of a set of objects, names every problem by its key path, and
// adds the checks of an update (spec.path is immutable) and the warnings for
// legal but surprising specs.
//
// Like templating, it never puts a value in a message: a plain leaf may be a
// secret somebody typed, so messages name keys, paths and templates only.
package validate

import (
	"fmt"
	"slices"
	"strings"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// Key paths of the problems that are not about one key of spec.data.
const (
	// KeyPath: an invalid or changed path, another object on it, a
	// reference cycle through it.
	KeyPath = "spec.path"
	// KeyData: data that is not a map, an empty key name at its top.
	KeyData = "spec.data"
	// KeyRotate: a rotate block with neither a token nor a period; one
	// that regenerates nothing, or every key pair (warnings).
	KeyRotate = "spec.rotate"
	// KeyToken: a rotation token that is empty, or that Vault would refuse
	// in custom_metadata (templating.TokenProblem).
	KeyToken = "spec.rotate.token"
	// KeyEvery: a rotation period templating.ParsePeriod refuses.
	KeyEvery = "spec.rotate.every"
	// KeyName: a namespace/name given more than once, or no name.
	KeyName = "metadata.name"
	// KeyDeletionPolicy: a deletionPolicy other than Retain or Delete (the
	// API server refuses it too).
	KeyDeletionPolicy = "spec.deletionPolicy"
)

// Problem is one reason to refuse an object, or one warning about it.
type Problem struct {
	// Reason is a templating Reason constant (InvalidSpec, InvalidRotation,
	// RefCycle, DuplicatePath, DuplicateName); empty for a warning.
	Reason string `json:"reason,omitempty"`
	// Key is the dotted key path in spec.data the problem is about, or the
	// field (spec.path, spec.data, spec.rotate, spec.rotate.token,
	// metadata.name) when it is not about one key.
	Key string `json:"key"`
	// Message says what is wrong, naming keys, paths and templates, never
	// a value.
	Message string `json:"message"`
}

// String returns "<key path>: <message>".
func (p Problem) String() string {
	if p.Key == "" {
		return p.Message
	}
	return p.Key + ": " + p.Message
}

// Verdict is what the analysis says about one object.
type Verdict struct {
	// Problems refuse the object; sorted by Key, Reason, then Message.
	Problems []Problem
	// Warnings are legal but surprising parts of the spec; they refuse
	// nothing. Sorted like Problems.
	Warnings []Problem
}

// Valid reports whether the verdict has no problem.
func (v Verdict) Valid() bool { return len(v.Problems) == 0 }

// Message lists every problem as "<key path>: <message>", separated by "; ".
func (v Verdict) Message() string {
	lines := make([]string, len(v.Problems))
	for i, p := range v.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "; ")
}

// Set returns the verdict on each object of objs, analysed together: the
// problems of each object alone, plus two objects on one path, a
// namespace/name given more than once, reference cycles between the
// objects' paths, and the size of a path counting the values its
// references copy from the others (templating.SetSizes). out[i] is the verdict on objs[i]; copies of one
// namespace/name each get the problems of their own path. The CLI passes
// every object it read.
func Set(objs []seeds.Analysed) []Verdict {
	out := make([]Verdict, len(objs))
	tobjs := make([]templating.Object, len(objs))
	byID := map[string][]int{}
	for i, analysed := range objs {
		s, a := analysed.Seed, analysed.Analysis
		tobjs[i] = analysed.Object
		for _, p := range a.Problems {
			out[i].Problems = append(out[i].Problems, fromTemplating(p))
		}
		switch s.Spec.DeletionPolicy {
		case "", ohmlabv1alpha1.DeletionPolicyRetain, ohmlabv1alpha1.DeletionPolicyDelete:
		default:
			out[i].Problems = append(out[i].Problems, Problem{Reason: templating.ReasonInvalidSpec, Key: KeyDeletionPolicy,
				Message: "must be Retain or Delete"})
		}
		out[i].Warnings = append(rotationWarnings(s, a), ShardWarnings(s)...)
		out[i].Warnings = append(out[i].Warnings, apiPathWarnings(s, a)...)
		for _, w := range a.Warnings {
			out[i].Warnings = append(out[i].Warnings, Problem{Key: w.Key, Message: w.Message})
		}
		id := ID(s)
		byID[id] = append(byID[id], i)
	}
	for _, p := range templating.AnalyseSet(tobjs) {
		if ids := byID[p.Object]; len(ids) == 1 || p.Reason == templating.ReasonDuplicateName {
			for _, i := range ids {
				out[i].Problems = append(out[i].Problems, fromTemplating(p))
			}
		}
	}
	problems, warnings := templating.SetSizes(tobjs)
	for _, p := range problems {
		if ids := byID[p.Object]; len(ids) == 1 {
			out[ids[0]].Problems = append(out[ids[0]].Problems, fromTemplating(p))
		}
	}
	for _, w := range warnings {
		if ids := byID[w.Object]; len(ids) == 1 {
			out[ids[0]].Warnings = append(out[ids[0]].Warnings, Problem{Key: w.Key, Message: w.Message})
		}
	}
	// A repeated namespace/name does not say which copy another problem is
	// about: analyse each copy again without its twins.
	for id, ids := range byID {
		if len(ids) == 1 {
			continue
		}
		for _, i := range ids {
			var rest []templating.Object
			for j, o := range tobjs {
				if j == i || ID(objs[j].Seed) != id {
					rest = append(rest, o)
				}
			}
			for _, p := range templating.AnalyseSet(rest) {
				if p.Object == id {
					out[i].Problems = append(out[i].Problems, fromTemplating(p))
				}
			}
		}
	}
	for i := range out {
		out[i].Problems = sortProblems(out[i].Problems)
		out[i].Warnings = sortProblems(out[i].Warnings)
	}
	return out
}

// Seed returns the verdict on seed among others, the other objects that
// exist (the webhook passes those it found in its cache on seed's path and
// on every path reachable through references; a copy of seed itself must
// not be among them). old is the object before an update, nil on create:
// an update must keep spec.path, and it warns about changed keys whose
// value the controller keeps. The verdict on seed equals Set's on seed when
// Set is given seed and others.
func Seed(seed seeds.Analysed, old *seeds.Analysed, others []seeds.Analysed) Verdict {
	v := Set(append([]seeds.Analysed{seed}, others...))[0]
	if old == nil {
		return v
	}
	if was, now := old.Seed.Spec.Path, seed.Seed.Spec.Path; was != now {
		v.Problems = append(v.Problems, Problem{Reason: templating.ReasonInvalidSpec, Key: KeyPath,
			Message: "changed from " + was + " to " + now + ": spec.path is immutable, delete the object and create another"})
	}
	v.Warnings = append(v.Warnings, changeWarnings(*old, seed)...)
	v.Problems = sortProblems(v.Problems)
	v.Warnings = sortProblems(v.Warnings)
	return v
}

// ID is "namespace/name", or "name" for an object without a namespace, as
// templating names objects in AnalyseSet's problems.
func ID(seed *ohmlabv1alpha1.VaultSeed) string {
	if seed.Namespace == "" {
		return seed.Name
	}
	return seed.Namespace + "/" + seed.Name
}

// fromTemplating names the key path of a templating problem: its dotted key
// in spec.data, or the field it is about.
func fromTemplating(p templating.Problem) Problem {
	key, msg := p.Key, p.Message
	if key == "" {
		switch p.Reason {
		case templating.ReasonInvalidSpec:
			key = KeyData
			if rest, ok := strings.CutPrefix(p.Message, "spec.path "); ok {
				// "spec.path: must be <mount>/<path>...", the CRD's words.
				key, msg = KeyPath, rest
			}
		case templating.ReasonInvalidRotation:
			key = KeyToken
			for _, k := range []string{KeyEvery, KeyRotate} {
				if rest, ok := strings.CutPrefix(msg, k+" "); ok {
					key, msg = k, rest
					break
				}
			}
			// "spec.rotate.token must be printable...", the CRD's words.
			msg = strings.TrimPrefix(msg, KeyToken+" ")
		case templating.ReasonDuplicateName:
			key = KeyName
		default: // DuplicatePath, RefCycle: the ring is one of paths
			key = KeyPath
		}
	}
	return Problem{Reason: p.Reason, Key: key, Message: msg}
}

// rotationWarnings warns about a rotate block without keys that
// regenerates nothing, or that regenerates the private key of a key pair
// (and so its public key) with every other generated key: whatever was
// encrypted to the old age key, or trusts the old SSH key, stops working.
func rotationWarnings(seed *ohmlabv1alpha1.VaultSeed, a templating.Analysis) []Problem {
	r := seed.Spec.Rotate
	if r == nil || len(r.Keys) > 0 {
		return nil
	}
	if len(a.RotationKeys) == 0 {
		return []Problem{{Key: KeyRotate,
			Message: "rotate has no keys and data declares no generated key (" + templating.GeneratedTemplates + "): a new token regenerates nothing"}}
	}
	var privates []string
	for _, k := range a.RotationKeys {
		if l := a.Leaves[k]; l.Kind == templating.KindAgeSecret || l.Kind == templating.KindSSHPrivate {
			privates = append(privates, k+" ("+l.Template+")")
		}
	}
	if len(privates) == 0 {
		return nil
	}
	return []Problem{{Key: KeyRotate,
		Message: "rotate has no keys, so a new token regenerates every generated key, the private keys " + strings.Join(privates, ", ") +
			" included, and their public keys with them: what was encrypted to the old age key, or trusts the old SSH key, stops working. " +
			"List the keys to regenerate in rotate.keys (a private key only when its pair must change)"}}
}

// apiPathWarnings warns about a path (spec.path, or a reference's) whose
// segment after the mount is data or metadata: KV v2's API path, which
// `vault kv get` prints as "Secret Path" (metadata: "Metadata Path"), has
// it and spec.path must not. The controller puts data/ in itself, so such a
// path names another secret, usually outside its policy ("permission
// denied"). A warning, not a refusal: a secret may be named so.
func apiPathWarnings(seed *ohmlabv1alpha1.VaultSeed, a templating.Analysis) []Problem {
	var out []Problem
	if msg, ok := apiPathMessage(seed.Spec.Path); ok {
		out = append(out, Problem{Key: KeyPath, Message: seed.Spec.Path + " " + msg})
	}
	for _, k := range a.Keys {
		for _, r := range a.Leaves[k].Refs() {
			if msg, ok := apiPathMessage(r.Path); ok {
				out = append(out, Problem{Key: k, Message: r.Template() + " reads " + r.Path + ", which " + msg})
			}
		}
	}
	return out
}

// apiPathMessage says, after path p, what is surprising about it when its
// segment after the mount is data or metadata, with more after it.
func apiPathMessage(p string) (string, bool) {
	segs := strings.Split(p, "/")
	if len(segs) < 3 || segs[1] != "data" && segs[1] != "metadata" {
		return "", false
	}
	mount, api, rest := segs[0], segs[1], strings.Join(segs[2:], "/")
	return fmt.Sprintf("has %s/ after the mount, as KV v2's API path does (vault kv prints it as %q), but a VaultSeed's path is <mount>/<path> without it: "+
		"the controller adds data/ itself and would use %s/data/%s/%s, which its policy usually does not cover (permission denied). "+
		"Write %s/%s, unless the secret's own path does begin with %s/",
		api, apiPathLabel[api], mount, api, rest, mount, rest, api), true
}

// apiPathLabel is how `vault kv` prints each API path.
var apiPathLabel = map[string]string{"data": "Secret Path", "metadata": "Metadata Path"}

// changeWarnings warns about keys an update changes although the controller
// keeps the value already on the path ("Seed once"): plain values and
// generated templates. References, composed values and derived keys follow
// their sources, and a key the update rotates (new token) takes its new
// template.
func changeWarnings(old, seed seeds.Analysed) []Problem {
	oa, na := old.Analysis, seed.Analysis
	was, now := old.Seed.Spec.Rotate, seed.Seed.Spec.Rotate
	rotated := now != nil && (was == nil || was.Token != now.Token)
	var out []Problem
	for _, k := range na.Keys {
		nl := na.Leaves[k]
		ol, ok := oa.Leaves[k]
		if !ok || nl.Refs() != nil || nl.Derived() || sameLeaf(ol, nl) {
			continue
		}
		switch {
		case nl.Kind == templating.KindPlain:
			out = append(out, Problem{Key: k,
				Message: "the declared value changed, but the controller seeds once and keeps the value already on the path: change it in Vault"})
		case rotated && slices.Contains(na.RotationKeys, k):
			// Regenerated with its new template by this rotation.
		default:
			out = append(out, Problem{Key: k,
				Message: "now declared as " + nl.Template + ", but the controller seeds once and keeps the value already on the path: list the key in rotate.keys and change rotate.token to regenerate it"})
		}
	}
	return out
}

func sameLeaf(a, b templating.Leaf) bool {
	if a.Kind != b.Kind || a.Template != b.Template {
		return false
	}
	return a.Kind != templating.KindPlain || templating.Stringify(a.Value) == templating.Stringify(b.Value)
}

func sortProblems(ps []Problem) []Problem {
	slices.SortFunc(ps, func(p, q Problem) int {
		if c := strings.Compare(p.Key, q.Key); c != 0 {
			return c
		}
		if c := strings.Compare(p.Reason, q.Reason); c != 0 {
			return c
		}
		return strings.Compare(p.Message, q.Message)
	})
	return slices.Compact(ps)
}
