package templating

import (
	"fmt"
	"strings"
)

// Limits of one Vault write, for the size a path's values come to.
const (
	// MaxWriteBytes is Vault's default listener max_request_size: it
	// refuses a larger request whatever its storage. The controller would
	// generate the values in memory before Vault refuses them, at every
	// attempt, so such an object is refused before that.
	MaxWriteBytes = 32 << 20
	// MaxEntryBytes is what Vault's integrated storage (raft) stores in one
	// entry by default (max_entry_size); one KV v2 version is one entry.
	MaxEntryBytes = 1 << 20
)

// generatedSize is an upper bound of the characters of each generated or
// derived template's value, for the estimate of a path's size.
var generatedSize = map[Kind]int{
	KindUUID:       36,
	KindAgeSecret:  74,
	KindAgePublic:  62,
	KindSSHPrivate: 420, // an ed25519 key in OpenSSH's PEM, newlines escaped
	KindSSHPublic:  100,
	KindBcrypt:     60,
}

// writeSize estimates, from below, the bytes of JSON of the data the
// object's path holds: every key and every value it declares, but for
// references, whose source's size is not known.
func writeSize(a Analysis) int {
	n := 2
	for _, k := range a.Keys {
		l := a.Leaves[k]
		name := k[strings.LastIndexByte(k, '.')+1:]
		n += len(name) + 4 // "name":...,
		switch l.Kind {
		case KindPlain:
			n += len(Stringify(l.Value)) + 2
		case KindRandom, KindHex:
			n += l.Length + 2
		case KindRef:
		default:
			n += generatedSize[l.Kind] + 2
		}
	}
	return n
}

// checkSize refuses a path whose values cannot be written in one request,
// and warns of one that Vault's integrated storage cannot hold.
func (an *analyser) checkSize() {
	switch n := writeSize(an.a); {
	case n > MaxWriteBytes:
		an.problem(ReasonInvalidSpec, "", fmt.Sprintf("the values of the path come to at least %s of JSON, more than the 32 MiB Vault "+
			"accepts in one request (its listener's max_request_size): split the keys over several objects", mebibytes(n)))
	case n > MaxEntryBytes:
		an.a.Warnings = append(an.a.Warnings, Problem{Message: fmt.Sprintf("the values of the path come to at least %s of JSON, more than "+
			"the 1 MiB Vault's integrated storage (raft) keeps in one entry by default (max_entry_size; Consul: 512 KiB): "+
			"the write fails on such a Vault; split the keys over several objects", mebibytes(n))})
	}
}

func mebibytes(n int) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
