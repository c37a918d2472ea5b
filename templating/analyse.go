package templating

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Object is one VaultSeed as templating sees it.
type Object struct {
	// Namespace and Name identify the object in AnalyseSet's problems.
	Namespace, Name string
	// Path is spec.path, "mount/path" (see [ValidPath]).
	Path string
	// Data is spec.data decoded from JSON: nodes are map[string]any, leaves
	// are string, bool, float64, int64, int or json.Number. Lists, nil and
	// other types are problems.
	Data map[string]any
	// Rotate is spec.rotate; nil when absent.
	Rotate *Rotate
}

// Rotate is spec.rotate (product document, "Rotation").
type Rotate struct {
	// Token triggers one regeneration per distinct value; "" when none.
	Token string
	// Every is the rotation period as spelled ([ParsePeriod]); "" when
	// none. A rotate block needs a token, a period, or both.
	Every string
	// Keys are the dotted key paths to regenerate; empty means every
	// generated key.
	Keys []string
}

// Reasons of problems, equal to the VaultSeed condition reasons of the API
// (product document, "Conditions").
const (
	// ReasonInvalidSpec: spec.path or spec.data is wrong.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonInvalidRotation: spec.rotate is wrong.
	ReasonInvalidRotation = "InvalidRotation"
	// ReasonRefCycle: objects reference each other's paths in a ring.
	ReasonRefCycle = "RefCycle"
	// ReasonDuplicatePath: two objects declare one path.
	ReasonDuplicatePath = "DuplicatePath"
	// ReasonDuplicateName: two objects have one namespace/name.
	ReasonDuplicateName = "DuplicateName"
)

// Problem is one thing wrong with an object or a set of objects.
type Problem struct {
	// Reason is one of the Reason constants.
	Reason string
	// Object is "namespace/name" (just "name" without a namespace) in
	// AnalyseSet; "" from Analyse.
	Object string
	// Key is the dotted key path the problem is about; "" when it is not
	// about one key. For a bad key name it is the key's path as written, and
	// for an empty key name the path of its map.
	Key string
	// Message is plain English. It names keys, paths and templates (a
	// malformed one of a known kind as typed), never a value: a plain leaf
	// may be a secret somebody typed.
	Message string
}

// String returns "<key>: <message>", or the message alone when Key is "".
func (p Problem) String() string {
	if p.Key == "" {
		return p.Message
	}
	return p.Key + ": " + p.Message
}

// Analysis is what Analyse finds in one object.
type Analysis struct {
	// Path is the object's spec.path; Fill resolves references to it.
	Path string
	// Leaves are the well-formed leaves by dotted key path. Leaves under a
	// bad key name, and malformed ones, are left out (and are Problems).
	Leaves map[string]Leaf
	// Keys are the dotted key paths of Leaves, sorted.
	Keys []string
	// Problems are every problem found, sorted by Key, then Reason, then
	// Message; nil when the object is valid.
	Problems []Problem
	// RotationKeys are the generated keys a change of rotate.token
	// regenerates, sorted: the valid keys of rotate.keys, or every generated
	// key when rotate.keys is empty. A key pair rotates through its private
	// key (the public follows). Nil without spec.rotate.
	RotationKeys []string
	// RotationPeriod is rotate.every parsed, 0 without one (or when it does
	// not parse: a problem).
	RotationPeriod time.Duration
	// RefPaths are the distinct paths the object's references (alone or
	// in composed values) read, sorted,
	// without the object's own path (Fill resolves those itself).
	RefPaths []string
	// Warnings are legal but surprising leaves, sorted by Key then Message,
	// with an empty Reason: a plain string that is a template with white
	// space around it ([LooksLikeTemplate]), written as literal text; a
	// composed value that is one reference with white space around it; a
	// plain string that looks like a secret ([LooksLikeSecret]); values
	// over MaxEntryBytes (with an empty Key).
	Warnings []Problem
}

