package main

import (
	"path/filepath"
	"testing"

	"github.com/ohmlab/ohmlab-controller/internal/validate/validatetest"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// TestPeriodSpellings runs `ohmlab validate` over each spelling of
// validatetest.PeriodCases: the verdict and the message are those of the
// CRD's rule and of the webhook (webhooks.TestPeriodSpellings).
func TestPeriodSpellings(t *testing.T) {
	for _, tc := range validatetest.PeriodCases {
		t.Run(tc.Name, func(t *testing.T) {
			dir := writeTree(t, map[string]string{"seed.yaml": vaultSeed("a",
				"  path: ohmlab/platforms/p/core/t\n  data:\n    k: <random:8>\n  rotate:\n    every: \""+tc.Every+"\"\n")})
			file := filepath.Join(dir, "seed.yaml")
			want := result{Code: exitValid}
			if tc.Period == 0 {
				want = result{Code: exitInvalid, Stdout: file + ":vo/a: spec.rotate.every: " + templating.PeriodMessage + "\n"}
			}
			if got := runCLI(t, "", "validate", file); got != want {
				t.Errorf("ohmlab validate = %+v\nwant %+v", got, want)
			}
		})
	}
}
