package validatetest

import (
	"strings"

	"github.com/ohmlab/ohmlab-controller/templating"
)

// TokenCase is one rotation token, for spec.rotate.token.
type TokenCase struct {
	Name  string
	Token string
	// Messages are templating.TokenProblem's verdict, sorted: none for a
	// token Vault records, else the messages of its refusal, which the
	// CRD's rules, the webhook and `ohmlab validate` all give.
	Messages []string
}

// TokenCases are tokens Vault records and tokens it refuses in
// custom_metadata, each within the CRD's 256 characters, so that only
// printability and the byte length decide.
var TokenCases = []TokenCase{
	{Name: "a date", Token: "2026-11-29"},
	{Name: "the ASCII space", Token: "rotate after the incident of 2026-11-29"},
	{Name: "accents, other scripts, an emoji", Token: "rotation-été-ﾛ-🔑"},
	{Name: "256 two-byte characters: 512 bytes", Token: strings.Repeat("é", 256)},
	{Name: "128 four-byte characters: 512 bytes", Token: strings.Repeat("🔑", 128)},

	{Name: "a tab", Token: "2026-11-29\trotate", Messages: []string{templating.TokenPrintableMessage}},
	{Name: "a trailing newline (a YAML block scalar)", Token: "2026-11-29\n", Messages: []string{templating.TokenPrintableMessage}},
	{Name: "a carriage return", Token: "2026\r11", Messages: []string{templating.TokenPrintableMessage}},
	{Name: "DEL", Token: "2026\x7f", Messages: []string{templating.TokenPrintableMessage}},
	{Name: "a no-break space", Token: "2026\u00a011", Messages: []string{templating.TokenPrintableMessage}},
	{Name: "a zero-width space", Token: "2026\u200b11", Messages: []string{templating.TokenPrintableMessage}},
	{Name: "171 three-byte characters: 513 bytes", Token: strings.Repeat("€", 171), Messages: []string{templating.TokenLengthMessage}},
	{Name: "129 four-byte characters: 516 bytes", Token: strings.Repeat("🔑", 129), Messages: []string{templating.TokenLengthMessage}},
	{Name: "513 bytes and a newline", Token: strings.Repeat("€", 170) + "\n\n\n\n", Messages: []string{templating.TokenLengthMessage, templating.TokenPrintableMessage}},
}