// Analyse checks one object and returns every problem at once (product
// document, "Templates"). All are
// InvalidSpec unless said otherwise:
//   - spec.path that [ValidPath] refuses (message "spec.path " + PathMessage);
//   - a key name that is empty, contains a dot, is longer than MaxKeyName
//     characters, or contains a control or invisible (format) character;
//   - a leaf that is a list, null or another non-leaf type;
//   - a malformed template ([ParseLeaf]), shown as typed when its kind is
//     a template's (malformedMessage); a composed value with a '<' that
//     starts no well-formed reference, or more than MaxComposedRefs
//     references (compose.go);
//   - <bcrypt:k> whose k is not declared, is a map, is itself derived
//     (bcrypt or a public key), or is statically longer than 72 bytes
//     (<random:N> or <hex:N> with N > 72, a private key, a plain string
//     over 72 bytes, or a reference to the own path leading to one);
//   - for each key pair (<age:secret>/<age:public>,
//     <ssh:private>/<ssh:public>): a public key without exactly one private
//     key of its pair; more than one private key of a pair;
//   - a reference to the object's own path (alone or in a composed value)
//     whose key is not declared (a
//     hand-filled key is declared as ""), is a map, or closes a cycle of keys
//     (through references to the own path and bcrypt sources); references
//     to other paths are checked by AnalyseSet and the reconciler;
//   - values that come to more than MaxWriteBytes of JSON (writeSize: what
//     the object declares, a reference to the own path as the key it
//     copies, one to another path left out: [SetSizes] counts those), which
//     Vault refuses in one request and the controller would generate first;
//     above MaxEntryBytes, a warning;
//   - more than MaxCostlyKeys bcrypt hashes and key pairs ([CostlyKeys]),
//     which one reconcile could not compute in its time;
//   - InvalidRotation: neither rotate.token nor rotate.every, a token
//     Vault refuses in custom_metadata ([TokenProblem], message
//     "spec.rotate.token " + its message), a period [ParsePeriod] refuses
//     (message "spec.rotate.every " + PeriodMessage); rotate.keys naming a key that
//     is not declared, a map, or a key that is not generated (plain, "",
//     <ref:>, <bcrypt:>; for a public key, list its private key: the pair
//     rotates together).
func Analyse(o Object) Analysis {
	an := analyser{
		a:        Analysis{Path: o.Path, Leaves: make(map[string]Leaf)},
		declared: make(map[string]bool),
		nodes:    make(map[string]bool),
	}
	if !ValidPath(o.Path) {
		an.problem(ReasonInvalidSpec, "", "spec.path "+PathMessage)
	}
	an.walk("", o.Data, true)
	for k := range an.a.Leaves {
		an.a.Keys = append(an.a.Keys, k)
	}
	sort.Strings(an.a.Keys)
	an.checkLeaves()
	an.checkRotation(o.Rotate)
	an.checkCost()
	an.checkSize()
	// A key under a refused one (an invisible character) still names a
	// warning or a problem of its own: it must not reach a terminal raw.
	for _, ps := range [][]Problem{an.a.Warnings, an.a.Problems} {
		for i := range ps {
			ps[i].Key = PrintableKey(ps[i].Key)
		}
	}
	sort.Slice(an.a.Warnings, func(i, j int) bool {
		p, q := an.a.Warnings[i], an.a.Warnings[j]
		if p.Key != q.Key {
			return p.Key < q.Key
		}
		return p.Message < q.Message
	})
	sort.Slice(an.a.Problems, func(i, j int) bool {
		p, q := an.a.Problems[i], an.a.Problems[j]
		if p.Key != q.Key {
			return p.Key < q.Key
		}
		if p.Reason != q.Reason {
			return p.Reason < q.Reason
		}
		return p.Message < q.Message
	})
	return an.a
}

type analyser struct {
	a        Analysis
	declared map[string]bool // every leaf under valid key names, well-formed or not
	nodes    map[string]bool // every map under valid key names
}

func (an *analyser) problem(reason, key, msg string) {
	an.a.Problems = append(an.a.Problems, Problem{Reason: reason, Key: key, Message: msg})
}

