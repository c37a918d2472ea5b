package templating

import (
	"errors"
	"strconv"
	"strings"
	"unicode"
)

// Kind is the kind of a leaf of spec.data (product document, "Templates").
type Kind string

// Kinds of leaf. A template's kind is named after its template, except that
// each key pair (<age:secret> and <age:public>, <ssh:private> and
// <ssh:public>) is two kinds.
const (
	// KindPlain is a plain value: any string that is not exactly one
	// template (including ""), a number or a boolean. Seeded once, never
	// overwritten.
	KindPlain Kind = "plain"
	// KindRandom is <random:N>: N characters from [A-Za-z0-9], N in 1..4096.
	KindRandom Kind = "random"
	// KindHex is <hex:N>: N lowercase hex characters, N even, 2..4096.
	KindHex Kind = "hex"
	// KindUUID is <uuid>: a random UUID version 4 in its 36-character form.
	KindUUID Kind = "uuid"
	// KindAgeSecret is <age:secret>: an age X25519 identity,
	// "AGE-SECRET-KEY-1…" (74 characters).
	KindAgeSecret Kind = "age-secret"
	// KindAgePublic is <age:public>: the age X25519 recipient ("age1…", 62
	// characters) of the object's single <age:secret>.
	KindAgePublic Kind = "age-public"
	// KindSSHPrivate is <ssh:private>: an Ed25519 key in OpenSSH private key
	// format, PEM-encoded ("-----BEGIN OPENSSH PRIVATE KEY-----", 387
	// bytes with the final newline).
	KindSSHPrivate Kind = "ssh-private"
	// KindSSHPublic is <ssh:public>: the public key of the object's single
	// <ssh:private> in authorized_keys format, without comment
	// ("ssh-ed25519 AAAA…", 80 characters).
	KindSSHPublic Kind = "ssh-public"
	// KindBcrypt is <bcrypt:key.path>: the bcrypt hash of another key of the
	// same object.
	KindBcrypt Kind = "bcrypt"
	// KindRef is <ref:mount/path#key.path>: a copy of a key of a path,
	// kept equal to its source.
	KindRef Kind = "ref"
	// KindPassword is <password:N> and <password:N:classes>: N characters
	// holding at least one of each of its character classes (Classes).
	KindPassword Kind = "password"
	// KindVaultPassword is <vault-password:policy>: a password that Vault's
	// password policy of that name generates.
	KindVaultPassword Kind = "vault-password"
	// KindCompose is text holding one or more <ref:mount/path#key.path>
	// ("postgres://app:<ref:m/db#password>@db:5432/app"): the text with
	// each reference replaced by its source's value, kept equal to its
	// sources as a copy is (compose.go).
	KindCompose Kind = "compose"
)

// Limits of <random:N> and <hex:N>, in characters.
const (
	MinRandomLength = 1
	MaxRandomLength = 4096
	MinHexLength    = 2
	MaxHexLength    = 4096
)

// Ref is the source of a <ref:mount/path#key.path> leaf.
type Ref struct {
	// Path is "mount/path" as [ValidPath] accepts it.
	Path string
	// Key is the dotted key path of the source in that path ("a.b").
	Key string
}

// String returns the reference as written in its template, "mount/path#key".
func (r Ref) String() string { return r.Path + "#" + r.Key }

// Leaf is one parsed leaf of spec.data.
type Leaf struct {
	// Kind says which of the fields below are set.
	Kind Kind
	// Template is the declared string of a template ("<random:24>"); "" for
	// plain leaves.
	Template string
	// Value is the declared value of a plain leaf: string, bool, float64,
	// int64, int or json.Number. Nil for templates. It may be a secret: never
	// put it in a message.
	Value any
	// Length is N of <random:N>, <hex:N> and <password:N>, in characters.
	Length int
	// Source is the dotted key path hashed by a bcrypt leaf, in the same
	// object.
	Source string
	// Ref is the source of a ref leaf.
	Ref Ref
	// Classes are the character classes of a password leaf (Length is its
	// N), and Symbols its symbol set when Classes hold ClassSymbol.
	Classes CharClasses
	Symbols string
	// Policy is the name of the Vault password policy of a vault-password
	// leaf.
	Policy string
	// Parts are a composed leaf's text and references, in order; Template
	// is "" for it (its text may be a secret).
	Parts []Part
}

// Generated reports whether the leaf's value is drawn from randomness:
// random, hex, uuid, password, vault-password and the private key of a key
// pair (age-secret, ssh-private). Only generated keys can be rotated.
func (l Leaf) Generated() bool {
	switch l.Kind {
	case KindRandom, KindHex, KindUUID, KindPassword, KindVaultPassword:
		return true
	}
	return isPrivate(l.Kind)
}

