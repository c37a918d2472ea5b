package planner

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

func TestCheckedPairs(t *testing.T) {
	a := templating.Analyse(templating.Object{Path: ownPath, Data: m{"password": "<random:24>", "passwordHashed": "<bcrypt:password>"}})
	at := func(v int) map[string]int { return map[string]int{"password": v, "passwordHashed": v} }
	pair := map[string]templating.BcryptPair{"passwordHashed": {Hash: "H", Source: "s"}}
	v2 := ours(2, m{"password": "s", "passwordHashed": "H"})
	tests := []struct {
		name    string
		d       Desired
		path    *vaultkv.Secret
		written map[int]*vaultkv.Secret
		want    map[string]templating.BcryptPair
	}{
		{name: "recorded at the version read", d: Desired{WrittenAt: at(2), Version: 2}, path: v2, want: pair},
		{name: "recorded at an older version, read to carry the records", d: Desired{WrittenAt: at(2), Version: 2},
			path: ours(3, m{"password": "s", "passwordHashed": "H", "other": "typed"}), written: map[int]*vaultkv.Secret{2: v2}, want: pair},
		{name: "recorded at an older version not read", d: Desired{WrittenAt: at(2), Version: 3},
			path: ours(3, m{"password": "s", "passwordHashed": "H", "other": "typed"})},
		{name: "recorded at a version no longer kept", d: Desired{WrittenAt: at(2), Version: 2},
			path: ours(3, m{"password": "s", "passwordHashed": "H"}), written: map[int]*vaultkv.Secret{2: {}}},
		{name: "recorded by the first release, without a version", d: Desired{WrittenAt: at(0), Version: 2}, path: v2},
		{name: "recorded past status.version: the path was written again since", d: Desired{WrittenAt: at(2), Version: 1}, path: v2},
		{name: "no record of the hash", d: Desired{WrittenAt: map[string]int{"password": 2}, Version: 2}, path: v2},
		{name: "being adopted: no owner marker", d: Desired{WrittenAt: at(2), Version: 2}, path: handMade(2, m{"password": "s", "passwordHashed": "H"})},
		{name: "the version lacks the source", d: Desired{WrittenAt: at(2), Version: 2}, path: ours(2, m{"passwordHashed": "H"})},
		{name: "absent path", d: Desired{WrittenAt: at(2), Version: 2}, path: &vaultkv.Secret{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.d.Owner, tt.d.Analysis = testOwner, a
			written := map[int]*vaultkv.Secret{tt.path.Version: tt.path}
			for v, s := range tt.written {
				written[v] = s
			}
			got := checkedPairs(tt.d, tt.path, templating.Flatten(tt.path.Data), written)
			g := NewWithT(t)
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
