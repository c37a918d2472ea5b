package templating

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"
)

const (
	seqAgeSecret  = "AGE-SECRET-KEY-1QQQSYQCYQ5RQWZQFPG9SCRGWPUGPZYSNZS23V9CCRYDPK8QARC0SWRYDWG"
	seqAgePublic  = "age13aqvttdk3ujkyjh9kg2w5an6dmy5mq5a84a4uxk3hfhnugfc9p0sy5p2wh"
	zeroAgeSecret = "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ8H00W3"
	zeroAgePublic = "age19ljhmg68e43yx9fgm2k9lwefquc0la5y4lzvlshdjzv47kxt8d6qr9vf4p"
	// seededAgeSecret is the first identity age generates after
	// cryptotest.SetGlobalRandom(t, 1).
	seededAgeSecret = "AGE-SECRET-KEY-1DTN8S060HH53KM4C3DE6FRKJGLD7TZPWY4UKSDPJCXLU2F29FTWS87RJPM"
	seededAgePublic = "age192ftwdzwzykthskpva95zwj6x5ue49uwzj4ugr0ax662l7lzgfjq3uw4ru"
	// shortAgeSecret is a valid Bech32 string of the age secret type over
	// 31 zero bytes instead of 32.
	shortAgeSecret = "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ6J6TAE"
)

func TestGenerateDeterministic(t *testing.T) {
	tests := []struct {
		name string
		rand io.Reader
		leaf Leaf
		want string
	}{
		{name: "random from 0,1,2…", rand: &seqReader{}, leaf: Leaf{Kind: KindRandom, Length: 8}, want: "ABCDEFGH"},
		{name: "random wraps at 62", rand: &seqReader{next: 60}, leaf: Leaf{Kind: KindRandom, Length: 4}, want: "89AB"},
		{name: "random skips bytes >= 248", rand: bytes.NewReader([]byte{248, 249, 250, 251, 252, 253, 254, 255, 0, 61, 62, 247}), leaf: Leaf{Kind: KindRandom, Length: 4}, want: "A9A9"},
		{name: "random reads again when bytes are skipped", rand: bytes.NewReader(append(bytes.Repeat([]byte{255}, 9), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)), leaf: Leaf{Kind: KindRandom, Length: 1}, want: "B"},
		{name: "random of constant", rand: constReader(0), leaf: Leaf{Kind: KindRandom, Length: 3}, want: "AAA"},
		{name: "hex", rand: &seqReader{}, leaf: Leaf{Kind: KindHex, Length: 8}, want: "00010203"},
		{name: "hex lowercase", rand: constReader(0xAB), leaf: Leaf{Kind: KindHex, Length: 4}, want: "abab"},
		{name: "uuid sets version and variant", rand: &seqReader{}, leaf: Leaf{Kind: KindUUID}, want: "00010203-0405-4607-8809-0a0b0c0d0e0f"},
		{name: "uuid of ones", rand: constReader(0xFF), leaf: Leaf{Kind: KindUUID}, want: "ffffffff-ffff-4fff-bfff-ffffffffffff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Generator{Rand: tt.rand}.Generate(tt.leaf)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Generate() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	tests := []struct {
		name    string
		rand    io.Reader
		leaf    Leaf
		wantErr string
		wantIs  error
	}{
		{name: "plain", leaf: Leaf{Kind: KindPlain}, wantErr: "templating: plain leaves are not generated"},
		{name: "bcrypt", leaf: Leaf{Kind: KindBcrypt}, wantErr: "templating: bcrypt leaves are not generated"},
		{name: "age public", leaf: Leaf{Kind: KindAgePublic}, wantErr: "templating: age-public leaves are not generated"},
		{name: "ssh public", leaf: Leaf{Kind: KindSSHPublic}, wantErr: "templating: ssh-public leaves are not generated"},
		{name: "ref", leaf: Leaf{Kind: KindRef}, wantErr: "templating: ref leaves are not generated"},
		{name: "random 0", leaf: Leaf{Kind: KindRandom}, wantErr: "templating: random length must be from 1 to 4096"},
		{name: "random 4097", leaf: Leaf{Kind: KindRandom, Length: 4097}, wantErr: "templating: random length must be from 1 to 4096"},
		{name: "hex odd", leaf: Leaf{Kind: KindHex, Length: 3}, wantErr: "templating: hex length must be even, from 2 to 4096"},
		{name: "hex 0", leaf: Leaf{Kind: KindHex}, wantErr: "templating: hex length must be even, from 2 to 4096"},
		{name: "hex 4098", leaf: Leaf{Kind: KindHex, Length: 4098}, wantErr: "templating: hex length must be even, from 2 to 4096"},
		{name: "random reader fails", rand: &bytesThenFail{}, leaf: Leaf{Kind: KindRandom, Length: 8}, wantErr: "templating: reading randomness: broken reader", wantIs: errBroken},
		{name: "random reader fails after skipped bytes", rand: &bytesThenFail{255, 255, 255, 255, 255, 255, 255, 255, 255}, leaf: Leaf{Kind: KindRandom, Length: 1}, wantErr: "templating: reading randomness: broken reader", wantIs: errBroken},
		{name: "hex reader fails", rand: &bytesThenFail{1}, leaf: Leaf{Kind: KindHex, Length: 8}, wantErr: "templating: reading randomness: broken reader", wantIs: errBroken},
		{name: "uuid reader fails", rand: &bytesThenFail{}, leaf: Leaf{Kind: KindUUID}, wantErr: "templating: reading randomness: broken reader", wantIs: errBroken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.rand
			if r == nil {
				r = constReader(0)
			}
			got, err := Generator{Rand: r}.Generate(tt.leaf)
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %v does not wrap %v", err, tt.wantIs)
			}
			if got != "" {
				t.Errorf("Generate() = %q with an error", got)
			}
		})
	}
}

