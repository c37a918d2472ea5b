package templating

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxComposedRefs is the most references one composed value holds: a
// connection string needs a few (user, password, host), and each reference
// is a source to read, wait for and name in messages.
const MaxComposedRefs = 16

// Part is one piece of a composed value: literal text, or a reference
// (Ref set, Text "").
type Part struct {
	// Text is literal text, with "<<" read as "<". It may be a secret:
	// never put it in a message.
	Text string
	// Ref is the source whose value takes the part's place; zero for text.
	Ref Ref
}

// Declared is a composed leaf as typed in the object: its text with each
// '<' written "<<", and each reference's template. An earlier release, for
// which such a leaf was plain text, stored exactly this. It may be a
// secret: never put it in a message.
func (l Leaf) Declared() string {
	var b strings.Builder
	for _, p := range l.Parts {
		if p.IsRef() {
			b.WriteString(p.Ref.Template())
			continue
		}
		b.WriteString(strings.ReplaceAll(p.Text, "<", "<<"))
	}
	return b.String()
}

// IsRef says whether the part is a reference.
func (p Part) IsRef() bool { return p.Ref != (Ref{}) }

// Template returns the reference as written, "<ref:mount/path#key>".
func (r Ref) Template() string { return "<ref:" + r.String() + ">" }

// Refs returns the sources a leaf copies: the one of a ref, each reference
// of a composed value in order (a source named twice is listed once), nil
// for any other leaf.
func (l Leaf) Refs() []Ref {
	switch l.Kind {
	case KindRef:
		return []Ref{l.Ref}
	case KindCompose:
		var out []Ref
		seen := map[Ref]bool{}
		for _, p := range l.Parts {
			if p.IsRef() && !seen[p.Ref] {
				seen[p.Ref] = true
				out = append(out, p.Ref)
			}
		}
		return out
	}
	return nil
}

// Messages of a composed value that ParseLeaf refuses. They never repeat
// the value: its literal text may be a secret. A reference or template in
// it is shown as typed (", found ..."): a template is not a secret.
const (
	errComposeUnclosed = "a composed value (text with <ref:mount/path#key.path>) holds a <ref: never closed: a reference ends with '>' (write << for a literal '<')"
	errComposeLone     = "a composed value (text with <ref:mount/path#key.path>) holds a '<' that starts no reference: write << for a literal '<'"
	errComposeOther    = "a composed value joins text and <ref:mount/path#key.path> references only: give this template a key of its own in the object and compose <ref:own/path#that.key>"
	errComposeRef      = "a reference of this composed value is malformed: "
)

// errComposeMany is the message of a composed value with n references,
// more than MaxComposedRefs.
func errComposeMany(n int) string {
	return fmt.Sprintf("a composed value holds at most %d references, found %d: split the value over several keys", MaxComposedRefs, n)
}

// parseComposed parses s, a string that is not template-shaped, as a
// composed value: literal text, "<<" for a literal '<', and references
// <ref:mount/path#key.path> (to any path, the object's own included), each
// closed by the next '>'; a '>' outside a reference is literal. s is one
// when it holds a well-formed reference at a '<' not written "<<"; any
// other string is plain (composed is false), as before composed values
// existed, with the warnings it had. In a composed value every other '<' is
// refused, so that a template inside the text (<random:8>) or a reference
// that is malformed or never closed is not stored as text silently; so are
// more than MaxComposedRefs references.
func parseComposed(s string) (l Leaf, composed bool, err error) {
	var parts []Part
	var text strings.Builder
	refs := 0
	var bad string // the first span that is no reference
	badClosed := false
	flush := func() {
		if text.Len() > 0 {
			parts = append(parts, Part{Text: text.String()})
			text.Reset()
		}
	}
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			text.WriteString(s[i:])
			break
		}
		text.WriteString(s[i : i+j])
		i += j
		if strings.HasPrefix(s[i:], "<<") {
			text.WriteByte('<')
			i += 2
			continue
		}
		span, closed := composedSpan(s[i:])
		i += len(span)
		ref, ok := composedRef(span, closed)
		if !ok {
			if bad == "" {
				bad, badClosed = span, closed
			}
			continue
		}
		flush()
		parts = append(parts, Part{Ref: ref})
		refs++
	}
	flush()
	switch {
	case refs == 0:
		return Leaf{Kind: KindPlain, Value: s}, false, nil
	case bad != "":
		return Leaf{}, true, composedRefusal(bad, badClosed)
	case refs > MaxComposedRefs:
		return Leaf{}, true, errors.New(errComposeMany(refs))
	}
	return Leaf{Kind: KindCompose, Parts: parts}, true, nil
}

