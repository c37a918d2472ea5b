package planner

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// What the API server stores. An Event's note (events.k8s.io/v1) holds at
// most 1024 bytes: a longer Event is refused, and the recorder only logs
// that. A condition's message holds at most 32768 characters: a longer one
// fails the whole status patch, so the object gets no status at all.
// Conditions stay well below that: every kubectl get, Argo CD sync and
// watch event carries them.
const (
	// MaxConditionMessage caps a condition's message.
	MaxConditionMessage = 4 << 10
	// MaxEventNote caps an event's note.
	MaxEventNote = 1 << 10
)

// Message is the text of a condition or an event: a head, then the items
// it lists (references waited for, keys held back or kept, problems), each
// after its separator, then a tail. Capped to what the API server stores
// (Capped), it keeps whole items and says how many it leaves out. It names
// keys and paths, never values.
type Message struct {
	head  string
	items []listItem
	tail  string
}

// listItem is one item of a Message and the separator before it ("" before
// the first).
type listItem struct{ sep, text string }

// Text is a Message that lists nothing.
func Text(s string) Message { return Message{head: s} }

// List is head, the items joined by sep, then tail.
func List(head string, items []string, sep, tail string) Message {
	m := Message{head: head, tail: tail, items: make([]listItem, len(items))}
	for i, it := range items {
		m.items[i] = listItem{text: it}
		if i > 0 {
			m.items[i].sep = sep
		}
	}
	return m
}

// String is the whole message, uncapped.
func (m Message) String() string {
	var b strings.Builder
	b.WriteString(m.head)
	for _, it := range m.items {
		b.WriteString(it.sep)
		b.WriteString(it.text)
	}
	b.WriteString(m.tail)
	return b.String()
}

// Equal says whether two messages read the same (go-cmp uses it).
func (m Message) Equal(o Message) bool { return m.String() == o.String() }

// WithHead is the message with prefix before its head.
func (m Message) WithHead(prefix string) Message {
	m.head = prefix + m.head
	return m
}

// WithTail is the message with suffix after its tail.
func (m Message) WithTail(suffix string) Message {
	m.tail += suffix
	return m
}

// Capped is the message in at most max bytes. One that is longer keeps
// its head, as many of its first items as fit, "… and N more" in place of
// the N items left out, and its tail (what to do comes last); when not even
// that fits, its text is cut before max on a rune boundary, ending with
// "…".
func (m Message) Capped(max int) string {
	full := m.String()
	if len(full) <= max {
		return full
	}
	kept, size := -1, len(m.head)
	for k := range m.items {
		// size is the length of the head and the first k items.
		if size+len(more(m.items[k].sep, len(m.items)-k))+len(m.tail) <= max {
			kept = k
		}
		size += len(m.items[k].sep) + len(m.items[k].text)
	}
	if kept < 0 {
		return cutText(full, max)
	}
	var b strings.Builder
	b.WriteString(m.head)
	for _, it := range m.items[:kept] {
		b.WriteString(it.sep)
		b.WriteString(it.text)
	}
	b.WriteString(more(m.items[kept].sep, len(m.items)-kept))
	b.WriteString(m.tail)
	return b.String()
}

// more stands for the n items left out of a list, after the separator of
// the first of them.
func more(sep string, n int) string {
	return fmt.Sprintf("%s… and %d more", sep, n)
}

// cutText is s in at most max bytes: cut on a rune boundary, ending with
// "…", when it is longer.
func cutText(s string, max int) string {
	const ellipsis = "…"
	if len(s) <= max {
		return s
	}
	i := max - len(ellipsis)
	if i <= 0 {
		return ""
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + ellipsis
}
