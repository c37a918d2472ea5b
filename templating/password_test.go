package templating

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePassword(t *testing.T) {
	all := ClassUpper | ClassLower | ClassDigit | ClassSymbol
	tests := []struct {
		in      string
		want    Leaf
		wantErr string
	}{
		{in: "<password:24>", want: Leaf{Kind: KindPassword, Length: 24, Classes: DefaultPasswordClasses}},
		{in: "<password:3>", want: Leaf{Kind: KindPassword, Length: 3, Classes: DefaultPasswordClasses}},
		{in: "<password:4096>", want: Leaf{Kind: KindPassword, Length: 4096, Classes: DefaultPasswordClasses}},
		{in: "<password:6:digit>", want: Leaf{Kind: KindPassword, Length: 6, Classes: ClassDigit}},
		{in: "<password:1:lower>", want: Leaf{Kind: KindPassword, Length: 1, Classes: ClassLower}},
		{in: "<password:24:upper,lower,digit,symbol>", want: Leaf{Kind: KindPassword, Length: 24, Classes: all, Symbols: DefaultSymbols}},
		{in: "<password:24:symbol,digit>", want: Leaf{Kind: KindPassword, Length: 24, Classes: ClassSymbol | ClassDigit, Symbols: DefaultSymbols}},
		{in: "<password:24:lower,symbol=!#%&*+,:;=?@^>", want: Leaf{Kind: KindPassword, Length: 24, Classes: ClassLower | ClassSymbol, Symbols: "!#%&*+,:;=?@^"}},
		// symbol=CHARS runs to the end: "upper" is symbols there, refused.
		{in: "<password:2:symbol=-,upper>", wantErr: errPasswordSymbols},
		{in: "<password:2:symbol=:>", want: Leaf{Kind: KindPassword, Length: 2, Classes: ClassSymbol, Symbols: ":"}},
		{in: "<vault-password:app-db>", want: Leaf{Kind: KindVaultPassword, Policy: "app-db"}},
		{in: "<vault-password:a.b_c-1>", want: Leaf{Kind: KindVaultPassword, Policy: "a.b_c-1"}},
		{in: "<vault-password:" + strings.Repeat("p", 128) + ">", want: Leaf{Kind: KindVaultPassword, Policy: strings.Repeat("p", 128)}},

		{in: "<password>", wantErr: errPasswordLength},
		{in: "<password:>", wantErr: errPasswordLength},
		{in: "<password:0>", wantErr: errPasswordLength},
		{in: "<password:4097>", wantErr: errPasswordLength},
		{in: "<password:-8>", wantErr: errPasswordLength},
		{in: "<password:2>", wantErr: errPasswordShort},
		{in: "<password:3:upper,lower,digit,symbol>", wantErr: errPasswordShort},
		{in: "<password:8:>", wantErr: errPasswordClasses},
		{in: "<password:8:upper,>", wantErr: errPasswordClasses},
		{in: "<password:8:Upper>", wantErr: errPasswordClasses},
		{in: "<password:8:uppercase>", wantErr: errPasswordClasses},
		{in: "<password:8:upper,upper>", wantErr: errPasswordClasses},
		{in: "<password:8:symbol,symbol=!>", wantErr: errPasswordClasses},
		{in: "<password:8:upper lower>", wantErr: errPasswordClasses},
		{in: "<password:8:symbol=>", wantErr: errPasswordEmpty},
		{in: "<password:8:symbol=!!>", wantErr: errPasswordSymbols},
		{in: "<password:8:symbol=! >", wantErr: errPasswordSymbols},
		{in: "<password:8:symbol=!a>", wantErr: errPasswordSymbols},
		// '<' and '>' are refused symbols, not the end of a template
		// whose text would be written as the password.
		{in: "<password:8:symbol=>>", wantErr: errPasswordSymbols},
		{in: "<password:8:symbol=<>", wantErr: errPasswordSymbols},
		{in: "<password:12:symbol=!<>", wantErr: errPasswordSymbols},
		{in: "<password:12:lower,symbol=!<>>", wantErr: errPasswordSymbols},
		{in: "<password:8:symbol=!1>", wantErr: errPasswordSymbols},
		{in: "<password:8:symbol=é>", wantErr: errPasswordSymbols},
		{in: "<password:8:symbol=\t>", wantErr: errPasswordSymbols},
		{in: "<vault-password>", wantErr: errVaultPassword},
		{in: "<vault-password:>", wantErr: errVaultPassword},
		{in: "<vault-password:a/b>", wantErr: errVaultPassword},
		{in: "<vault-password:..>", wantErr: errVaultPassword},
		{in: "<vault-password:a b>", wantErr: errVaultPassword},
		{in: "<vault-password:" + strings.Repeat("p", 129) + ">", wantErr: errVaultPassword},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLeaf(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParseLeaf(%q) = %+v, %v; want error %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Template = tt.in
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseLeaf(%q) (-want +got):\n%s", tt.in, diff)
			}
			if !got.Generated() || got.Derived() {
				t.Errorf("%s: Generated() = %v, Derived() = %v; want a generated key", tt.in, got.Generated(), got.Derived())
			}
		})
	}
}

