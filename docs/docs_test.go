// Package docs holds the repository's documentation beside README.md; its
// tests check what a reader follows: links, headings, make targets.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// pages are the Markdown files these tests read: the README and docs/
// (its index and design, users/ and maintainers/).
func pages(t *testing.T) []string {
	t.Helper()
	return append([]string{filepath.Join("..", "README.md")}, docPages(t, "*.md", "users/*.md", "maintainers/*.md")...)
}

// docPages are the pages of docs/ that match the patterns.
func docPages(t *testing.T, patterns ...string) []string {
	t.Helper()
	var out []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

func read(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// prose is the text line by line, fenced code blocks blanked: a link or a
// heading inside a code block is not one.
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, line := range lines {
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		if fence || fenced {
			lines[i] = ""
		}
		if fence {
			fenced = !fenced
		}
	}
	return lines
}

// anchors are the fragments GitHub gives the headings of a Markdown text:
// lower case, punctuation dropped (`-` and `_` kept), spaces to `-`, and
// -1, -2... for a repeated heading.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range prose(text) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestRelativeLinksResolve: every relative link of the README and of
// docs/ names a file of the repository and, with a #fragment, one of that
// file's headings.
func TestRelativeLinksResolve(t *testing.T) {
	for _, page := range pages(t) {
		for n, line := range prose(read(t, page)) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, fragment, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s, line %d: link %s: %v", page, n+1, target, err)
					continue
				}
				if fragment != "" && !anchors(read(t, path))[fragment] {
					t.Errorf("%s, line %d: link %s: %s has no heading #%s", page, n+1, target, path, fragment)
				}
			}
		}
	}
}

// TestAnchors pins the heading-to-fragment rule on headings like the
// README's.
func TestAnchors(t *testing.T) {
	got := anchors("# ohmlab controller\n## A real node: `make cluster`\n```\n# not a heading\n```\n## Metrics\n### Metrics\n## Über_alles, 2.0!\n")
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := "a-real-node-make-cluster metrics metrics-1 ohmlab-controller über_alles-20"
	if strings.Join(keys, " ") != want {
		t.Errorf("anchors %v, want %s", keys, want)
	}
}

// TestREADMEIsForUsers: the README is what a platform engineer reads
// first, a page or two: what it is, the demo, installing, a first object
// and where to look when something is wrong. Everything else lives in
// docs/: the README links the index of docs/ and every page for users.
func TestREADMEIsForUsers(t *testing.T) {
	const maxLines = 220
	readme := read(t, filepath.Join("..", "README.md"))
	if n := strings.Count(readme, "\n"); n > maxLines {
		t.Errorf("README.md has %d lines, want at most %d: move reference, measurements and internals to docs/", n, maxLines)
	}
	have := anchors(readme)
	for _, section := range []string{"try-it", "install", "the-first-vaultseed", "when-something-is-wrong", "conditions-and-reasons", "metrics"} {
		if !have[section] {
			t.Errorf("README.md has no section #%s", section)
		}
	}
	for _, doc := range append([]string{"README.md"}, docPages(t, "users/*.md")...) {
		if !strings.Contains(readme, "](docs/"+doc) {
			t.Errorf("README.md links no docs/%s", doc)
		}
	}
}

// TestIndexLinksEveryPage: docs/README.md, the index, links every other
// page of docs/, for users and for maintainers.
func TestIndexLinksEveryPage(t *testing.T) {
	index := read(t, "README.md")
	for _, doc := range docPages(t, "*.md", "users/*.md", "maintainers/*.md") {
		if doc != "README.md" && !strings.Contains(index, "]("+doc) {
			t.Errorf("docs/README.md links no %s", doc)
		}
	}
}

// TestMakeTargetsExist: every `make TARGET` the README and docs/ show, in
// a code span or a code block, is a target of the Makefile or of mk/*.mk.
func TestMakeTargetsExist(t *testing.T) {
	makefiles, err := filepath.Glob(filepath.Join("..", "mk", "*.mk"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	rule := regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`)
	for _, mf := range append(makefiles, filepath.Join("..", "Makefile")) {
		for _, m := range rule.FindAllStringSubmatch(read(t, mf), -1) {
			targets[m[1]] = true
		}
	}
	code := regexp.MustCompile("```[a-z]*\n(?s:(.*?))```|`([^`\n]+)`")
	invocation := regexp.MustCompile(`\bmake (?:-[-a-zA-Z]+ )*([a-z][a-z0-9-]*)`)
	for _, page := range pages(t) {
		for _, c := range code.FindAllStringSubmatch(read(t, page), -1) {
			for _, m := range invocation.FindAllStringSubmatch(c[1]+c[2], -1) {
				if !targets[m[1]] {
					t.Errorf("%s shows `make %s`: no such target", page, m[1])
				}
			}
		}
	}
}
