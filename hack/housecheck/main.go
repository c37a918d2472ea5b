// Command housecheck keeps the rules of the house (docs/DESIGN.md, "Rules of
// the house") on the product: the code the two binaries are built from.
//
//   - the planner imports neither controller-runtime nor client-go, and the
//     CLI (cmd/ohmlab) builds without controller-runtime;
//   - no function of the product is longer than maxFuncLines lines;
//   - no comment of the product cites an issue or a measurement: the rule
//     and a pointer to docs/ stay, the history and the figures go to docs/.
//
// `make verify` runs it from the module's root; it prints each finding as
// file:line: problem and exits 1 when there is one. With -longest N it
// prints the N longest product functions instead, longest first.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

const module = "github.com/ohmlab/ohmlab-controller"

// maxFuncLines is the longest a product function may be, from its func
// line to its closing brace.
const maxFuncLines = 80

// binaries are the product: what they import of this module is checked.
var binaries = []string{"./cmd/ohmlab", "./cmd/ohmlab-controller"}

// forbidden lists, per package, the import path prefixes it must not
// depend on, directly or not.
var forbidden = map[string][]string{
	"./planner":    {"sigs.k8s.io/controller-runtime", "k8s.io/client-go"},
	"./cmd/ohmlab": {"sigs.k8s.io/controller-runtime"},
}

// labNote matches what a code comment must not say: an issue number, a
// benchmark's name, or a measured figure (a duration, a speed-up, a share,
// a count of allocations, a figure at a scale). Limits and rules keep their
// numbers ("at most 4 KiB", "5 s doubling to 5 min").
var labNote = regexp.MustCompile(`(?i)\bissues? #?\d+|\bBenchmark[A-Z]\w*|\b\d+(\.\d+)?\s?(ns|µs|us|ms)\b|\b\d+(\.\d+)?\s?(x|times)\s+(faster|slower|the|as)\b|\b\d+(\.\d+)?\s?%|\b[\d,]+ allocations\b|\bat [\d,]{5,} objects\b`)

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Module     *struct{ Path string }
}

func main() {
	longest := flag.Int("longest", 0, "print the N longest product functions, and check nothing")
	flag.Parse()
	if *longest > 0 {
		funcs, err := productFuncs()
		if err != nil {
			fmt.Fprintln(os.Stderr, "housecheck:", err)
			os.Exit(2)
		}
		for _, f := range funcs[:min(*longest, len(funcs))] {
			fmt.Printf("%4d %s:%d %s\n", f.lines, f.file, f.line, f.name)
		}
		return
	}
	findings, err := check()
	if err != nil {
		fmt.Fprintln(os.Stderr, "housecheck:", err)
		os.Exit(2)
	}
	for _, f := range findings {
		fmt.Println(f)
	}
	if len(findings) > 0 {
		fmt.Printf("housecheck: %d findings (docs/DESIGN.md, \"Rules of the house\")\n", len(findings))
		os.Exit(1)
	}
}

func check() ([]string, error) {
	var findings []string
	for p, prefixes := range forbidden {
		deps, err := goList("-deps", p)
		if err != nil {
			return nil, err
		}
		for _, d := range deps {
			for _, prefix := range prefixes {
				if strings.HasPrefix(d.ImportPath, prefix) {
					findings = append(findings, fmt.Sprintf("%s: depends on %s (through the imports: go list -deps %s)", p, d.ImportPath, p))
					break
				}
			}
		}
	}
	files, err := productFiles()
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for _, path := range files {
		fs, err := checkFile(fset, path)
		if err != nil {
			return nil, err
		}
		findings = append(findings, fs...)
	}
	return findings, nil
}

// productFiles are the Go files of this module that the binaries are built
// from.
func productFiles() ([]string, error) {
	deps, err := goList(append([]string{"-deps"}, binaries...)...)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range deps {
		if d.Module == nil || d.Module.Path != module {
			continue
		}
		for _, name := range d.GoFiles {
			out = append(out, filepath.Join(d.Dir, name))
		}
	}
	return out, nil
}

// function is one product function and its length in lines.
type function struct {
	file, name  string
	line, lines int
}

// productFuncs are the product's functions, longest first.
func productFuncs() ([]function, error) {
	files, err := productFiles()
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var out []function
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
				out = append(out, function{file: relative(path), name: fn.Name.Name, line: start, lines: end - start + 1})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b function) int { return cmp.Compare(b.lines, a.lines) })
	return out, nil
}

// relative is path relative to the working directory when it can be.
func relative(path string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, path); err == nil {
			return rel
		}
	}
	return path
}

// checkFile returns the findings of one Go file: long functions and lab
// notes in comments, named by the path relative to the working directory.
func checkFile(fset *token.FileSet, path string) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	name := relative(path)
	var out []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if n := end - start + 1; n > maxFuncLines {
			out = append(out, fmt.Sprintf("%s:%d: %s is %d lines, more than %d: split it", name, start, fn.Name.Name, n, maxFuncLines))
		}
	}
	for _, group := range f.Comments {
		for _, c := range group.List {
			if m := labNote.FindString(c.Text); m != "" {
				out = append(out, fmt.Sprintf("%s:%d: the comment cites %q: say the rule, and put history and figures in docs/", name, fset.Position(c.Pos()).Line, m))
			}
		}
	}
	return out, nil
}

// goList runs go list -json with args and decodes its packages.
func goList(args ...string) ([]pkg, error) {
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Dir,GoFiles,Module"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	dec := json.NewDecoder(bufio.NewReader(bytes.NewReader(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			return pkgs, nil
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
}
