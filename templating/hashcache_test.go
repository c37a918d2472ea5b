package templating

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func hashes(t testing.TB, sources ...string) []string {
	t.Helper()
	g := Generator{BcryptCost: bcrypt.MinCost}
	var out []string
	for _, s := range sources {
		h, err := g.Bcrypt(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	return out
}

// fake is not a bcrypt hash: bcrypt refuses it, so a Matches that accepts
// it answered from the cache, without bcrypt.
const fake = "not-a-bcrypt-hash"

// op is one call on a HashCache: "match" (want is its answer), "record" or
// "forget" (of at.Object).
type op struct {
	do           string
	at           Slot
	hash, source string
	want         bool
}

func TestHashCache(t *testing.T) {
	h := hashes(t, "a", "b")
	s1, s2, s3 := Slot{"ns/one", "h"}, Slot{"ns/one", "other.h"}, Slot{"ns/two", "h"}
	tests := []struct {
		name    string
		ops     []op
		wantLen int
		// wantCompares counts the bcrypt compares the cache ran.
		wantCompares uint64
	}{
		{name: "miss then hit", ops: []op{{"match", s1, h[0], "a", true}, {"match", s1, h[0], "a", true}}, wantLen: 1, wantCompares: 1},
		{name: "a hit needs no bcrypt", ops: []op{{"match", s1, h[0], "a", true}, {"record", s1, fake, "a", false}, {"match", s1, fake, "a", true}}, wantLen: 1, wantCompares: 1},
		{name: "mismatch not remembered", ops: []op{{"match", s1, h[0], "b", false}, {"match", s1, h[0], "b", false}}, wantLen: 0, wantCompares: 2},
		{name: "not a hash", ops: []op{{"match", s1, "a", "a", false}}, wantLen: 0, wantCompares: 1},
		{name: "a generated hash is not compared again", ops: []op{{"record", s1, fake, "a", false}, {"match", s1, fake, "a", true}}, wantLen: 1, wantCompares: 0},
		{name: "a recorded pair is for its source only", ops: []op{{"record", s1, fake, "a", false}, {"match", s1, fake, "b", false}}, wantLen: 1, wantCompares: 1},
		{name: "a slot holds its last pair", ops: []op{{"record", s1, fake, "a", false}, {"match", s1, h[1], "b", true}, {"match", s1, fake, "a", false}, {"match", s1, h[1], "b", true}}, wantLen: 1, wantCompares: 2},
		{name: "slots are apart", ops: []op{{"record", s1, fake, "a", false}, {"match", s2, fake, "a", false}, {"match", s3, fake, "a", false}}, wantLen: 1, wantCompares: 2},
		{name: "forget drops the object's slots only", ops: []op{
			{"record", s1, fake, "a", false}, {"record", s2, fake, "a", false}, {"record", s3, fake, "a", false},
			{"forget", s1, "", "", false},
			{"match", s1, fake, "a", false}, {"match", s2, fake, "a", false}, {"match", s3, fake, "a", true},
		}, wantLen: 1, wantCompares: 2},
		{name: "forget an unknown object", ops: []op{{"forget", s1, "", "", false}}, wantLen: 0, wantCompares: 0},
		{name: "source over 72 bytes", ops: []op{{"record", s1, fake, strings.Repeat("a", 73), false}, {"match", s1, fake, strings.Repeat("a", 73), false}}, wantLen: 0, wantCompares: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewHashCache(constReader(1))
			run(t, c, tt.ops)
			if got := c.Len(); got != tt.wantLen {
				t.Errorf("Len() = %d, want %d", got, tt.wantLen)
			}
			if got := c.Compares(); got != tt.wantCompares {
				t.Errorf("Compares() = %d, want %d", got, tt.wantCompares)
			}
		})
	}
}

func run(t *testing.T, c *HashCache, ops []op) {
	t.Helper()
	for i, o := range ops {
		switch o.do {
		case "match":
			if got := c.Matches(o.at, o.hash, o.source); got != o.want {
				t.Errorf("op %d: Matches(%v) = %v, want %v", i, o.at, got, o.want)
			}
		case "record":
			c.Record(o.at, o.hash, o.source)
		case "forget":
			c.Forget(o.at.Object)
		}
	}
}

// The cache holds every slot it serves: well past the 4,096 entries of a
// fixed-size cache, none is forgotten.
func TestHashCacheHasNoFixedSize(t *testing.T) {
	const n = 20000
	c := NewHashCache(constReader(1))
	for i := range n {
		c.Record(Slot{Object: fmt.Sprintf("ns/o%d", i), Key: "h"}, fake, "a")
	}
	for i := range n {
		if !c.Matches(Slot{Object: fmt.Sprintf("ns/o%d", i), Key: "h"}, fake, "a") {
			t.Fatalf("slot %d of %d was forgotten", i, n)
		}
	}
	if c.Len() != n {
		t.Errorf("Len() = %d, want %d", c.Len(), n)
	}
}

func TestHashCacheNil(t *testing.T) {
	h := hashes(t, "a")[0]
	var c *HashCache
	c.Record(Slot{}, fake, "a")
	c.Forget("ns/o")
	if !c.Matches(Slot{}, h, "a") || c.Matches(Slot{}, h, "b") || c.Matches(Slot{}, fake, "a") {
		t.Error("a nil cache answers wrongly")
	}
	if c.Len() != 0 {
		t.Errorf("a nil cache holds %d slots", c.Len())
	}
}

func TestHashCacheDigest(t *testing.T) {
	c := NewHashCache(constReader(1))
	other := NewHashCache(constReader(2))
	if c.digest("ab", "c") == c.digest("a", "bc") {
		t.Error("digest does not separate hash from source")
	}
	if c.digest("h", "s") != c.digest("h", "s") {
		t.Error("digest is not deterministic under one key")
	}
	if c.digest("h", "s") == other.digest("h", "s") {
		t.Error("digest does not depend on the key")
	}
}

func TestHashCacheDisabledWhenRandFails(t *testing.T) {
	h := hashes(t, "a")[0]
	c := NewHashCache(&bytesThenFail{1, 2, 3})
	c.Record(Slot{}, fake, "a")
	if !c.Matches(Slot{}, h, "a") || c.Matches(Slot{}, h, "b") || c.Matches(Slot{}, fake, "a") {
		t.Error("a disabled cache answers wrongly")
	}
	if c.Len() != 0 {
		t.Errorf("a disabled cache holds %d slots", c.Len())
	}
	if c.Compares() != 3 {
		t.Errorf("a disabled cache counts %d compares, want 3", c.Compares())
	}
}

func TestHashCacheConcurrent(t *testing.T) {
	h := hashes(t, "a", "b")
	c := NewHashCache(constReader(1))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			at := Slot{Object: fmt.Sprintf("ns/o%d", i%4), Key: "h"}
			src := []string{"a", "b"}[i%2]
			for range 5 {
				if !c.Matches(at, h[i%2], src) {
					t.Error("Matches() = false")
				}
			}
			c.Forget("ns/o3")
		})
	}
	wg.Wait()
	if n := c.Len(); n < 3 || n > 4 {
		t.Errorf("Len() = %d, want 3 or 4", n)
	}
}

// BenchmarkHashCache is the cost of one resync's check of an unchanged hash
// among 10,000 objects: a hit, no bcrypt.
func BenchmarkHashCache(b *testing.B) {
	c := NewHashCache(constReader(1))
	h := hashes(b, "correct horse battery staple")[0]
	for i := range 10000 {
		c.Record(Slot{Object: fmt.Sprintf("ns/o%d", i), Key: "h"}, h, "correct horse battery staple")
	}
	at := Slot{Object: "ns/o5000", Key: "h"}
	b.ResetTimer()
	for b.Loop() {
		if !c.Matches(at, h, "correct horse battery staple") {
			b.Fatal("miss")
		}
	}
}
