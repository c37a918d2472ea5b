package reconcilers

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// Sharding (docs/users/sharding.md), as Flux shards its
// controllers: a target's section may name a shard; its process then
// reconciles only the objects labelled ohmlab.fr/shard=<shard> and holds the
// Lease ohmlab-controller-<target>-<shard>, while the process without a shard
// reconciles the objects without the label and keeps the Lease
// ohmlab-controller-<target> of an unsharded install.

// checkShard checks a shard name. It is the value of the label
// ohmlab.fr/shard, part of the Lease name and of the chart's Deployment name,
// so it must be a DNS-1123 label (every one is also a valid label value).
// The error names no key: the config's key or the flag is the caller's.
func checkShard(target, shard string) error {
	if shard == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(shard); len(errs) > 0 {
		return fmt.Errorf("%q is not a valid shard name (the value of the label %s and part of the Lease name %s): %s",
			shard, ohmlabv1alpha1.ShardLabel, LeaseName(target, shard), strings.Join(errs, "; "))
	}
	return nil
}

// LeaseName is the Lease of a target's shard: ohmlab-controller-<target>,
// then -<shard> for a shard.
func LeaseName(target, shard string) string {
	if shard == "" {
		return "ohmlab-controller-" + target
	}
	return "ohmlab-controller-" + target + "-" + shard
}

// ShardSelector selects the objects a process of shard reconciles: those
// labelled ohmlab.fr/shard=<shard>, or for no shard those without the
// label.
func ShardSelector(shard string) (labels.Selector, error) {
	op, values := selection.Equals, []string{shard}
	if shard == "" {
		op, values = selection.DoesNotExist, nil
	}
	req, err := labels.NewRequirement(ohmlabv1alpha1.ShardLabel, op, values)
	if err != nil {
		return nil, fmt.Errorf("the selector of shard %q: %w", shard, err)
	}
	return labels.NewSelector().Add(*req), nil
}
