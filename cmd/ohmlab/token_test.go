package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ohmlab/ohmlab-controller/internal/validate/validatetest"
)

// TestTokenSpellings runs `ohmlab validate` over each token of
// validatetest.TokenCases: the verdict and the messages are those of the
// CRD's rules and of the webhook (webhooks.TestTokenSpellings).
func TestTokenSpellings(t *testing.T) {
	for _, tc := range validatetest.TokenCases {
		t.Run(tc.Name, func(t *testing.T) {
			token, err := json.Marshal(tc.Token) // a JSON string is a YAML double-quoted scalar
			if err != nil {
				t.Fatal(err)
			}
			// YAML refuses a raw DEL even in a quoted scalar; JSON leaves it raw.
			quoted := strings.ReplaceAll(string(token), "\x7f", `\u007f`)
			dir := writeTree(t, map[string]string{"seed.yaml": vaultSeed("a",
				"  path: ohmlab/platforms/p/core/t\n  data:\n    k: <random:8>\n  rotate:\n    token: "+quoted+"\n")})
			file := filepath.Join(dir, "seed.yaml")
			want := result{Code: exitValid}
			if len(tc.Messages) > 0 {
				want.Code = exitInvalid
				for _, m := range tc.Messages {
					want.Stdout += file + ":vo/a: spec.rotate.token: " + m + "\n"
				}
			}
			if got := runCLI(t, "", "validate", file); got != want {
				t.Errorf("ohmlab validate = %+v\nwant %+v", got, want)
			}
		})
	}
}
