package templating

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"io"
	"strings"
	"testing"
	"testing/cryptotest"

	"filippo.io/age"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
)

// pairFixture is what the key pair tests need of one kind of pair: the
// pair rules are one code path, so one table of tests runs for each.
type pairFixture struct {
	p *keyPair
	// private and public belong together; otherPublic belongs to another
	// private key.
	private, public, otherPublic string
	// broken is shaped like a private key of the pair but does not parse.
	broken string
	// works proves with the pair's own library that public belongs to
	// private and that both are in the pair's canonical format.
	works func(t *testing.T, private, public string)
}

func pairFixtures(t testing.TB) []pairFixture {
	seqSSH, seqSSHPublic := sshKeyFromSeed(t, 1)
	_, zeroSSHPublic := sshKeyFromSeed(t, 0)
	fixtures := []pairFixture{
		{p: keyPairs[0], private: seqAgeSecret, public: seqAgePublic, otherPublic: zeroAgePublic, broken: "AGE-SECRET-KEY-1BROKEN", works: ageWorks},
		{p: keyPairs[1], private: seqSSH, public: seqSSHPublic, otherPublic: zeroSSHPublic,
			broken: "-----BEGIN OPENSSH PRIVATE KEY-----\nYnJva2Vu\n-----END OPENSSH PRIVATE KEY-----\n", works: sshWorks},
	}
	if len(fixtures) != len(keyPairs) {
		t.Fatalf("%d key pairs, %d fixtures: every pair runs the pair tests", len(keyPairs), len(fixtures))
	}
	return fixtures
}

// sshKeyFromSeed is the Ed25519 key of 32 bytes b, in OpenSSH private key
// format, and its authorized_keys line, both made by x/crypto/ssh directly.
func sshKeyFromSeed(t testing.TB, b byte) (private, public string) {
	t.Helper()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block)), strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(pub)), "\n")
}

func ageWorks(t *testing.T, secret, public string) {
	t.Helper()
	id, err := age.ParseX25519Identity(secret)
	if err != nil {
		t.Fatalf("age does not parse the secret: %v", err)
	}
	if id.String() != secret || len(secret) != 74 {
		t.Errorf("secret is not age's canonical 74-character encoding")
	}
	recipient, err := age.ParseX25519Recipient(public)
	if err != nil {
		t.Fatalf("age does not parse the public key: %v", err)
	}
	if public != id.Recipient().String() || !strings.HasPrefix(public, "age1") || len(public) != 62 {
		t.Errorf("public %q does not belong to the secret", public)
	}
	// The pair works: encrypt to the public, decrypt with the secret.
	var box bytes.Buffer
	w, err := age.Encrypt(&box, recipient)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "plaintext")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := age.Decrypt(&box, id)
	if err != nil {
		t.Fatalf("decrypting with the secret: %v", err)
	}
	if got, _ := io.ReadAll(r); string(got) != "plaintext" {
		t.Errorf("decrypted %q", got)
	}
}

func sshWorks(t *testing.T, private, public string) {
	t.Helper()
	block, rest := pem.Decode([]byte(private))
	if block == nil || block.Type != "OPENSSH PRIVATE KEY" || len(rest) != 0 || len(block.Headers) != 0 {
		t.Fatalf("private key is not one PEM block of type OPENSSH PRIVATE KEY")
	}
	signer, err := ssh.ParsePrivateKey([]byte(private))
	if err != nil {
		t.Fatalf("x/crypto/ssh does not parse the private key: %v", err)
	}
	if signer.PublicKey().Type() != ssh.KeyAlgoED25519 {
		t.Errorf("private key is %s, want %s", signer.PublicKey().Type(), ssh.KeyAlgoED25519)
	}
	authorized, comment, options, rest2, err := ssh.ParseAuthorizedKey([]byte(public))
	if err != nil {
		t.Fatalf("public key is not an authorized_keys line: %v", err)
	}
	if comment != "" || options != nil || len(rest2) != 0 || strings.ContainsAny(public, "\r\n") || len(public) != 80 {
		t.Errorf("public key %q is not one 80-character line without comment", public)
	}
	if !bytes.Equal(authorized.Marshal(), signer.PublicKey().Marshal()) {
		t.Fatalf("public %q does not belong to the private key", public)
	}
	// The pair works: a signature of the private key verifies with the public.
	sig, err := signer.Sign(rand.Reader, []byte("data"))
	if err != nil {
		t.Fatal(err)
	}
	if err := authorized.Verify([]byte("data"), sig); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}
}