// walk visits m; valid is false under a bad key name, where leaves are still
// checked but not recorded (their dotted path would be ambiguous).
func (an *analyser) walk(prefix string, m map[string]any, valid bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path, ok := joinKey(prefix, k), valid
		switch {
		case k == "" && prefix == "":
			an.problem(ReasonInvalidSpec, "", "a key name at the top level of data is empty")
			ok = false
		case k == "":
			an.problem(ReasonInvalidSpec, prefix, "a key name in this map is empty")
			ok = false
		case strings.Contains(k, "."):
			an.problem(ReasonInvalidSpec, path, fmt.Sprintf("key name %q contains a dot: nest maps instead", k))
			ok = false
		case utf8.RuneCountInString(k) > MaxKeyName:
			// The key itself would make the message as long: it is shown cut.
			an.problem(ReasonInvalidSpec, joinKey(prefix, shortKey(k)), fmt.Sprintf("key name is %d characters long, more than %d: kubectl get -o yaml cannot print a longer key", utf8.RuneCountInString(k), MaxKeyName))
			ok = false
		case firstInvisible(k) >= 0:
			r := firstInvisible(k)
			an.problem(ReasonInvalidSpec, joinKey(prefix, quoteKey(k)), fmt.Sprintf("key name %s contains the control or invisible character %U: a key that looks like another is refused", strconv.QuoteToASCII(k), r))
			ok = false
		case k == "true" || k == "false":
			// YAML 1.1 (helm, kubectl) reads an unquoted on/off, yes/no or
			// y/n key as a boolean: a <ref:...#y> then waits forever.
			an.a.Warnings = append(an.a.Warnings, Problem{Key: path, Message: fmt.Sprintf(
				"key name %q is what YAML 1.1 makes of an unquoted on, off, yes, no, y or n: quote the key in the YAML if you meant that name", k)})
		}
		switch v := m[k].(type) {
		case map[string]any:
			if ok {
				an.nodes[path] = true
			}
			if len(v) == 0 {
				// A leaf-less node declares nothing: KV v2 holds values,
				// and nothing is written for it.
				an.a.Warnings = append(an.a.Warnings, Problem{Key: path, Message: "is an empty map: it declares no key, so nothing is written for it; give it keys, or \"\" for a value filled by hand"})
			}
			an.walk(path, v, ok)
		case string:
			l, err := ParseLeaf(v)
			if err != nil {
				an.problem(ReasonInvalidSpec, path, malformedMessage(v, err))
			}
			if l.Kind == KindPlain {
				an.looksLikeTemplate(path, v)
				if LooksLikeSecret(v) {
					an.a.Warnings = append(an.a.Warnings, Problem{Key: path, Message: secretWarning})
				}
			}
			if l.Kind == KindCompose {
				an.composedWarnings(path, l)
			}
			an.leaf(path, l, ok && err == nil, ok)
		case bool, float64, int64, int, json.Number:
			an.leaf(path, Leaf{Kind: KindPlain, Value: v}, ok, ok)
		case nil:
			an.problem(ReasonInvalidSpec, path, `null is not a value: leaves are strings, numbers or booleans ("" for a value filled by hand)`)
		default:
			kind := reflect.ValueOf(v).Kind()
			if kind == reflect.Slice || kind == reflect.Array {
				an.problem(ReasonInvalidSpec, path, "lists are not supported: leaves are strings, numbers or booleans, nodes are maps")
			} else {
				an.problem(ReasonInvalidSpec, path, "unsupported value type: leaves are strings, numbers or booleans, nodes are maps")
			}
		}
	}
}

// secretWarning is the warning of a plain value that [LooksLikeSecret]: it
// names the key (the Problem's), never the value or its length.
const secretWarning = `is a plain value that looks like a secret (long and random, or a private key): spec.data is kept in Git and in the cluster, ` +
	`readable by anyone who can read the object; generate it with a template (<random:N>, <hex:N>, <ssh:private>, <age:secret>), ` +
	`or declare it as "" and fill it in Vault by hand`