func TestGenerateDefaultsToCryptoRand(t *testing.T) {
	a := mustGenerate(t, Generator{}, Leaf{Kind: KindRandom, Length: 32})
	b := mustGenerate(t, Generator{}, Leaf{Kind: KindRandom, Length: 32})
	if a == b {
		t.Errorf("two draws from crypto/rand are equal: %q", a)
	}
}

func TestRandomProperties(t *testing.T) {
	g := Generator{Rand: chacha(1)}
	for _, n := range []int{1, 2, 7, 24, 61, 62, 63, 255, 256, 1000, 4095, 4096} {
		v := mustGenerate(t, g, Leaf{Kind: KindRandom, Length: n})
		if len(v) != n {
			t.Errorf("<random:%d> has length %d", n, len(v))
		}
		if i := strings.IndexFunc(v, func(r rune) bool { return !strings.ContainsRune(alnum, r) }); i >= 0 {
			t.Errorf("<random:%d> has %q outside [A-Za-z0-9]", n, v[i])
		}
	}
	// Uniformity: 62,000 characters, 1,000 expected per character; a
	// modulo bias on 256 bytes would give the first 8 characters ~1,190.
	counts := map[rune]int{}
	for range 62 {
		for _, r := range mustGenerate(t, g, Leaf{Kind: KindRandom, Length: 1000}) {
			counts[r]++
		}
	}
	if len(counts) != 62 {
		t.Errorf("%d distinct characters, want 62", len(counts))
	}
	for r, c := range counts {
		if c < 880 || c > 1120 {
			t.Errorf("character %q drawn %d times, want 1000 ± 120", r, c)
		}
	}
}

func TestHexProperties(t *testing.T) {
	g := Generator{Rand: chacha(2)}
	for _, n := range []int{2, 4, 32, 64, 100, 4096} {
		v := mustGenerate(t, g, Leaf{Kind: KindHex, Length: n})
		if len(v) != n {
			t.Errorf("<hex:%d> has length %d", n, len(v))
		}
		if i := strings.IndexFunc(v, func(r rune) bool { return !strings.ContainsRune("0123456789abcdef", r) }); i >= 0 {
			t.Errorf("<hex:%d> has %q outside [0-9a-f]", n, v[i])
		}
	}
}

