package main

import (
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLabNote: what a comment may and may not say.
func TestLabNote(t *testing.T) {
	tests := []struct {
		comment string
		refused bool
	}{
		{"// the path is read once per resync (issue 13)", true},
		{"// see Issue #7", true},
		{"// BenchmarkPlanUnchanged measures it", true},
		{"// a restart costs 22 ms per object", true},
		{"// 2.4x faster than before", true},
		{"// a twentieth: 5% of the CPU", true},
		{"// 24 MiB in 540,000 allocations", true},
		{"// the heap at 10,000 objects", true},
		{"// conditions are capped at 4 KiB (the API server's limit)", false},
		{"// 5 s doubling to 5 min (product document, \"Conditions\")", false},
		{"// at most 100 bcrypt keys are admitted", false},
		{"// see docs/maintainers/performance.md, \"Memory\"", false},
	}
	for _, tt := range tests {
		if got := labNote.MatchString(tt.comment); got != tt.refused {
			t.Errorf("%q: refused %v, want %v", tt.comment, got, tt.refused)
		}
	}
}

// TestCheckFileFindsLongFunctionsAndLabNotes: a function one line over the
// bound and a comment citing an issue are both found, and nothing else.
func TestCheckFileFindsLongFunctionsAndLabNotes(t *testing.T) {
	body := strings.Repeat("\t_ = 0\n", maxFuncLines-2)
	src := "package p\n\n// short is fine.\nfunc short() {\n" + body + "}\n\n// long is not (issue 3).\nfunc long() {\n" + body + "\t_ = 1\n}\n"
	path := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := checkFile(token.NewFileSet(), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.Contains(got[0], "long is 81 lines") || !strings.Contains(got[1], `cites "issue 3"`) {
		t.Errorf("findings %q, want long's length and its comment", got)
	}
}
