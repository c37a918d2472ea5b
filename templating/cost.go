package templating

import "fmt"

// MaxCostlyKeys is the most costly keys ([CostlyKeys]) one object may
// declare. bcrypt is slow by design, and one reconcile generates or checks
// every hash of its object, so the bound keeps the worst object admitted
// well within a reconcile's time on one core (docs/maintainers/performance.md, "What
// one object may cost").
const MaxCostlyKeys = 100

// CostlyKeys counts the keys of a whose value costs a core's time each
// time [Generator.Fill] computes it: every <bcrypt:> (a hash, or a compare
// with the stored one) and every private key of a key pair (<age:secret>,
// <ssh:private>: a key generation). Other values cost next to nothing, a
// public key included (derived once per fill from its private key).
func CostlyKeys(a Analysis) int {
	n := 0
	for _, l := range a.Leaves {
		if l.Kind == KindBcrypt || isPrivate(l.Kind) {
			n++
		}
	}
	return n
}

// checkCost refuses an object with more costly keys than MaxCostlyKeys.
func (an *analyser) checkCost() {
	if n := CostlyKeys(an.a); n > MaxCostlyKeys {
		an.problem(ReasonInvalidSpec, "", fmt.Sprintf("declares %d bcrypt hashes and key pairs, more than the %d one object may: "+
			"bcrypt is slow by design, and each reconcile computes or checks every one of them within its time; "+
			"split the keys over several objects", n, MaxCostlyKeys))
	}
}
