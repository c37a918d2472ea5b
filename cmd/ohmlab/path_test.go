package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/ohmlab/ohmlab-controller/internal/validate/validatetest"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// TestPathSpellings runs `ohmlab validate` over each spelling of
// validatetest.PathCases, as spec.path and as the path of a <ref:>: the
// verdict and the message are those of the CRD's validation and of the
// webhook (webhooks.TestPathSpellings).
func TestPathSpellings(t *testing.T) {
	quote := func(s string) string {
		b, err := json.Marshal(s) // a JSON string is a YAML double-quoted scalar
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range validatetest.PathCases {
		t.Run(tc.Name, func(t *testing.T) {
			run := func(t *testing.T, spec, want string) {
				t.Helper()
				dir := writeTree(t, map[string]string{"seed.yaml": vaultSeed("a", spec)})
				file := filepath.Join(dir, "seed.yaml")
				got := runCLI(t, "", "validate", file)
				wantRes := result{Code: exitValid}
				if want != "" {
					wantRes = result{Code: exitInvalid, Stdout: file + ":vo/a: " + want + "\n"}
				}
				if got != wantRes {
					t.Errorf("ohmlab validate = %+v, want %+v", got, wantRes)
				}
			}
			want := ""
			if !tc.Valid {
				want = "spec.path: " + templating.PathMessage
			}
			run(t, "  path: "+quote(tc.Path)+"\n  data:\n    k: v\n", want)
			if !tc.InRef() {
				return
			}
			want = ""
			if !tc.Valid {
				want = "k: " + validatetest.RefPathMessage(tc.Path)
			}
			run(t, "  path: ohmlab/platforms/p/core/self\n  data:\n    k: "+quote("<ref:"+tc.Path+"#k>")+"\n", want)
		})
	}
}

// TestTemplateWithSpaces: a template with white space around it is a
// warning on standard error, and does not change the exit code.
func TestTemplateWithSpaces(t *testing.T) {
	dir := writeTree(t, map[string]string{"seed.yaml": vaultSeed("a",
		"  path: ohmlab/platforms/p/core/a\n  data:\n    a: \" <random:8>\"\n    b: \"<uuid> \"\n    c: \"<random:8>\"\n")})
	file := filepath.Join(dir, "seed.yaml")
	got := runCLI(t, "", "validate", file)
	want := result{Code: exitValid, Stderr: file + ":vo/a: warning: a: is plain text, not the template <random:8>: with the white space around it the controller writes the text as it is; remove the white space to generate the value\n" +
		file + ":vo/a: warning: b: is plain text, not the template <uuid>: with the white space around it the controller writes the text as it is; remove the white space to generate the value\n"}
	if got != want {
		t.Errorf("ohmlab validate = %+v\nwant %+v", got, want)
	}
}
