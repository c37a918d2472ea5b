package validate

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// KeyShard: the ohmlab.fr/shard label (docs/users/sharding.md).
const KeyShard = "metadata.labels[" + ohmlabv1alpha1.ShardLabel + "]"

// ShardWarnings are the warnings of seed's shard label: a value that no
// process can take. The process without a shard takes only objects without
// the label, and a shard's name is a DNS label (reconcilers.checkShard
// refuses any other at startup), so an empty value or one that is not a DNS
// label leaves the object reconciled by nobody. The webhook gives them on
// every create and update, also of metadata alone (a move to another shard).
func ShardWarnings(seed *ohmlabv1alpha1.VaultSeed) []Problem {
	shard, ok := seed.Labels[ohmlabv1alpha1.ShardLabel]
	switch {
	case !ok:
		return nil
	case shard == "":
		return []Problem{{Key: KeyShard, Message: "empty: no process reconciles this object (the controller's process without a shard takes only objects without the label); remove the label or name a shard of targets.vault.shards"}}
	}
	if errs := validation.IsDNS1123Label(shard); len(errs) > 0 {
		return []Problem{{Key: KeyShard, Message: fmt.Sprintf("%q is not a shard name (%s): no process can run it, so no process reconciles this object; name a shard of targets.vault.shards",
			shard, strings.Join(errs, "; "))}}
	}
	return nil
}

// UnrunShardWarnings is the warning of seed's shard label when it names a
// shard that is not among running, the shards the controller's chart runs
// (targets.vault.shards): no process reconciles the object. running nil
// means the list is unknown (`ohmlab validate`, a configuration from an
// older chart) and gives no warning rather than a false one. A label that
// ShardWarnings already warns of gets no second warning.
func UnrunShardWarnings(seed *ohmlabv1alpha1.VaultSeed, running []string) []Problem {
	shard, ok := seed.Labels[ohmlabv1alpha1.ShardLabel]
	if running == nil || !ok || len(validation.IsDNS1123Label(shard)) > 0 || slices.Contains(running, shard) {
		return nil
	}
	run := "none (targets.vault.shards is empty)"
	if len(running) > 0 {
		run = strings.Join(running, ", ")
	}
	return []Problem{{Key: KeyShard, Message: fmt.Sprintf("%q is not a shard that runs: no process reconciles this object; the shards that run: %s; name one of them, or remove the label for the process without a shard", shard, run)}}
}
