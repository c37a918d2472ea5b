package templating

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// CharClasses is a set of character classes of a <password:N:classes>
// leaf: each class in the set appears at least once in the value.
type CharClasses uint8

// The character classes of <password:N:classes>.
const (
	ClassUpper  CharClasses = 1 << iota // upper: A-Z
	ClassLower                          // lower: a-z
	ClassDigit                          // digit: 0-9
	ClassSymbol                         // symbol: DefaultSymbols, or the set of symbol=CHARS
)

// DefaultPasswordClasses are the classes of <password:N>: what most
// consumers' rules ask for (an upper-case letter, a lower-case letter and
// a digit).
const DefaultPasswordClasses = ClassUpper | ClassLower | ClassDigit

// DefaultSymbols is the symbol set of the class symbol without "=CHARS":
// RFC 3986's unreserved symbols, which a URL (a connection string's
// user:password@), a shell word and a YAML scalar take as they are.
const DefaultSymbols = "-._~"

// Limits of <password:N:classes>, in characters. N is also at least the
// number of its classes, one character of each.
const (
	MinPasswordLength = 1
	MaxPasswordLength = 4096
)

// MaxPolicyName is the most characters of the policy name of
// <vault-password:policy>.
const MaxPolicyName = 128

// DryVaultPassword is what a dry [Generator] makes of a
// <vault-password:policy> leaf, without asking Vault.
const DryVaultPassword = "<dry-run vault password>"

// Messages of ParseLeaf for password templates: fixed sentences, which
// Analyse completes with the template as typed.
const (
	errPasswordLength  = "<password:N> and <password:N:classes> need a decimal length N from 1 to 4096"
	errPasswordClasses = "the classes of <password:N:classes> are upper, lower, digit and symbol (or symbol=CHARS, last), separated by ',', each at most once"
	errPasswordShort   = "the length N of <password:N:classes> must be at least its number of classes, to hold one character of each (<password:N> has 3: upper, lower, digit)"
	errPasswordEmpty   = "symbol=CHARS of <password:N:classes> needs one or more symbols after '='"
	errPasswordSymbols = "the symbols of symbol=CHARS in <password:N:classes> are printable ASCII characters other than letters, digits, space, '<' and '>', each at most once"
	errVaultPassword   = "<vault-password:policy> needs the name of a Vault password policy: 1 to 128 letters, digits, '.', '_' and '-', not '.' or '..'"
)

var classNames = map[string]CharClasses{"upper": ClassUpper, "lower": ClassLower, "digit": ClassDigit, "symbol": ClassSymbol}

// parsePassword parses the arguments "N" or "N:classes" of a password
// template s.
func parsePassword(s, args string, hasArgs bool) (Leaf, error) {
	length, list, hasClasses := strings.Cut(args, ":")
	n, ok := parseLength(length)
	if !hasArgs || !ok || n < MinPasswordLength || n > MaxPasswordLength {
		return Leaf{}, errors.New(errPasswordLength)
	}
	classes, symbols := DefaultPasswordClasses, ""
	if hasClasses {
		var err error
		if classes, symbols, err = parseClasses(list); err != nil {
			return Leaf{}, err
		}
	}
	if n < classes.count() {
		return Leaf{}, errors.New(errPasswordShort)
	}
	return Leaf{Kind: KindPassword, Template: s, Length: n, Classes: classes, Symbols: symbols}, nil
}

// parseClasses parses a comma-separated list of class names. symbol=CHARS
// takes the rest of the list as its set, so that the set may hold ',' and
// ':'.
func parseClasses(list string) (CharClasses, string, error) {
	var cs CharClasses
	symbols := ""
	for rest := list; ; {
		if set, ok := strings.CutPrefix(rest, "symbol="); ok {
			switch {
			case cs&ClassSymbol != 0:
				return 0, "", errors.New(errPasswordClasses)
			case set == "":
				return 0, "", errors.New(errPasswordEmpty)
			case !validSymbols(set):
				return 0, "", errors.New(errPasswordSymbols)
			}
			return cs | ClassSymbol, set, nil
		}
		name, tail, more := strings.Cut(rest, ",")
		c, ok := classNames[name]
		if !ok || cs&c != 0 {
			return 0, "", errors.New(errPasswordClasses)
		}
		cs |= c
		if c == ClassSymbol {
			symbols = DefaultSymbols
		}
		if !more {
			return cs, symbols, nil
		}
		rest = tail
	}
}

