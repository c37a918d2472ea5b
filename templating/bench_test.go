package templating

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func BenchmarkGenerate(b *testing.B) {
	for _, tt := range []struct {
		name string
		leaf Leaf
	}{
		{"random-24", Leaf{Kind: KindRandom, Length: 24}},
		{"random-4096", Leaf{Kind: KindRandom, Length: 4096}},
		{"hex-64", Leaf{Kind: KindHex, Length: 64}},
		{"uuid", Leaf{Kind: KindUUID}},
		{"age-secret", Leaf{Kind: KindAgeSecret}},
		{"ssh-private", Leaf{Kind: KindSSHPrivate}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			g := Generator{} // crypto/rand, as in production
			for b.Loop() {
				if _, err := g.Generate(tt.leaf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPublicKey: what deriving a public key costs at each resync
// that checks a pair.
func BenchmarkPublicKey(b *testing.B) {
	for _, fx := range pairFixtures(b) {
		b.Run(fx.p.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := fx.p.derive(fx.private); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBcrypt(b *testing.B) {
	for _, cost := range []int{bcrypt.MinCost, bcrypt.DefaultCost} {
		b.Run(fmt.Sprintf("cost-%d", cost), func(b *testing.B) {
			g := Generator{BcryptCost: cost}
			for b.Loop() {
				if _, err := g.Bcrypt("correct horse battery staple"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMatchesBcrypt(b *testing.B) {
	h, err := Generator{}.Bcrypt("correct horse battery staple")
	if err != nil {
		b.Fatal(err)
	}
	l := Leaf{Kind: KindBcrypt}
	b.Run("uncached", func(b *testing.B) {
		g := Generator{}
		for b.Loop() {
			g.Matches(Slot{}, l, h, "correct horse battery staple")
		}
	})
	b.Run("cached", func(b *testing.B) {
		g := Generator{Cache: NewHashCache(constReader(1))}
		at := Slot{Object: "ns/o", Key: "h"}
		for b.Loop() {
			g.Matches(at, l, h, "correct horse battery staple")
		}
	})
}

func BenchmarkParseLeaf(b *testing.B) {
	for b.Loop() {
		ParseLeaf("<ref:ohmlab/platforms/production/core/keycloak#admin.password>")
	}
}

func BenchmarkAnalyse(b *testing.B) {
	o := keycloak()
	for b.Loop() {
		Analyse(o)
	}
}

func BenchmarkFill(b *testing.B) {
	a := Analyse(keycloak())
	g := Generator{Rand: chacha(1), BcryptCost: bcrypt.MinCost}
	for b.Loop() {
		if _, err := g.Fill(b.Context(), a, FillInput{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFillCostliest fills, on one goroutine, the most costly object
// MaxCostlyKeys admits: its hashes and both key pairs, at the controller's
// bcrypt cost (the default), as the first reconcile of a new path does (a
// resync after a restart compares as many hashes, at the same cost).
func BenchmarkFillCostliest(b *testing.B) {
	data := hashedPasswords(MaxCostlyKeys - 2)
	data["age"] = map[string]any{"secret": "<age:secret>", "public": "<age:public>"}
	data["ssh"] = map[string]any{"private": "<ssh:private>", "public": "<ssh:public>"}
	a := Analyse(Object{Name: "n", Path: "m/p", Data: data})
	if len(a.Problems) > 0 || CostlyKeys(a) != MaxCostlyKeys {
		b.Fatalf("%d costly keys, problems %v", CostlyKeys(a), a.Problems)
	}
	g := Generator{}
	for b.Loop() {
		if _, err := g.Fill(b.Context(), a, FillInput{}); err != nil {
			b.Fatal(err)
		}
	}
}

// thousandObjects returns 1,000 objects of 12 leaves each: 3 references to
// earlier objects' paths, one to a path nobody declares, one to the own
// path, a bcrypt and an age pair; objects 0-19 form ten 2-path rings.
func thousandObjects() []Object {
	r := rand.New(rand.NewPCG(1, 2))
	objs := make([]Object, 1000)
	path := func(i int) string { return fmt.Sprintf("ohmlab/platforms/p/tier%d/app%d", i%7, i) }
	for i := range objs {
		data := map[string]any{
			"admin":  map[string]any{"username": "admin", "password": "<random:24>", "hash": "<bcrypt:admin.password>"},
			"key":    map[string]any{"secret": "<age:secret>", "public": "<age:public>"},
			"id":     "<uuid>",
			"token":  "<hex:64>",
			"self":   "<ref:" + path(i) + "#id>",
			"manual": "<ref:ohmlab/platforms/p/hand-made#k>",
		}
		for j := range 3 {
			target := r.IntN(i + 1)
			if i < 20 {
				target = i ^ 1
			}
			data[fmt.Sprintf("ref%d", j)] = "<ref:" + path(target) + "#admin.password>"
		}
		objs[i] = Object{Namespace: "vault-operator-system", Name: fmt.Sprintf("app-%d", i), Path: path(i), Data: data}
	}
	return objs
}

func BenchmarkAnalyseSet1000(b *testing.B) {
	objs := thousandObjects()
	if n := len(AnalyseSet(objs)); n != 20 {
		b.Fatalf("%d problems, want the 20 of the ten rings", n)
	}
	for b.Loop() {
		AnalyseSet(objs)
	}
}
