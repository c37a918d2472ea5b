package templating

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Thresholds of [LooksLikeSecret], chosen so that random strings of the
// lengths people generate (20 characters and more of letters, digits and
// symbols, base64) are found, and what plain values in objects are (names,
// URLs, host names, camelCase and dashed words, UUIDs, hashes in hex) is
// not: TestLooksLikeSecret holds both kinds.
const (
	// secretMinLength is the fewest characters of a value taken for a
	// generated secret.
	secretMinLength = 20
	// secretMinSwitches is the least share of neighbouring characters of
	// different classes (lower, upper, digit, symbol): about 0.6 for
	// random characters, 0.1 to 0.3 for words joined in camelCase.
	secretMinSwitches = 0.4
	// secretMinEntropy is the least Shannon entropy per character, as a
	// share of the most a string of that length can have (log2 of its
	// length, up to 64): it leaves out repeated patterns.
	secretMinEntropy = 0.8
)

// LooksLikeSecret reports whether the plain value s looks like a secret
// pasted into spec.data, which Git, Argo CD and kubectl get then show: a
// private key (PEM "PRIVATE KEY", age "AGE-SECRET-KEY-1"), or a long
// random-looking string without white space, of three classes of
// characters or more (lower, upper, digit, a symbol other than the
// separators - _ . / :), whose neighbours mostly change class and whose
// characters are spread. It is a warning only, and says nothing of s.
func LooksLikeSecret(s string) bool {
	if strings.Contains(s, "PRIVATE KEY-----") || strings.HasPrefix(s, "AGE-SECRET-KEY-1") {
		return true
	}
	n := utf8.RuneCountInString(s)
	if n < secretMinLength || strings.Contains(s, "://") || strings.IndexFunc(s, unicode.IsSpace) >= 0 {
		return false
	}
	var seen [4]bool
	counts := map[rune]int{}
	switches, prev := 0, 0
	for i, r := range []rune(s) {
		c := charClass(r)
		if c >= 0 {
			seen[c] = true
		}
		if i > 0 && c != prev {
			switches++
		}
		prev = c
		counts[r]++
	}
	classes := 0
	for _, ok := range seen {
		if ok {
			classes++
		}
	}
	if classes < 3 || float64(switches)/float64(n-1) < secretMinSwitches {
		return false
	}
	entropy := 0.0
	for _, k := range counts {
		p := float64(k) / float64(n)
		entropy -= p * math.Log2(p)
	}
	return entropy >= secretMinEntropy*math.Log2(math.Min(float64(n), 64))
}

// charClass is 0 for a lowercase letter, 1 uppercase, 2 a digit, 3 another
// symbol, and -1 for a separator (- _ . / :), which counts as a class
// change but as no class of its own: dashed words are not symbols.
func charClass(r rune) int {
	switch {
	case unicode.IsLower(r):
		return 0
	case unicode.IsUpper(r):
		return 1
	case unicode.IsDigit(r):
		return 2
	case strings.ContainsRune("-_./:", r):
		return -1
	}
	return 3
}