// validSymbols reports whether set is a symbol set: printable ASCII that is
// no letter, digit or space, each once (a repeated symbol would be drawn
// more often than the others).
func validSymbols(set string) bool {
	var seen [128]bool
	for _, c := range []byte(set) {
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || strings.IndexByte(alnum, c) >= 0 || seen[c] {
			return false
		}
		seen[c] = true
	}
	return true
}

// validPolicyName reports whether p names a Vault password policy in one
// segment of sys/policies/password/<name>/generate, which the controller's
// Vault policy grants with "+".
func validPolicyName(p string) bool {
	if p == "" || len(p) > MaxPolicyName || p == "." || p == ".." {
		return false
	}
	for _, c := range []byte(p) {
		if !pathByte(c) {
			return false
		}
	}
	return true
}

// count is the number of classes in cs.
func (cs CharClasses) count() int {
	n := 0
	for c := ClassUpper; c <= ClassSymbol; c <<= 1 {
		if cs&c != 0 {
			n++
		}
	}
	return n
}

// sets are the characters of each class of cs, in the order upper, lower,
// digit, symbol.
func (cs CharClasses) sets(symbols string) []string {
	var out []string
	for _, c := range []struct {
		class CharClasses
		chars string
	}{{ClassUpper, alnum[:26]}, {ClassLower, alnum[26:52]}, {ClassDigit, alnum[52:]}, {ClassSymbol, symbols}} {
		if cs&c.class != 0 {
			out = append(out, c.chars)
		}
	}
	return out
}

// password draws a <password:N:classes> value: one character of each class,
// the rest from the union of the classes, each drawn uniformly, then the
// whole shuffled (Fisher-Yates), so that the guaranteed characters are
// anywhere.
func password(r io.Reader, l Leaf) (string, error) {
	sets := l.Classes.sets(l.Symbols)
	if l.Length < MinPasswordLength || l.Length > MaxPasswordLength || len(sets) == 0 || l.Length < len(sets) {
		return "", errors.New("templating: a password's length must be from 1 to 4096 and hold one character of each of its classes")
	}
	union := strings.Join(sets, "")
	u := uniform{r: r}
	out := make([]byte, l.Length)
	for i := range out {
		set := union
		if i < len(sets) {
			set = sets[i]
		}
		j, err := u.intn(len(set))
		if err != nil {
			return "", err
		}
		out[i] = set[j]
	}
	for i := len(out) - 1; i > 0; i-- {
		j, err := u.intn(i + 1)
		if err != nil {
			return "", err
		}
		out[i], out[j] = out[j], out[i]
	}
	return string(out), nil
}

// uniform draws integers below n (1 to 65536) from r without modulo bias:
// a 16-bit draw v is kept only below the largest multiple of n that 65536
// holds, so each v%n is equally likely.
type uniform struct {
	r   io.Reader
	buf [512]byte
	pos int // next unread byte of buf; 0 before the first read
	n   int // bytes of buf read
}

func (u *uniform) intn(n int) (int, error) {
	limit := 1<<16 - 1<<16%n
	for {
		if u.pos+2 > u.n {
			if _, err := io.ReadFull(u.r, u.buf[:]); err != nil {
				return 0, fmt.Errorf("templating: reading randomness: %w", err)
			}
			u.pos, u.n = 0, len(u.buf)
		}
		v := int(u.buf[u.pos])<<8 | int(u.buf[u.pos+1])
		u.pos += 2
		if v < limit {
			return v % n, nil
		}
	}
}

// vaultPassword asks Vault's password policy of l for a value, or makes a
// placeholder when g is dry.
func (g Generator) vaultPassword(ctx context.Context, l Leaf) (string, error) {
	switch {
	case g.Dry:
		return DryVaultPassword, nil
	case g.VaultPassword == nil:
		return "", errors.New(l.Template + " needs Vault, and this generator has no Vault to ask")
	}
	v, err := g.VaultPassword(ctx, l.Policy)
	if err != nil {
		return "", fmt.Errorf("%s: %w", l.Template, err)
	}
	if v == "" {
		return "", errors.New(l.Template + ": Vault answered an empty password")
	}
	return v, nil
}