// looksLikeTemplate warns about a plain string v that is a template with
// white space around it, or holds one inside other text or unclosed. The
// message names the template when it is well formed (a template is not a
// secret), never v.
func (an *analyser) looksLikeTemplate(key, v string) {
	t, ok := LooksLikeTemplate(v)
	switch {
	case !ok:
		if closed, err := ParseLeaf(v + ">"); err == nil && closed.Kind != KindPlain && closed.Kind != KindCompose {
			// The whole value is a template but for its '>': that
			// template is named, not v's other text (there is none).
			an.a.Warnings = append(an.a.Warnings, Problem{Key: key, Message: "is plain text, the template " + closed.Template +
				" without its closing '>': it is stored in Vault literally, as typed, not generated; write " + closed.Template + " to generate the value"})
		} else if t, ok := EmbeddedTemplate(v); ok && strings.HasSuffix(t, "…") {
			an.a.Warnings = append(an.a.Warnings, Problem{Key: key, Message: "is plain text holding the start of a template, " + t +
				", never closed: it is stored in Vault literally, as typed, not generated; to generate a value, make the template the key's whole value and close it with '>'"})
		} else if ok && strings.HasPrefix(t, "<ref:") {
			// A reference outside a composed value follows "<<".
			an.a.Warnings = append(an.a.Warnings, Problem{Key: key, Message: "is plain text holding " + t +
				" after '<<', which is a literal '<' only in a composed value: the controller writes the text as it is; write a single '<' before it to compose the reference's value into the text"})
		} else if ok {
			an.a.Warnings = append(an.a.Warnings, Problem{Key: key, Message: "is plain text holding " + t +
				": a template is a key's whole value, so the controller writes the text as it is; give the template a key of its own"})
		} else if strings.Contains(v, "<ref:") {
			an.a.Warnings = append(an.a.Warnings, Problem{Key: key, Message: "is plain text holding a <ref: that is no reference (<ref:mount/path#key.path>, " +
				"the path " + PathRule + "): the controller writes the text as it is; fix the reference to compose its source's value into the text"})
		}
		return
	case t != "":
		an.a.Warnings = append(an.a.Warnings, Problem{Key: key, Message: "is plain text, not the template " + t +
			": with the white space around it the controller writes the text as it is; remove the white space to generate the value"})
	default:
		an.a.Warnings = append(an.a.Warnings, Problem{Key: key, Message: "is plain text that looks like a template with white space around it: " +
			"the controller writes the text as it is; remove the white space to make it a template"})
	}
}

// composedWarnings warns of a composed value that is one reference with
// white space around it (a YAML block's final newline, a stray space): its
// value is the source's with that white space, which its author rarely
// means; and of text in it that looks like a secret. They name the
// reference, never the text.
func (an *analyser) composedWarnings(key string, l Leaf) {
	var text strings.Builder
	refs := 0
	for _, p := range l.Parts {
		if p.IsRef() {
			refs++
		}
		text.WriteString(p.Text)
	}
	t := text.String()
	if refs == 1 && t != "" && strings.TrimSpace(t) == "" {
		r := l.Refs()[0].Template()
		an.a.Warnings = append(an.a.Warnings, Problem{Key: key, Message: "is " + r + " with white space around it: a composed value, the source's value with that white space; remove the white space to copy the source exactly"})
	}
	for _, p := range l.Parts {
		if !p.IsRef() && LooksLikeSecret(p.Text) {
			an.a.Warnings = append(an.a.Warnings, Problem{Key: key, Message: composedSecretWarning})
			return
		}
	}
}

// composedSecretWarning is the warning of a composed value whose text
// [LooksLikeSecret].
const composedSecretWarning = `is a composed value whose text looks like a secret (long and random, or a private key): spec.data is kept in Git and in the cluster, ` +
	`readable by anyone who can read the object; put the secret in a key of its own (a template, or "" filled in Vault by hand) and compose <ref:> of it`

func (an *analyser) leaf(path string, l Leaf, wellFormed, declared bool) {
	if declared {
		an.declared[path] = true
	}
	if wellFormed {
		an.a.Leaves[path] = l
	}
}

