package templating

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hashedPasswords declares n passwords, each with its bcrypt hash.
func hashedPasswords(n int) map[string]any {
	data := map[string]any{}
	for i := range n {
		data[fmt.Sprintf("p%03d", i)] = "<random:16>"
		data[fmt.Sprintf("h%03d", i)] = fmt.Sprintf("<bcrypt:p%03d>", i)
	}
	return data
}

func withKeys(data map[string]any, kv ...string) map[string]any {
	for i := 0; i < len(kv); i += 2 {
		data[kv[i]] = kv[i+1]
	}
	return data
}

func TestCostlyKeys(t *testing.T) {
	tests := []struct {
		name  string
		data  map[string]any
		count int
		want  []Problem
	}{
		{name: "a usual object", data: map[string]any{"pw": "<random:24>", "h": "<bcrypt:pw>", "user": "admin"}, count: 1},
		{name: "the limit", data: hashedPasswords(MaxCostlyKeys), count: MaxCostlyKeys},
		{name: "one hash over the limit", data: hashedPasswords(MaxCostlyKeys + 1), count: MaxCostlyKeys + 1,
			want: []Problem{{Reason: ReasonInvalidSpec, Message: "declares 101 bcrypt hashes and key pairs, more than the 100 one object may: " +
				"bcrypt is slow by design, and each reconcile computes or checks every one of them within its time; split the keys over several objects"}}},
		{name: "key pairs count, through their private key", data: withKeys(hashedPasswords(MaxCostlyKeys-1), "as", "<age:secret>", "ss", "<ssh:private>"),
			count: MaxCostlyKeys + 1,
			want: []Problem{{Reason: ReasonInvalidSpec, Message: "declares 101 bcrypt hashes and key pairs, more than the 100 one object may: " +
				"bcrypt is slow by design, and each reconcile computes or checks every one of them within its time; split the keys over several objects"}}},
		{name: "public keys do not count", data: withKeys(hashedPasswords(MaxCostlyKeys-1), "as", "<age:secret>", "ap1", "<age:public>", "ap2", "<age:public>", "ap3", "<age:public>"),
			count: MaxCostlyKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Analyse(Object{Name: "n", Path: "m/p", Data: tt.data})
			if got := CostlyKeys(a); got != tt.count {
				t.Errorf("CostlyKeys() = %d, want %d", got, tt.count)
			}
			if diff := cmp.Diff(tt.want, a.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