// Derived reports whether the leaf's value is computed from another key of
// the same object: bcrypt (from its Source) and the public key of a key
// pair (from the object's private key of that pair).
func (l Leaf) Derived() bool {
	return l.Kind == KindBcrypt || isPublic(l.Kind)
}

// templateList names every template, for messages.
const templateList = "<random:N>, <hex:N>, <password:N>, <password:N:classes>, <vault-password:policy>, <uuid>, <age:secret>, <age:public>, <ssh:private>, <ssh:public>, <bcrypt:key.path>, <ref:mount/path#key.path>"

// GeneratedTemplates names the templates whose values are generated, the
// ones a rotation regenerates, for messages.
const GeneratedTemplates = "<random:N>, <hex:N>, <password:N>, <vault-password:policy>, <uuid>, <age:secret>, <ssh:private>"

// MaxPathLength is the longest path accepted, in bytes; the CRD's rule of
// spec.path says the same.
const MaxPathLength = 512

// PathRule says which strings are paths. Every refusal of a path says it in
// these words: the CRD's validation of spec.path (its XValidation message
// is PathMessage), the webhook and `ohmlab validate`: a path means one
// Vault path everywhere.
const PathRule = "<mount>/<path>: two or more segments of letters, digits, '.', '_' and '-', separated by '/' (no segment '.' or '..', at most 512 characters)"

// PathMessage is the message of a spec.path that [ValidPath] refuses.
const PathMessage = "must be " + PathRule

// ValidPath reports whether p is a KV path as spec.path and references
// declare it (see PathRule). The alphabet keeps one spelling per Vault path,
// so that two objects cannot name one path two ways and escape the
// duplicate check: vault/api cleans every request path (path.Join), so the
// segments "." and ".." and an empty segment would read and write another
// path than the one declared; "?", "#", "%" and white space are special in
// a URL, where a client that does not escape them (curl, a browser) reads
// another path or a query; "+" and "*" are the globs of Vault policies
// (platforms/+/+/*); "#" also ends a reference's path. Letters, digits,
// ".", "_" and "-" are what platform, tier and application names need.
func ValidPath(p string) bool {
	if len(p) > MaxPathLength {
		return false
	}
	segs := strings.Split(p, "/")
	if len(segs) < 2 {
		return false
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return false
		}
		for _, c := range []byte(s) {
			if !pathByte(c) {
				return false
			}
		}
	}
	return true
}

func pathByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// MaxTokenBytes is the most bytes of UTF-8 a rotation token may have: the
// controller records it as a custom_metadata value of the path, which Vault
// refuses over 512 bytes (vaultkv.MaxMetadataValueBytes). The CRD's rule on
// spec.rotate.token says the same.
const MaxTokenBytes = 512

// TokenPrintableMessage and TokenLengthMessage are the messages of a
// rotation token that [TokenProblem] refuses, in the CRD's rules on
// spec.rotate.token too (webhooks.TestTokenSpellings checks that they
// agree).
const (
	TokenPrintableMessage = "must be printable: letters, marks, digits, punctuation, symbols and the ASCII space only, no tab, newline, other space or invisible character (Vault refuses them in custom_metadata, where the token is recorded)"
	TokenLengthMessage    = "must be at most 512 bytes of UTF-8 (Vault refuses a longer custom_metadata value, where the token is recorded)"
)

// TokenProblem returns the messages of what Vault would refuse in token as a
// custom_metadata value (its rule is unicode.IsPrint on every character,
// and at most 512 bytes), nil when it accepts it, sorted as the webhook
// sorts them. An empty token is Analyse's own problem.
func TokenProblem(token string) []string {
	var out []string
	if len(token) > MaxTokenBytes {
		out = append(out, TokenLengthMessage)
	}
	if strings.IndexFunc(token, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		out = append(out, TokenPrintableMessage)
	}
	return out
}