// composed reports whether s, a string that is not template-shaped, is a
// composed value, well-formed or not.
func composed(s string) bool {
	_, ok, _ := parseComposed(s)
	return ok
}

// composedRef is the reference span is, when it is a well-formed one.
func composedRef(span string, closed bool) (Ref, bool) {
	if !closed || !strings.HasPrefix(span, "<ref:") {
		return Ref{}, false
	}
	l, err := ParseLeaf(span)
	if err != nil {
		return Ref{}, false
	}
	return l.Ref, true
}

// composedSpan is s, which starts with '<', up to its first '>' (kept) when
// no other '<' comes before it; else up to the next '<', and closed is
// false.
func composedSpan(s string) (span string, closed bool) {
	j := strings.IndexAny(s[1:], "<>")
	switch {
	case j < 0:
		return s, false
	case s[1+j] == '<':
		return s[:1+j], false
	}
	return s[:j+2], true
}

// composedRefusal is the refusal of span, which starts at a '<' of a
// composed value and is no well-formed reference: a reference never closed
// or malformed, a template of another kind (named as typed, a template is
// not a secret), or a '<' that starts neither (never shown: the text may
// be a secret).
func composedRefusal(span string, closed bool) error {
	switch {
	case strings.HasPrefix(span, "<ref:") && !closed:
		return errors.New(errComposeUnclosed)
	case !closed:
		return errors.New(errComposeLone)
	}
	if _, _, _, shaped := templateShape(span); !shaped {
		return errors.New(errComposeLone)
	}
	l, err := ParseLeaf(span)
	switch {
	case strings.HasPrefix(span, "<ref:"):
		return errors.New(errComposeRef + err.Error() + found(span))
	case err == nil && l.Kind != KindPlain:
		return errors.New(errComposeOther + found(span))
	}
	return errors.New(errComposeLone)
}

// found is ", found <template>" as typed, cut at maxTyped characters.
func found(template string) string {
	typed := []rune(template)
	if len(typed) > maxTyped {
		return ", found " + strconv.QuoteToASCII(string(typed[:maxTyped])) + "..."
	}
	return ", found " + strconv.QuoteToASCII(template)
}

// Compose is the value of a composed leaf: its text, with each reference's
// source value as value returns it; or "" and the sources that value
// does not give or gives empty (in part order, each once).
func (l Leaf) Compose(value func(Ref) (string, bool)) (v string, missing []Ref) {
	var b strings.Builder
	seen := map[Ref]bool{}
	for _, p := range l.Parts {
		if !p.IsRef() {
			b.WriteString(p.Text)
			continue
		}
		src, ok := value(p.Ref)
		if !ok || src == "" {
			if !seen[p.Ref] {
				seen[p.Ref] = true
				missing = append(missing, p.Ref)
			}
			continue
		}
		b.WriteString(src)
	}
	if missing != nil {
		return "", missing
	}
	return b.String(), nil
}

// literalLen is the bytes of a composed leaf's text.
func (l Leaf) literalLen() int {
	n := 0
	for _, p := range l.Parts {
		n += len(p.Text)
	}
	return n
}
