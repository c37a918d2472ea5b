package templating

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

// TestFillStops: a fill whose context ends stops before its next costly
// value, with a StoppedError naming the key; values that cost nothing are
// computed whatever the context.
func TestFillStops(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	stored := mustHash(t, "source")
	tests := []struct {
		name    string
		data    map[string]any
		in      FillInput
		dry     bool
		wantKey string // "": the fill completes
	}{
		{name: "a bcrypt hash to make", data: map[string]any{"pw": "s", "h": "<bcrypt:pw>"}, wantKey: "h"},
		{name: "a bcrypt hash to compare", data: map[string]any{"pw": "source", "h": "<bcrypt:pw>"},
			in: FillInput{Current: map[string]any{"pw": "source", "h": stored}}, wantKey: "h"},
		{name: "a private key to generate", data: map[string]any{"k": "<age:secret>", "p": "<age:public>"}, wantKey: "k"},
		{name: "an ssh key to rotate", data: map[string]any{"k": "<ssh:private>"},
			in: FillInput{Current: map[string]any{"k": "x"}, Regenerate: []string{"k"}}, wantKey: "k"},
		{name: "a hash the caller checked costs nothing", data: map[string]any{"pw": "source", "h": "<bcrypt:pw>"},
			in: FillInput{Current: map[string]any{"pw": "source", "h": stored}, Checked: map[string]BcryptPair{"h": {Hash: stored, Source: "source"}}}},
		{name: "cheap values", data: map[string]any{"r": "<random:4096>", "x": "<hex:64>", "u": "<uuid>", "c": "<ref:m/p#r>", "plain": "v"}},
		{name: "a dry fill hashes nothing", data: map[string]any{"pw": "s", "h": "<bcrypt:pw>", "k": "<age:secret>"}, dry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Analyse(Object{Name: "n", Path: "m/p", Data: tt.data})
			g := fillGenerator()
			g.Dry = tt.dry
			_, err := g.Fill(ended, a, tt.in)
			var stopped *StoppedError
			switch {
			case tt.wantKey == "" && err != nil:
				t.Fatalf("Fill: %v, want it to complete", err)
			case tt.wantKey == "":
			case !errors.As(err, &stopped):
				t.Fatalf("Fill: %v, want a StoppedError", err)
			case stopped.Key != tt.wantKey || !errors.Is(err, context.Canceled):
				t.Errorf("Fill: %v, want stopped before %s by the context's end", err, tt.wantKey)
			}
		})
	}
}

// A fill that waits for a bcrypt slot (every slot taken by other fills)
// stops when its context ends during the wait.
func TestFillStopsWaitingForASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slots := NewBcryptSlots(1)
		_ = slots.acquire(t.Context(), "other") // every slot taken
		g := fillGenerator()
		g.Slots = slots
		a := Analyse(Object{Name: "n", Path: "m/p", Data: map[string]any{"pw": "s", "h": "<bcrypt:pw>"}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := g.Fill(ctx, a, FillInput{})
			done <- err
		}()
		synctest.Wait() // the fill waits for the slot
		cancel()
		err := <-done
		var stopped *StoppedError
		if !errors.As(err, &stopped) || stopped.Key != "h" {
			t.Fatalf("Fill: %v, want a StoppedError before h", err)
		}
		slots.release()
	})
}