// checkLeaves checks bcrypt sources, key pairs and references to the own
// path, and collects RefPaths.
func (an *analyser) checkLeaves() {
	a := &an.a
	privates := privateKeys(*a)
	deps := graph{} // key -> keys its value derives from, within the path
	refPaths := map[string]bool{}
	selfRefs := false
	for _, k := range a.Keys {
		l := a.Leaves[k]
		switch l.Kind {
		case KindBcrypt:
			if an.checkSource(k, l.Template+" hashes", l.Source) {
				src := a.Leaves[l.Source]
				switch {
				case src.Derived():
					an.problem(ReasonInvalidSpec, k, fmt.Sprintf("%s hashes %s, which is itself derived (%s): hash the key it derives from", l.Template, l.Source, src.Template))
				case an.staticLen(l.Source, len(a.Leaves)) > MaxBcryptInput:
					an.problem(ReasonInvalidSpec, k, fmt.Sprintf("%s hashes %s, which is longer than 72 bytes, the most bcrypt accepts", l.Template, l.Source))
				default:
					deps.add(k, l.Source)
				}
			}
		case KindRef, KindCompose:
			for _, r := range l.Refs() {
				if r.Path != a.Path {
					refPaths[r.Path] = true
				} else if an.checkSource(k, r.Template()+" copies", r.Key) {
					deps.add(k, r.Key)
					selfRefs = true
				}
			}
		default:
			if p := pairOf(l.Kind); p != nil {
				an.checkPair(k, l.Kind, p, privates[p], deps)
			}
		}
	}
	for p := range refPaths {
		a.RefPaths = append(a.RefPaths, p)
	}
	sort.Strings(a.RefPaths)
	if !selfRefs {
		return // every cycle of keys goes through a reference to the own path
	}
	rings := deps.rings()
	for _, k := range a.Keys {
		if ring := rings[k]; ring != nil {
			an.problem(ReasonInvalidSpec, k, "cycle of keys within this path: "+ringString(ring))
		}
	}
}

// checkPair checks key k of kind kind, of the key pair p whose private
// keys in the object are privates: one private key per object, and a public
// key needs it (and derives from it).
func (an *analyser) checkPair(k string, kind Kind, p *keyPair, privates []string, deps graph) {
	n := len(privates)
	switch {
	case kind == p.private && n > 1:
		an.problem(ReasonInvalidSpec, k, fmt.Sprintf("an object holds at most one %s, found %d (%s)", p.privateTemplate(), n, strings.Join(privates, ", ")))
	case kind == p.public && n == 0:
		an.problem(ReasonInvalidSpec, k, fmt.Sprintf("%s needs an %s in the same object", p.publicTemplate(), p.privateTemplate()))
	case kind == p.public && n == 1:
		deps.add(k, privates[0])
	case kind == p.public:
		an.problem(ReasonInvalidSpec, k, fmt.Sprintf("%s needs exactly one %s in the same object, found %d (%s)", p.publicTemplate(), p.privateTemplate(), n, strings.Join(privates, ", ")))
	}
}

// checkSource checks that src, which key k's value derives from ("<t>
// hashes" or "<t> copies"), is a declared leaf, and reports whether it is a
// well-formed one (a malformed one is reported on its own key).
func (an *analyser) checkSource(k, what, src string) bool {
	switch {
	case an.nodes[src]:
		an.problem(ReasonInvalidSpec, k, fmt.Sprintf("%s %s, which is a map, not a leaf", what, src))
		return false
	case !an.declared[src]:
		an.problem(ReasonInvalidSpec, k, fmt.Sprintf(`%s %s, which data does not declare (a key filled by hand is declared as "")`, what, src))
		return false
	}
	_, ok := an.a.Leaves[src]
	return ok
}