func TestKeyPairGenerate(t *testing.T) {
	for _, fx := range pairFixtures(t) {
		t.Run(fx.p.name, func(t *testing.T) {
			leaf := Leaf{Kind: fx.p.private}
			// Generator.Rand is not read: a broken one does not matter.
			g := Generator{Rand: &bytesThenFail{}}
			seen := map[string]bool{}
			for range 10 {
				private := mustGenerate(t, g, leaf)
				if seen[private] {
					t.Fatalf("a private key drawn twice")
				}
				seen[private] = true
				if len(private) != fx.p.privateLen {
					t.Errorf("private key of %d bytes, want %d (what the bcrypt check counts)", len(private), fx.p.privateLen)
				}
				public, err := fx.p.derive(private)
				if err != nil {
					t.Fatal(err)
				}
				fx.works(t, private, public)
			}
			// Randomness is crypto/rand's: seeded, it repeats.
			cryptotest.SetGlobalRandom(t, 1)
			first := mustGenerate(t, g, leaf)
			cryptotest.SetGlobalRandom(t, 1)
			if again := mustGenerate(t, g, leaf); again != first {
				t.Errorf("after reseeding crypto/rand, Generate() differs")
			}
		})
	}
}

func TestKeyPairDerive(t *testing.T) {
	for _, fx := range pairFixtures(t) {
		notPrivate := "templating: not " + fx.p.what
		tests := []struct {
			name, private, want, wantErr string
		}{
			{name: "the fixture", private: fx.private, want: fx.public},
			{name: "empty", private: "", wantErr: notPrivate},
			{name: "garbage", private: "hunter2", wantErr: notPrivate},
			{name: "broken", private: fx.broken, wantErr: notPrivate},
			{name: "a public key", private: fx.public, wantErr: notPrivate},
			{name: "cut short", private: fx.private[:len(fx.private)/2], wantErr: notPrivate},
		}
		for _, tt := range tests {
			t.Run(fx.p.name+"/"+tt.name, func(t *testing.T) {
				got, err := fx.p.derive(tt.private)
				if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				if got != tt.want {
					t.Errorf("derive() = %q, want %q", got, tt.want)
				}
			})
		}
	}
}

