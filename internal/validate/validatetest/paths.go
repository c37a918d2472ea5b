// Package validatetest holds the cases that the CRD's validation, the
// admission webhook and `ohmlab validate` must judge alike, so that their
// tests share one table (issue 12, item 10: a path means exactly one Vault
// path).
package validatetest

import (
	"strconv"
	"strings"

	"github.com/ohmlab/ohmlab-controller/templating"
)

// PathCase is one spelling of a path, for spec.path and for the path of a
// <ref:>.
type PathCase struct {
	Name string
	Path string
	// Valid is the verdict of templating.ValidPath; a refused path gets
	// templating.PathMessage everywhere.
	Valid bool
}

// InRef reports whether the path can be written inside <ref:...#key> at
// all: "#" ends a reference's path and "<", ">" its template, so such a
// spelling reads as another reference or as plain text.
func (c PathCase) InRef() bool { return !strings.ContainsAny(c.Path, "#<>") }

// PathCases are the good and bad spellings, each kind of byte or segment
// the rule accepts or refuses once.
var PathCases = []PathCase{
	{Name: "two segments", Path: "ohmlab/keycloak", Valid: true},
	{Name: "the document's example", Path: "ohmlab/platforms/production/core/keycloak", Valid: true},
	{Name: "every allowed byte", Path: "Ohm-lab_2/platforms.v2/.hidden/..x/a./...", Valid: true},
	{Name: "512 bytes", Path: "ohmlab/" + strings.Repeat("p", 505), Valid: true},

	{Name: "empty", Path: ""},
	{Name: "one segment", Path: "ohmlab"},
	{Name: "513 bytes", Path: "ohmlab/" + strings.Repeat("p", 506)},
	{Name: "leading slash", Path: "/ohmlab/platforms/p/core/k"},
	{Name: "trailing slash", Path: "ohmlab/platforms/p/core/k/"},
	{Name: "empty segment", Path: "ohmlab/platforms//p/core/k"},
	{Name: "dot segment", Path: "ohmlab/platforms/./p/core/k"},
	{Name: "dot-dot segment", Path: "ohmlab/platforms/x/../p/core/k"},
	{Name: "dot-dot last", Path: "ohmlab/platforms/p/core/k/.."},
	{Name: "dot mount", Path: "./platforms/p/core/k"},
	{Name: "question mark", Path: "ohmlab/platforms/p/core/k?version=1"},
	{Name: "percent escape", Path: "ohmlab/platforms/p/core/k%2Fx"},
	{Name: "hash", Path: "ohmlab/platforms/p/core/k#x"},
	{Name: "inner space", Path: "ohmlab/platforms/p/core/key cloak"},
	{Name: "leading space", Path: " ohmlab/platforms/p/core/k"},
	{Name: "trailing space", Path: "ohmlab/platforms/p/core/k "},
	{Name: "tab", Path: "ohmlab/platforms/p/core/\tk"},
	{Name: "trailing newline", Path: "ohmlab/platforms/p/core/k\n"},
	{Name: "policy glob +", Path: "ohmlab/platforms/+/core/k"},
	{Name: "policy glob *", Path: "ohmlab/platforms/p/core/*"},
	{Name: "backslash", Path: `ohmlab/platforms\p/core/k`},
	{Name: "non-ASCII letter", Path: "ohmlab/platforms/p/core/kéy"},
	{Name: "angle bracket", Path: "ohmlab/platforms/p/core/k>"},
}

// RefPathMessage is the problem of <ref:path#k> when path is refused: the
// rule, then the template as typed, its first 128 characters quoted as
// templating shows a malformed template.
func RefPathMessage(path string) string {
	typed := []rune("<ref:" + path + "#k>")
	found := strconv.QuoteToASCII(string(typed))
	if len(typed) > 128 {
		found = strconv.QuoteToASCII(string(typed[:128])) + "..."
	}
	return "the path of <ref:mount/path#key.path> " + templating.PathMessage + ", found " + found
}