// ParseLeaf parses one string leaf of spec.data (product document,
// "Templates").
//
// A string is template-shaped when it starts with "<", ends with ">", holds
// no other "<" or ">" (but in a <password:> symbol= list), and its name (the text before the first ":", or all
// of it) is a letter followed by letters, digits, "-" or "_". Any other
// string that holds a well-formed <ref:...> is a composed value
// ([parseComposed]); the rest, including "" and strings with text around
// another template, are plain leaves whose Value is s.
//
// A template-shaped string must be exactly one known template, with valid
// arguments; otherwise ParseLeaf returns an error. That includes unknown
// kinds such as "<foo:1>" and wrong case such as "<Random:8>": treating them
// as plain would silently store the template text as a password, so a plain
// value cannot have that shape.
//
// Errors are plain English and never repeat s or its arguments: they name
// the template kind and its rule. Analyse adds s as typed when its kind is a
// template's (malformedMessage); an unknown kind may be a secret.
func ParseLeaf(s string) (Leaf, error) {
	name, args, hasArgs, shaped := templateShape(s)
	if !shaped {
		l, _, err := parseComposed(s)
		return l, err
	}
	switch name {
	case "random":
		n, ok := parseLength(args)
		if !hasArgs || !ok || n < MinRandomLength || n > MaxRandomLength {
			return Leaf{}, errors.New("<random:N> needs a decimal length N from 1 to 4096")
		}
		return Leaf{Kind: KindRandom, Template: s, Length: n}, nil
	case "hex":
		n, ok := parseLength(args)
		if !hasArgs || !ok || n < MinHexLength || n > MaxHexLength || n%2 != 0 {
			return Leaf{}, errors.New("<hex:N> needs an even decimal length N from 2 to 4096")
		}
		return Leaf{Kind: KindHex, Template: s, Length: n}, nil
	case "password":
		return parsePassword(s, args, hasArgs)
	case "vault-password":
		if !hasArgs || !validPolicyName(args) {
			return Leaf{}, errors.New(errVaultPassword)
		}
		return Leaf{Kind: KindVaultPassword, Template: s, Policy: args}, nil
	case "uuid":
		if hasArgs {
			return Leaf{}, errors.New("<uuid> takes no argument")
		}
		return Leaf{Kind: KindUUID, Template: s}, nil
	case "bcrypt":
		if !hasArgs || !validKeyPath(args) {
			return Leaf{}, errors.New("<bcrypt:key.path> needs the dotted key path of another key of the same object (no empty segment)")
		}
		return Leaf{Kind: KindBcrypt, Template: s, Source: args}, nil
	case "ref":
		path, key, hasKey := strings.Cut(args, "#")
		if !hasArgs || !hasKey || !validKeyPath(key) {
			return Leaf{}, errors.New("<ref:mount/path#key.path> needs a path, then '#', then a dotted key path (no empty segment)")
		}
		if !ValidPath(path) {
			return Leaf{}, errors.New("the path of <ref:mount/path#key.path> " + PathMessage)
		}
		return Leaf{Kind: KindRef, Template: s, Ref: Ref{Path: path, Key: key}}, nil
	}
	if p := pairNamed(name); p != nil {
		switch {
		case hasArgs && args == p.privateArg:
			return Leaf{Kind: p.private, Template: s}, nil
		case hasArgs && args == p.publicArg:
			return Leaf{Kind: p.public, Template: s}, nil
		}
		return Leaf{}, errors.New("an " + name + " template must be " + p.privateTemplate() + " or " + p.publicTemplate())
	}
	return Leaf{}, errors.New("unknown template kind (templates are lowercase: " + templateList + "); a plain value cannot have the shape <name> or <name:args>")
}

// maxTyped is the most characters of a refused template that its message
// shows.
const maxTyped = 128

// malformedMessage is the message of a template-shaped string s that
// ParseLeaf refused with err: err's rule, then s as typed when its kind is a
// template's, whatever its case (a template is not a secret: "<random:0>",
// "<ref:noslash>", "<RANDOM:12>", with the lowercase template to write). The
// text of an unknown kind is never shown: "<hunter2>" is refused for its
// shape alone, and may be a password.
func malformedMessage(s string, err error) string {
	name, args, hasArgs, _ := templateShape(s)
	lower := strings.ToLower(name)
	if !knownKind(lower) {
		return err.Error()
	}
	typed := []rune(s)
	found := ", found " + strconv.QuoteToASCII(s)
	if len(typed) > maxTyped {
		found = ", found " + strconv.QuoteToASCII(string(typed[:maxTyped])) + "..."
	}
	if lower == name {
		return err.Error() + found
	}
	fixed := "<" + lower
	if hasArgs {
		fixed += ":" + args
	}
	fixed += ">"
	if _, ferr := ParseLeaf(fixed); ferr != nil {
		return "template kinds are lowercase, and " + ferr.Error() + found
	}
	return "template kinds are lowercase: write " + strconv.QuoteToASCII(fixed) + found
}

