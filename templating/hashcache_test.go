package templating

import (
	"sync"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func hashes(t *testing.T, sources ...string) []string {
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

func TestHashCache(t *testing.T) {
	h := hashes(t, "a", "b", "c")
	tests := []struct {
		name    string
		size    int
		calls   [][2]string // (hash, source)
		want    []bool
		wantLen int
	}{
		{name: "miss then hit", size: 4, calls: [][2]string{{h[0], "a"}, {h[0], "a"}}, want: []bool{true, true}, wantLen: 1},
		{name: "mismatch not remembered", size: 4, calls: [][2]string{{h[0], "b"}, {h[0], "b"}}, want: []bool{false, false}, wantLen: 0},
		{name: "not a hash", size: 4, calls: [][2]string{{"a", "a"}}, want: []bool{false}, wantLen: 0},
		{name: "bounded, oldest forgotten", size: 2, calls: [][2]string{{h[0], "a"}, {h[1], "b"}, {h[2], "c"}, {h[0], "a"}}, want: []bool{true, true, true, true}, wantLen: 2},
		{name: "default size", size: 0, calls: [][2]string{{h[0], "a"}, {h[1], "b"}, {h[2], "c"}}, want: []bool{true, true, true}, wantLen: 3},
		{name: "source over 72 bytes", size: 4, calls: [][2]string{{h[0], "a" + string(make([]byte, 72))}}, want: []bool{false}, wantLen: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewHashCache(constReader(1), tt.size)
			for i, call := range tt.calls {
				if got := c.Matches(call[0], call[1]); got != tt.want[i] {
					t.Errorf("call %d: Matches() = %v, want %v", i, got, tt.want[i])
				}
			}
			if got := c.Len(); got != tt.wantLen {
				t.Errorf("Len() = %d, want %d", got, tt.wantLen)
			}
		})
	}
}

func TestHashCacheHitSkipsBcrypt(t *testing.T) {
	h := hashes(t, "a")[0]
	c := NewHashCache(constReader(1), 4)
	if !c.Matches(h, "a") {
		t.Fatal("first Matches() = false")
	}
	// A pair the cache remembers is answered without bcrypt: plant the
	// digest of a pair bcrypt would refuse and see it accepted.
	c.mu.Lock()
	c.entries[c.digest("not-a-hash", "a")] = struct{}{}
	c.mu.Unlock()
	if !c.Matches("not-a-hash", "a") {
		t.Error("a remembered pair went to bcrypt")
	}
}

func TestHashCacheDigest(t *testing.T) {
	c := NewHashCache(constReader(1), 4)
	other := NewHashCache(constReader(2), 4)
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
	c := NewHashCache(&bytesThenFail{1, 2, 3}, 4)
	if !c.Matches(h, "a") || c.Matches(h, "b") {
		t.Error("a disabled cache answers wrongly")
	}
	if c.Len() != 0 {
		t.Errorf("a disabled cache holds %d entries", c.Len())
	}
}

func TestHashCacheConcurrent(t *testing.T) {
	h := hashes(t, "a", "b")
	c := NewHashCache(constReader(1), 1)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := []string{"a", "b"}[i%2]
			for range 5 {
				if !c.Matches(h[i%2], src) {
					t.Error("Matches() = false")
				}
			}
		}()
	}
	wg.Wait()
	if c.Len() != 1 {
		t.Errorf("Len() = %d, want 1", c.Len())
	}
}
