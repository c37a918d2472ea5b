package planner

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// TestMessageCapped: a message that fits is left whole; a longer list keeps
// its head, its first whole items and its tail, and says how many items it
// left out; text that has no item boundary to cut at is cut on a rune
// boundary.
func TestMessageCapped(t *testing.T) {
	refs := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("ohmlab/p%d#k (path missing)", i)
		}
		return out
	}
	tests := []struct {
		name string
		msg  Message
		max  int
		want string
	}{
		{
			name: "fits: whole",
			msg:  waitingMessage(refs(2)),
			max:  1024,
			want: "waiting for ohmlab/p0#k (path missing), ohmlab/p1#k (path missing)",
		},
		{
			name: "exactly max bytes: whole",
			msg:  List("", []string{"abc", "def"}, ", ", ""),
			max:  len("abc, def"),
			want: "abc, def",
		},
		{
			name: "a list cut between items, the rest counted",
			msg:  waitingMessage(refs(5)),
			max:  len("waiting for ohmlab/p0#k (path missing), ohmlab/p1#k (path missing), … and 3 more"),
			want: "waiting for ohmlab/p0#k (path missing), ohmlab/p1#k (path missing), … and 3 more",
		},
		{
			name: "one byte less keeps one item fewer",
			msg:  waitingMessage(refs(5)),
			max:  len("waiting for ohmlab/p0#k (path missing), ohmlab/p1#k (path missing), … and 3 more") - 1,
			want: "waiting for ohmlab/p0#k (path missing), … and 4 more",
		},
		{
			name: "no item fits: the head and the count",
			msg:  waitingMessage(refs(400)),
			max:  40,
			want: "waiting for … and 400 more",
		},
		{
			name: "the tail, what to do, is kept",
			msg:  List("", []string{"a: cannot be computed", "b: cannot be computed", "c: cannot be computed"}, "; ", "; fix the spec"),
			max:  len("a: cannot be computed; … and 2 more; fix the spec"),
			want: "a: cannot be computed; … and 2 more; fix the spec",
		},
		{
			name: "kept keys: the count is of keys, across groups",
			msg: KeptMessage([]Kept{{Key: "a", Why: keptChanged}, {Key: "b", Why: keptChanged},
				{Key: "c", Why: keptVersionGone(3)}, {Key: "d", Why: keptVersionGone(3)}}),
			max:  len("changed since the controller wrote it: a, b; … and 2 more"),
			want: "changed since the controller wrote it: a, b; … and 2 more",
		},
		{
			name: "text without items: cut with an ellipsis",
			msg:  Text("vaultkv: read ohmlab/x: unavailable: connection refused"),
			max:  20,
			want: "vaultkv: read ohm…",
		},
		{
			name: "never inside a rune: the cut moves back to the rune's start",
			msg:  Text("clé: ééééé"),
			max:  len("clé: é") + 1 + len("…"), // one byte into the second é
			want: "clé: é…",
		},
		{
			name: "a head longer than max: the text is cut",
			msg:  List(strings.Repeat("h", 50), []string{"a", "b"}, ", ", ""),
			max:  20,
			want: strings.Repeat("h", 17) + "…",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.msg.Capped(tt.max)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("capped(%d) (-want +got):\n%s", tt.max, diff)
			}
			if len(got) > tt.max {
				t.Errorf("capped(%d) is %d bytes", tt.max, len(got))
			}
		})
	}
}

// TestMessageCappedBounds: whatever the bound, a capped message fits in it,
// is valid UTF-8 when the message is, and a list's count of items left out
// is exact.
func TestMessageCappedBounds(t *testing.T) {
	var items []string
	for i := range 60 {
		items = append(items, fmt.Sprintf("clé-%d-日本", i))
	}
	msg := List("en attente de ", items, ", ", " — corrigez")
	for max := 0; max <= len(msg.String())+1; max++ {
		got := msg.Capped(max)
		if len(got) > max {
			t.Fatalf("capped(%d) is %d bytes: %q", max, len(got), got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("capped(%d) cut inside a rune: %q", max, got)
		}
		i := strings.LastIndex(got, "… and ")
		if i < 0 {
			continue
		}
		var left int
		if _, err := fmt.Sscanf(got[i+len("… and "):], "%d more", &left); err == nil {
			if shown := strings.Count(got, "clé-"); shown+left != len(items) {
				t.Fatalf("capped(%d) shows %d items and says %d more, of %d: %q", max, shown, left, len(items), got)
			}
		}
	}
}