func TestUUIDProperties(t *testing.T) {
	g := Generator{Rand: chacha(3)}
	seen := map[string]bool{}
	for range 200 {
		v := mustGenerate(t, g, Leaf{Kind: KindUUID})
		u, err := uuid.Parse(v)
		if err != nil {
			t.Fatalf("uuid.Parse(%q): %v", v, err)
		}
		if u.Version() != 4 || u.Variant() != uuid.RFC4122 {
			t.Errorf("%s: version %d variant %v, want 4 and RFC4122", v, u.Version(), u.Variant())
		}
		if len(v) != 36 || v != strings.ToLower(v) {
			t.Errorf("%q is not the 36-character lowercase form", v)
		}
		if seen[v] {
			t.Errorf("%s drawn twice", v)
		}
		seen[v] = true
	}
}

// TestAgePublic: the age library's refusals; TestKeyPairDerive has the
// refusals every key pair shares.
func TestAgePublic(t *testing.T) {
	tests := []struct {
		name    string
		secret  string
		want    string
		wantErr string
	}{
		{name: "zeros", secret: zeroAgeSecret, want: zeroAgePublic},
		{name: "seeded", secret: seededAgeSecret, want: seededAgePublic},
		{name: "bad checksum", secret: seqAgeSecret[:len(seqAgeSecret)-1] + "Q", wantErr: "templating: not an age X25519 secret key (AGE-SECRET-KEY-1…)"},
		{name: "lowercase", secret: strings.ToLower(seqAgeSecret), wantErr: "templating: not an age X25519 secret key (AGE-SECRET-KEY-1…)"},
		{name: "wrong length", secret: shortAgeSecret, wantErr: "templating: not an age X25519 secret key (AGE-SECRET-KEY-1…)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AgePublic(tt.secret)
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got != tt.want {
				t.Errorf("AgePublic() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBcrypt(t *testing.T) {
	tests := []struct {
		name     string
		cost     int
		src      string
		wantCost int
		wantErr  string
		wantIs   error
	}{
		{name: "min cost", cost: bcrypt.MinCost, src: "password", wantCost: bcrypt.MinCost},
		{name: "72 bytes", cost: bcrypt.MinCost, src: strings.Repeat("x", 72), wantCost: bcrypt.MinCost},
		{name: "empty", cost: bcrypt.MinCost, src: "", wantCost: bcrypt.MinCost},
		{name: "default cost", cost: 0, src: "password", wantCost: bcrypt.DefaultCost},
		{name: "73 bytes", cost: bcrypt.MinCost, src: strings.Repeat("x", 73), wantErr: "templating: bcrypt input is longer than 72 bytes", wantIs: ErrBcryptInputTooLong},
		{name: "cost too high", cost: 40, src: "password", wantErr: "templating: bcrypt: crypto/bcrypt: cost 40 is outside allowed inclusive range 4..31"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Generator{BcryptCost: tt.cost}.Bcrypt(tt.src)
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %v is not %v", err, tt.wantIs)
			}
			if err != nil {
				return
			}
			if err := bcrypt.CompareHashAndPassword([]byte(h), []byte(tt.src)); err != nil {
				t.Errorf("hash does not verify: %v", err)
			}
			if c, _ := bcrypt.Cost([]byte(h)); c != tt.wantCost {
				t.Errorf("cost %d, want %d", c, tt.wantCost)
			}
			if len(h) != 60 {
				t.Errorf("hash has %d characters, want 60", len(h))
			}
		})
	}
}

func TestBcryptProperties(t *testing.T) {
	g := Generator{Rand: chacha(5), BcryptCost: bcrypt.MinCost}
	seen := map[string]bool{}
	for _, n := range []int{1, 8, 24, 36, 72} {
		src := mustGenerate(t, g, Leaf{Kind: KindRandom, Length: n})
		h, err := g.Bcrypt(src)
		if err != nil {
			t.Fatal(err)
		}
		if bcrypt.CompareHashAndPassword([]byte(h), []byte(src)) != nil {
			t.Errorf("hash of a %d-character source does not verify", n)
		}
		if !g.Matches(Slot{}, Leaf{Kind: KindBcrypt}, h, src) {
			t.Errorf("Matches refuses the hash of a %d-character source", n)
		}
		if g.Matches(Slot{}, Leaf{Kind: KindBcrypt}, h, src+"x") {
			t.Errorf("Matches accepts another source")
		}
		if seen[h] {
			t.Errorf("two equal hashes: salts are not fresh")
		}
		seen[h] = true
	}
}

// TestBcryptUnderGlobalRandom cannot run in parallel: SetGlobalRandom makes
// crypto/rand, which bcrypt reads its salts from, deterministic for the
// whole process.
func TestBcryptUnderGlobalRandom(t *testing.T) {
	g := Generator{Rand: &bytesThenFail{}, BcryptCost: bcrypt.MinCost}
	hash := func(seed uint64) string {
		t.Helper()
		cryptotest.SetGlobalRandom(t, seed)
		h, err := g.Bcrypt("password")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b, c := hash(1), hash(1), hash(2)
	if a != b {
		t.Errorf("one seed gave two hashes: %q and %q", a, b)
	}
	if a == c {
		t.Errorf("two seeds gave one salt")
	}
	if bcrypt.CompareHashAndPassword([]byte(a), []byte("password")) != nil {
		t.Errorf("hash does not verify")
	}
}

func TestMatches(t *testing.T) {
	g := Generator{BcryptCost: bcrypt.MinCost}
	hash, err := g.Bcrypt("right")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("y", 72)
	longHash, err := g.Bcrypt(long)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		leaf   Leaf
		stored string
		source string
		want   bool
	}{
		{name: "bcrypt matches", leaf: Leaf{Kind: KindBcrypt}, stored: hash, source: "right", want: true},
		{name: "bcrypt other source", leaf: Leaf{Kind: KindBcrypt}, stored: hash, source: "wrong"},
		{name: "bcrypt not a hash", leaf: Leaf{Kind: KindBcrypt}, stored: "right", source: "right"},
		{name: "bcrypt 72 bytes", leaf: Leaf{Kind: KindBcrypt}, stored: longHash, source: long, want: true},
		{name: "bcrypt source bcrypt would truncate", leaf: Leaf{Kind: KindBcrypt}, stored: longHash, source: long + "z"},
		{name: "plain", leaf: Leaf{Kind: KindPlain}, stored: "x", source: "x"},
		{name: "ref", leaf: Leaf{Kind: KindRef}, stored: "x", source: "x"},
		{name: "random", leaf: Leaf{Kind: KindRandom}, stored: "x", source: "x"},
	}
	for _, tt := range tests {
		for _, cached := range []bool{false, true} {
			name := tt.name
			g := g
			if cached {
				name += " cached"
				g.Cache = NewHashCache(constReader(7))
			}
			t.Run(name, func(t *testing.T) {
				// Twice: the second answer may come from the cache.
				for range 2 {
					if got := g.Matches(Slot{Object: "ns/o", Key: "h"}, tt.leaf, tt.stored, tt.source); got != tt.want {
						t.Errorf("Matches() = %v, want %v", got, tt.want)
					}
				}
			})
		}
	}
}

// Hashes and compares wait for a free slot of the Generator's BcryptSlots.
func TestBcryptSlotsBoundBcrypt(t *testing.T) {
	hash, err := Generator{BcryptCost: bcrypt.MinCost}.Bcrypt("source")
	if err != nil {
		t.Fatal(err)
	}
	slots := NewBcryptSlots(1)
	g := Generator{BcryptCost: bcrypt.MinCost, Slots: slots}
	for name, work := range map[string]func(){
		"hash":    func() { _, _ = g.Bcrypt("source") },
		"compare": func() { g.Matches(Slot{}, Leaf{Kind: KindBcrypt}, hash, "source") },
	} {
		t.Run(name, func(t *testing.T) {
			_ = slots.acquire(t.Context(), "other") // every slot taken
			done := make(chan struct{})
			go func() {
				work()
				close(done)
			}()
			select {
			case <-done:
				t.Fatal("ran while every slot was taken")
			case <-time.After(100 * time.Millisecond):
			}
			slots.release()
			<-done
		})
	}
}