// templateShape splits a template-shaped string into its name and
// arguments (see ParseLeaf); shaped is false for any other string.
func templateShape(s string) (name, args string, hasArgs, shaped bool) {
	if len(s) < 2 || s[0] != '<' || s[len(s)-1] != '>' {
		return "", "", false, false
	}
	inner := s[1 : len(s)-1]
	if strings.ContainsAny(inner, "<>") && !passwordWithSymbols(s) {
		return "", "", false, false
	}
	name, args, hasArgs = strings.Cut(inner, ":")
	if !isTemplateName(name) {
		return "", "", false, false
	}
	return name, args, hasArgs, true
}

// LooksLikeTemplate reports whether the plain string s is a template with
// white space around it or just inside its brackets (" <random:8>",
// "<uuid>\n", "< random:8 >"). It is written to Vault as the text it is,
// which its author almost certainly did not mean, so the webhook and
// `ohmlab validate` warn about it. template is the string without that
// white space when it is a well-formed template, "" when it is not (a
// malformed one). A template-shaped or composed s is never one: ParseLeaf
// takes it (for example "<ref:m/p# >", whose key is " ").
func LooksLikeTemplate(s string) (template string, ok bool) {
	if _, _, _, shaped := templateShape(s); shaped || composed(s) {
		return "", false
	}
	t := strings.TrimSpace(s)
	if len(t) < 2 || t[0] != '<' || t[len(t)-1] != '>' {
		return "", false
	}
	t = "<" + strings.TrimSpace(t[1:len(t)-1]) + ">"
	if _, _, _, shaped := templateShape(t); !shaped {
		return "", false
	}
	if _, err := ParseLeaf(t); err != nil {
		return "", true
	}
	return t, true
}

// passwordWithSymbols reports whether s is a <password:N:classes> whose
// symbol= list holds '<' or '>': one template, refused by the rule of
// symbols, never text written as it is in place of a generated password.
func passwordWithSymbols(s string) bool {
	rest, ok := strings.CutPrefix(s, "<password:")
	return ok && strings.Contains(rest, "symbol=")
}

// EmbeddedTemplate reports whether the plain string s holds a template
// without being one: a known template inside other text ("pre-<random:8>",
// "<uuid><uuid>"), or the start of one never closed ("<random:8"). Like
// white space around a template, it is written to Vault as the text it is
// (a template is a leaf's whole value), so the webhook and `ohmlab
// validate` warn. template names what was found, never the rest of s (a
// plain value may be a secret): a well-formed template, or "<kind…" for an
// unclosed one. A template-shaped or composed s is never one: ParseLeaf
// takes it.
func EmbeddedTemplate(s string) (template string, ok bool) {
	if _, _, _, shaped := templateShape(s); shaped || composed(s) {
		return "", false
	}
	for rest := s; ; {
		i := strings.IndexByte(rest, '<')
		if i < 0 {
			return "", false
		}
		rest = rest[i:]
		// seg is rest up to the next '<' or '>' (kept), or all of it.
		seg := rest
		if j := strings.IndexAny(rest[1:], "<>"); j >= 0 {
			seg = rest[:j+2]
		}
		if strings.HasSuffix(seg, ">") {
			if l, err := ParseLeaf(seg); err == nil && l.Kind != KindPlain {
				return seg, true
			}
		} else if name := leadingName(seg[1:]); knownKind(name) && (len(seg) == 1+len(name) || seg[1+len(name)] == ':' || seg[1+len(name)] == '<') {
			return "<" + name + "…", true
		}
		rest = rest[1:]
	}
}

// leadingName is the run of template-name characters that s starts with.
func leadingName(s string) string {
	for i, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return s[:i]
		}
	}
	return s
}

// knownKind reports whether name is the name of a template kind.
func knownKind(name string) bool {
	switch name {
	case "random", "hex", "uuid", "bcrypt", "ref", "password", "vault-password":
		return true
	}
	return pairNamed(name) != nil
}

// isTemplateName reports whether name looks like a template kind: a letter,
// then letters, digits, '-' or '_'.
func isTemplateName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range []byte(name) {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if i == 0 && !letter {
			return false
		}
		if !letter && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// parseLength parses a length argument: 1 to 5 decimal digits, nothing else
// (no sign, no space). Longer digit strings are out of range anyway.
func parseLength(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	n := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// validKeyPath reports whether k is a dotted key path: one or more
// non-empty key names separated by ".".
func validKeyPath(k string) bool {
	for _, s := range strings.Split(k, ".") {
		if s == "" {
			return false
		}
	}
	return true
}