// TestPasswordRefusedNamesTheKey checks Analyse's message of each refused
// password template: the key, the rule, and the template as typed.
func TestPasswordRefusedNamesTheKey(t *testing.T) {
	tests := []struct {
		value, want string
	}{
		{"<password:2>", errPasswordShort + `, found "<password:2>"`},
		{"<password:5000>", errPasswordLength + `, found "<password:5000>"`},
		{"<password:8:upper,capital>", errPasswordClasses + `, found "<password:8:upper,capital>"`},
		{"<password:8:symbol=>", errPasswordEmpty + `, found "<password:8:symbol=>"`},
		{"<Password:8>", `template kinds are lowercase: write "<password:8>", found "<Password:8>"`},
		{"<vault-password:a/b>", errVaultPassword + `, found "<vault-password:a/b>"`},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			a := Analyse(Object{Path: "m/p", Data: map[string]any{"db": map[string]any{"password": tt.value}}})
			want := []Problem{{Reason: ReasonInvalidSpec, Key: "db.password", Message: tt.want}}
			if diff := cmp.Diff(want, a.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPasswordHoldsItsClasses draws many passwords of each rule from a
// seeded source: each has its length, only characters of its classes, and
// at least one of each class; over the draws, every character of the union
// appears.
func TestPasswordHoldsItsClasses(t *testing.T) {
	for _, tmpl := range []string{
		"<password:3>", "<password:4>", "<password:24>", "<password:4:upper,lower,digit,symbol>",
		"<password:12:digit>", "<password:2:lower,symbol=!>", "<password:64:symbol,upper>",
		"<password:16:lower,digit,symbol=!#%&*+,:;=?@^>",
	} {
		t.Run(tmpl, func(t *testing.T) {
			l, err := ParseLeaf(tmpl)
			if err != nil {
				t.Fatal(err)
			}
			sets := l.Classes.sets(l.Symbols)
			union := strings.Join(sets, "")
			seen := map[rune]bool{}
			g := Generator{Rand: rand.NewChaCha8([32]byte{byte(len(tmpl))})}
			for i := range 2000 {
				v, err := g.Generate(l)
				if err != nil {
					t.Fatal(err)
				}
				if len(v) != l.Length {
					t.Fatalf("draw %d: %d characters, want %d", i, len(v), l.Length)
				}
				if strings.Trim(v, union) != "" {
					t.Fatalf("draw %d holds a character outside its classes", i)
				}
				for j, set := range sets {
					if !strings.ContainsAny(v, set) {
						t.Fatalf("draw %d lacks class %d of %s", i, j, tmpl)
					}
				}
				for _, c := range v {
					seen[c] = true
				}
			}
			if len(seen) != len(union) {
				t.Errorf("%d of the %d characters of the classes appeared in 2000 draws", len(seen), len(union))
			}
		})
	}
}

// TestUniformHasNoModuloBias feeds every 16-bit draw once: each result
// below n comes out exactly as often, and draws at or over the largest
// multiple of n are skipped.
func TestUniformHasNoModuloBias(t *testing.T) {
	var all bytes.Buffer
	for v := range 1 << 16 {
		all.Write([]byte{byte(v >> 8), byte(v)})
	}
	for _, n := range []int{1, 3, 10, 26, 62, 66, 94, 1000, 4096, 4095, 1 << 16} {
		u := uniform{r: bytes.NewReader(all.Bytes())}
		limit := 1<<16 - 1<<16%n
		counts := make([]int, n)
		for range limit {
			v, err := u.intn(n)
			if err != nil {
				t.Fatalf("n=%d: %v", n, err)
			}
			counts[v]++
		}
		for v, c := range counts {
			if c != limit/n {
				t.Fatalf("n=%d: %d drawn %d times, want %d", n, v, c, limit/n)
			}
		}
		// Every draw left is at or over limit: none is accepted.
		if v, err := u.intn(n); !errors.Is(err, io.EOF) {
			t.Errorf("n=%d: a draw at or over %d was accepted (%d, %v)", n, limit, v, err)
		}
	}
}

func TestPasswordDeterministic(t *testing.T) {
	// From zeros every draw is 0: the first character of each class, then
	// of the union, and each swap of the shuffle with position 0.
	l, _ := ParseLeaf("<password:5:upper,lower,digit>")
	got, err := Generator{Rand: constReader(0)}.Generate(l)
	if err != nil {
		t.Fatal(err)
	}
	if got != "a0AAA" {
		t.Errorf("Generate = %q, want %q", got, "a0AAA")
	}
	broken := bytesThenFail{}
	if _, err := (Generator{Rand: &broken}).Generate(l); !errors.Is(err, errBroken) {
		t.Errorf("Generate from a failing reader: %v, want %v", err, errBroken)
	}
}

func TestVaultPasswordGenerate(t *testing.T) {
	l, _ := ParseLeaf("<vault-password:app>")
	refused := errors.New("refused by Vault")
	tests := []struct {
		name    string
		g       Generator
		want    string
		wantErr string
	}{
		{name: "asks the policy", g: Generator{VaultPassword: func(_ context.Context, p string) (string, error) { return "from-" + p, nil }}, want: "from-app"},
		{name: "dry asks nothing", g: Generator{Dry: true, VaultPassword: func(context.Context, string) (string, error) { panic("asked") }}, want: DryVaultPassword},
		{name: "no Vault", g: Generator{}, wantErr: "templating: <vault-password:app> needs Vault, and this generator has no Vault to ask"},
		{name: "Vault refuses", g: Generator{VaultPassword: func(context.Context, string) (string, error) { return "", refused }}, wantErr: "templating: <vault-password:app>: refused by Vault"},
		{name: "Vault answers empty", g: Generator{VaultPassword: func(context.Context, string) (string, error) { return "", nil }}, wantErr: "templating: <vault-password:app>: Vault answered an empty password"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.g.Generate(l)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Generate = %v, want error %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Generate = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestFillVaultPassword: a vault-password key is seeded once, rotated on
// demand, and Vault's refusal names the key and keeps Vault's class.
func TestFillVaultPassword(t *testing.T) {
	a := Analyse(Object{Path: "m/p", Data: map[string]any{"db": map[string]any{"password": "<vault-password:app>"}}})
	if a.Problems != nil {
		t.Fatal(a.Problems)
	}
	asked := 0
	g := Generator{VaultPassword: func(context.Context, string) (string, error) { asked++; return "v", nil }}
	res, err := g.Fill(t.Context(), a, FillInput{})
	if err != nil || !cmp.Equal(res.Changes, []Change{{Key: "db.password", Action: ActionCreateField}}) {
		t.Fatalf("Fill of an empty path: %+v, %v", res.Changes, err)
	}
	res, err = g.Fill(t.Context(), a, FillInput{Current: map[string]any{"db.password": "typed"}})
	if err != nil || res.Changes != nil || asked != 1 {
		t.Fatalf("Fill of a seeded path: %+v, %v, asked %d times", res.Changes, err, asked)
	}
	res, err = g.Fill(t.Context(), a, FillInput{Current: map[string]any{"db.password": "old"}, Regenerate: []string{"db.password"}})
	if err != nil || !cmp.Equal(res.Changes, []Change{{Key: "db.password", Action: ActionRotate}}) {
		t.Fatalf("Fill of a rotation: %+v, %v", res.Changes, err)
	}
	refused := errors.New("permission denied")
	g.VaultPassword = func(context.Context, string) (string, error) { return "", refused }
	_, err = g.Fill(t.Context(), a, FillInput{})
	if want := "templating: generating db.password: <vault-password:app>: permission denied"; err == nil || err.Error() != want || !errors.Is(err, refused) {
		t.Errorf("Fill with Vault refusing: %v, want %q wrapping Vault's error", err, want)
	}
}
