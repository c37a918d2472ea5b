package templating

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// constReader returns an endless stream of one byte.
type constReader byte

func (c constReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}

// seqReader returns 0, 1, 2, … 255, 0, 1, …
type seqReader struct{ next byte }

func (s *seqReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = s.next
		s.next++
	}
	return len(p), nil
}

// bytesThenFail returns its bytes, then errBroken.
type bytesThenFail []byte

var errBroken = errors.New("broken reader")

func (b *bytesThenFail) Read(p []byte) (int, error) {
	if len(*b) == 0 {
		return 0, errBroken
	}
	n := copy(p, *b)
	*b = (*b)[n:]
	return n, nil
}

// chacha returns a deterministic, uniformly random reader.
func chacha(seed byte) *rand.ChaCha8 {
	var s [32]byte
	s[0] = seed
	return rand.NewChaCha8(s)
}

func mustGenerate(t testing.TB, g Generator, l Leaf) string {
	t.Helper()
	v, err := g.Generate(l)
	if err != nil {
		t.Fatalf("Generate(%v): %v", l.Kind, err)
	}
	return v
}

func mustParse(t testing.TB, s string) Leaf {
	t.Helper()
	l, err := ParseLeaf(s)
	if err != nil {
		t.Fatalf("ParseLeaf(%q): %v", s, err)
	}
	return l
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