// A private key put on the path by hand need not be what <ssh:private>
// generates: its public key is still derived, and one with a passphrase is
// refused without a word of it.
func TestSSHPublicOfHandMadeKeys(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pkcs1, err := ssh.MarshalPrivateKey(rsaKey, "person@host")
	if err != nil {
		t.Fatal(err)
	}
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	withPassphrase, err := ssh.MarshalPrivateKeyWithPassphrase(ed, "", []byte("passphrase"))
	if err != nil {
		t.Fatal(err)
	}
	rsaPublic, err := SSHPublic(string(pem.EncodeToMemory(pkcs1)))
	if err != nil || !strings.HasPrefix(rsaPublic, "ssh-rsa AAAA") || strings.Contains(rsaPublic, "person@host") {
		t.Errorf("SSHPublic of an RSA key = %q, %v; want its ssh-rsa line without comment", rsaPublic, err)
	}
	_, err = SSHPublic(string(pem.EncodeToMemory(withPassphrase)))
	if diff := cmp.Diff("templating: not an SSH private key without a passphrase", errString(err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func TestKeyPairAnalyse(t *testing.T) {
	type m = map[string]any
	for _, fx := range pairFixtures(t) {
		priv, pub := fx.p.privateTemplate(), fx.p.publicTemplate()
		tests := []struct {
			name      string
			data      m
			rotate    *Rotate
			want      []Problem
			wantRotat []string
		}{
			{name: "public without private", data: m{"p": pub}, want: []Problem{spec("p", pub+" needs an "+priv+" in the same object")}},
			{name: "public with two privates", data: m{"p": pub, "s1": priv, "s2": priv}, want: []Problem{
				spec("p", pub+" needs exactly one "+priv+" in the same object, found 2 (s1, s2)"),
				spec("s1", "an object holds at most one "+priv+", found 2 (s1, s2)"),
				spec("s2", "an object holds at most one "+priv+", found 2 (s1, s2)"),
			}},
			{name: "two privates", data: m{"s1": priv, "a": m{"s2": priv}}, want: []Problem{
				spec("a.s2", "an object holds at most one "+priv+", found 2 (a.s2, s1)"),
				spec("s1", "an object holds at most one "+priv+", found 2 (a.s2, s1)"),
			}},
			{name: "one private, two publics: fine", data: m{"s": priv, "p1": pub, "p2": pub}},
			{name: "private alone: fine", data: m{"s": priv}},
			{name: "bcrypt of the public", data: m{"s": priv, "p": pub, "h": "<bcrypt:p>"}, want: []Problem{spec("h", "<bcrypt:p> hashes p, which is itself derived ("+pub+"): hash the key it derives from")}},
			{name: "bcrypt of the private", data: m{"s": priv, "h": "<bcrypt:s>"}, want: []Problem{spec("h", "<bcrypt:s> hashes s, which is longer than 72 bytes, the most bcrypt accepts")}},
			{name: "rotation of the public", data: m{"s": priv, "p": pub}, rotate: &Rotate{Token: "t", Keys: []string{"p"}},
				want: []Problem{rot("p", "rotate.keys names an "+pub+": list its "+priv+" instead, the pair rotates together")}},
			{name: "rotation through the private", data: m{"s": priv, "p": pub}, rotate: &Rotate{Token: "t", Keys: []string{"s"}}, wantRotat: []string{"s"}},
			{name: "rotation of everything", data: m{"s": priv, "p": pub}, rotate: &Rotate{Token: "t"}, wantRotat: []string{"s"}},
			{name: "malformed", data: m{"a": "<" + fx.p.name + ":key>"}, want: []Problem{spec("a", "an "+fx.p.name+" template must be "+priv+" or "+pub+`, found "<`+fx.p.name+`:key>"`)}},
		}
		for _, tt := range tests {
			t.Run(fx.p.name+"/"+tt.name, func(t *testing.T) {
				got := Analyse(Object{Path: own, Data: tt.data, Rotate: tt.rotate})
				if diff := cmp.Diff(tt.want, got.Problems); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.wantRotat, got.RotationKeys); diff != "" {
					t.Errorf("RotationKeys (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// Pairs of different kinds in one object are independent: each public key
// belongs to the private key of its own pair.
func TestKeyPairsSideBySide(t *testing.T) {
	a := Analyse(Object{Path: own, Data: map[string]any{
		"age": map[string]any{"secret": "<age:secret>", "public": "<age:public>"},
		"ssh": map[string]any{"private": "<ssh:private>", "public": "<ssh:public>"},
	}})
	if a.Problems != nil {
		t.Fatalf("problems: %v", a.Problems)
	}
	got, err := fillGenerator().Fill(t.Context(), a, FillInput{})
	if err != nil {
		t.Fatal(err)
	}
	if pub, err := AgePublic(got.Values["age.secret"].(string)); err != nil || pub != got.Values["age.public"] {
		t.Errorf("the age public key does not belong to the age secret (%v)", err)
	}
	if pub, err := SSHPublic(got.Values["ssh.private"].(string)); err != nil || pub != got.Values["ssh.public"] {
		t.Errorf("the ssh public key does not belong to the ssh private key (%v)", err)
	}
}

// TestKeyPairFill: within one path the two keys of a pair always belong
// together (product document, "Templates"), whichever is missing or edited.
func TestKeyPairFill(t *testing.T) {
	type m = map[string]any
	create := func(k string) Change { return Change{Key: k, Action: ActionCreateField} }
	update := func(k string) Change { return Change{Key: k, Action: ActionUpdateField} }
	rotate := func(k string) Change { return Change{Key: k, Action: ActionRotate} }
	const generated, derived = "<generated>", "<derived>"
	for _, fx := range pairFixtures(t) {
		data := m{"k": m{"private": fx.p.privateTemplate(), "public": fx.p.publicTemplate()}, "pw": "<random:8>"}
		tests := []struct {
			name        string
			in          FillInput
			wantValues  m
			wantChanges []Change
			wantHeld    []Held
		}{
			{name: "empty path: a new pair", in: FillInput{},
				wantValues:  m{"k.private": generated, "k.public": derived, "pw": zeroRandom8},
				wantChanges: []Change{create("k.private"), create("k.public"), create("pw")}},
			{name: "complete path: nothing changes", in: FillInput{Current: m{"k.private": fx.private, "k.public": fx.public, "pw": "x"}},
				wantValues: m{}},
			{name: "missing public is derived from the stored private", in: FillInput{Current: m{"k.private": fx.private, "pw": "x"}},
				wantValues: m{"k.public": fx.public}, wantChanges: []Change{create("k.public")}},
			{name: "public of another key is put back", in: FillInput{Current: m{"k.private": fx.private, "k.public": fx.otherPublic, "pw": "x"}},
				wantValues: m{"k.public": fx.public}, wantChanges: []Change{update("k.public")}},
			{name: "public edited by hand is put back", in: FillInput{Current: m{"k.private": fx.private, "k.public": fx.public + " person@host", "pw": "x"}},
				wantValues: m{"k.public": fx.public}, wantChanges: []Change{update("k.public")}},
			{name: "missing private: a new one, and its public follows", in: FillInput{Current: m{"k.public": fx.public, "pw": "x"}},
				wantValues: m{"k.private": generated, "k.public": derived}, wantChanges: []Change{create("k.private"), update("k.public")}},
			{name: "rotating the private takes the public with it", in: FillInput{Current: m{"k.private": fx.private, "k.public": fx.public, "pw": "x"}, Regenerate: []string{"k.private"}},
				wantValues: m{"k.private": generated, "k.public": derived}, wantChanges: []Change{rotate("k.private"), update("k.public")}},
			{name: "stored private that does not parse holds the public only", in: FillInput{Current: m{"k.private": fx.broken}},
				wantValues: m{"pw": zeroRandom8}, wantChanges: []Change{create("pw")},
				wantHeld: []Held{{"k.public", &InvalidValueError{Key: "k.private", Reason: "is not " + fx.p.what}}}},
		}
		for _, tt := range tests {
			t.Run(fx.p.name+"/"+tt.name, func(t *testing.T) {
				a := Analyse(Object{Path: own, Data: data})
				if a.Problems != nil {
					t.Fatalf("analysis: %v", a.Problems)
				}
				got, err := fillGenerator().Fill(t.Context(), a, tt.in)
				if err != nil {
					t.Fatalf("Fill: %v", err)
				}
				// A new private key is new, and its public belongs to it.
				if tt.wantValues["k.private"] == generated {
					private, _ := got.Values["k.private"].(string)
					if private == fx.private {
						t.Errorf("the private key was not regenerated")
					}
					if public, _ := got.Values["k.public"].(string); public != "" {
						fx.works(t, private, public)
						got.Values["k.public"] = derived
					}
					got.Values["k.private"] = generated
				}
				if diff := cmp.Diff(tt.wantValues, got.Values); diff != "" {
					t.Errorf("values (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.wantChanges, got.Changes); diff != "" {
					t.Errorf("changes (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.wantHeld, got.Held, cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })); diff != "" {
					t.Errorf("held (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestKeyPairMatches(t *testing.T) {
	for _, fx := range pairFixtures(t) {
		leaf := Leaf{Kind: fx.p.public}
		tests := []struct {
			name, stored, source string
			want                 bool
		}{
			{name: "public of the private", stored: fx.public, source: fx.private, want: true},
			{name: "public of another private", stored: fx.otherPublic, source: fx.private},
			{name: "public with a comment", stored: fx.public + " person@host", source: fx.private},
			{name: "no private", stored: fx.public, source: "nope"},
		}
		for _, tt := range tests {
			t.Run(fx.p.name+"/"+tt.name, func(t *testing.T) {
				if got := (Generator{}).Matches(Slot{}, leaf, tt.stored, tt.source); got != tt.want {
					t.Errorf("Matches() = %v, want %v", got, tt.want)
				}
			})
		}
	}
}

// TestDryGeneratorDoesNoKeyWork: a dry generator plans the same actions as
// a real one without hashing or generating keys, so an observe-only resync
// and `ohmlab plan` cost what a quiet one does (issue 12, item 5).
func TestDryGeneratorDoesNoKeyWork(t *testing.T) {
	for _, fx := range pairFixtures(t) {
		t.Run(fx.p.name, func(t *testing.T) {
			a := Analyse(Object{Path: own, Data: map[string]any{"pw": "<random:8>", "h": "<bcrypt:pw>", "s": fx.p.privateTemplate(), "p": fx.p.publicTemplate()}})
			dry := Generator{Rand: constReader(0), Dry: true, BcryptCost: 31}
			got, err := dry.Fill(t.Context(), a, FillInput{})
			if err != nil {
				t.Fatalf("Fill: %v", err)
			}
			if got.Values["h"] != DryBcrypt {
				t.Errorf("h = %q, want the dry placeholder (cost 31 would take hours)", got.Values["h"])
			}
			again, err := dry.Generate(Leaf{Kind: fx.p.private})
			if err != nil || again != got.Values["s"] {
				t.Errorf("a dry private key is one key per process: %v", err)
			}
			real, err := Generator{Rand: constReader(0), BcryptCost: 4}.Fill(t.Context(), a, FillInput{})
			if err != nil {
				t.Fatalf("Fill: %v", err)
			}
			if diff := cmp.Diff(real.Changes, got.Changes); diff != "" {
				t.Errorf("dry and real plans differ (-real +dry):\n%s", diff)
			}
		})
	}
}