// staticLen is the length in bytes that key's value is known to have at
// most before it is generated, following references to the own path up to
// depth steps; 0 when unknown (references to other paths).
func (an *analyser) staticLen(key string, depth int) int {
	l, ok := an.a.Leaves[key]
	if !ok || depth < 0 {
		return 0
	}
	if isPrivate(l.Kind) {
		return pairOf(l.Kind).privateLen
	}
	switch l.Kind {
	case KindRandom, KindHex, KindPassword:
		return l.Length
	case KindPlain:
		return len(Stringify(l.Value))
	case KindRef:
		if l.Ref.Path == an.a.Path {
			return an.staticLen(l.Ref.Key, depth-1)
		}
	case KindCompose:
		// At least its text and what is known of its own path's parts.
		n := l.literalLen()
		for _, p := range l.Parts {
			if p.IsRef() && p.Ref.Path == an.a.Path {
				n += an.staticLen(p.Ref.Key, depth-1)
			}
		}
		return n
	}
	return 0
}

func (an *analyser) checkRotation(r *Rotate) {
	if r == nil {
		return
	}
	a := &an.a
	if r.Token == "" && r.Every == "" {
		an.problem(ReasonInvalidRotation, "", "spec.rotate "+RotateMessage)
	}
	if r.Every != "" {
		d, err := ParsePeriod(r.Every)
		if err != nil {
			an.problem(ReasonInvalidRotation, "", "spec.rotate.every "+err.Error())
		}
		a.RotationPeriod = d
	}
	for _, msg := range TokenProblem(r.Token) {
		an.problem(ReasonInvalidRotation, "", "spec.rotate.token "+msg)
	}
	if len(r.Keys) == 0 {
		for _, k := range a.Keys {
			if a.Leaves[k].Generated() {
				a.RotationKeys = append(a.RotationKeys, k)
			}
		}
		return
	}
	keys := slices.Clone(r.Keys)
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		l, ok := a.Leaves[k]
		switch {
		case an.nodes[k]:
			an.problem(ReasonInvalidRotation, k, fmt.Sprintf("rotate.keys names %s, which is a map: list its generated keys", k))
		case !an.declared[k]:
			an.problem(ReasonInvalidRotation, k, fmt.Sprintf("rotate.keys names %q, which data does not declare", k))
		case !ok:
			// Malformed: reported as InvalidSpec on the key itself.
		case isPublic(l.Kind):
			p := pairOf(l.Kind)
			an.problem(ReasonInvalidRotation, k, fmt.Sprintf("rotate.keys names an %s: list its %s instead, the pair rotates together", p.publicTemplate(), p.privateTemplate()))
		case !l.Generated():
			what := "a plain value"
			switch {
			case l.Kind == KindCompose:
				what = "a composed value"
			case l.Template != "":
				what = l.Template
			}
			an.problem(ReasonInvalidRotation, k, fmt.Sprintf("rotate.keys names %s, which is %s, not generated: only %s rotate", k, what, GeneratedTemplates))
		default:
			a.RotationKeys = append(a.RotationKeys, k)
		}
	}
}

// MaxKeyName is the most characters of one key name: YAML's limit for a
// plain mapping key, which `kubectl get -o yaml` and `ohmlab plan` of its
// output need.
const MaxKeyName = 1024

// invisible reports whether r is a control character or an invisible
// formatting one (zero-width space, bidirectional overrides): in a key name
// it makes two keys look alike, or rewrites the terminal that prints it.
func invisible(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// firstInvisible is the first rune of k that is invisible, or -1.
func firstInvisible(k string) rune {
	if i := strings.IndexFunc(k, invisible); i >= 0 {
		r, _ := utf8.DecodeRuneInString(k[i:])
		return r
	}
	return -1
}

// shortKey is a long key name cut for a message.
func shortKey(k string) string {
	r := []rune(k)
	return quoteKey(string(r[:32])) + "..."
}

// PrintableKey is k with the characters a terminal does not print as
// themselves (controls, bidirectional overrides, zero-width marks)
// escaped (\u202e), and every other character, non-ASCII included, kept.
func PrintableKey(k string) string {
	if !strings.ContainsFunc(k, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return k
	}
	var b strings.Builder
	for _, r := range k {
		if strconv.IsPrint(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// quoteKey is k with control, invisible and non-ASCII characters escaped
// (\x1b, \u200b), so that a message prints it as it is.
func quoteKey(k string) string {
	q := strconv.QuoteToASCII(k)
	return q[1 : len(q)-1]
}
