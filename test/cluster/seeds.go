package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// SeedReady is a Condition: the VaultSeed's Ready condition is True for
// its current generation. What it sees otherwise are its conditions.
func SeedReady(c *Cluster, namespace, name string) Condition {
	return func(ctx context.Context) (bool, string, error) {
		seed := &ohmlabv1alpha1.VaultSeed{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, seed); err != nil {
			return false, err.Error(), nil
		}
		ready := apimeta.FindStatusCondition(seed.Status.Conditions, "Ready")
		done := ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == seed.Generation
		return done, describeConditions(seed), nil
	}
}

func describeConditions(seed *ohmlabv1alpha1.VaultSeed) string {
	var b strings.Builder
	fmt.Fprintf(&b, "generation %d, observedGeneration %d", seed.Generation, seed.Status.ObservedGeneration)
	for _, c := range seed.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s (%s, generation %d): %s", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message)
	}
	return b.String()
}

// ReadPath reads a KV v2 path (<mount>/<path>) as root and returns its
// data flattened to dotted keys (absent: nil, no error).
func (v *Vault) ReadPath(ctx context.Context, path string) (map[string]any, error) {
	mount, rest, _ := strings.Cut(path, "/")
	s, err := v.Client.KVv2(mount).Get(ctx, rest)
	if err != nil {
		if errors.Is(err, vaultapi.ErrSecretNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return templating.Flatten(s.Data), nil
}

// Keys are the sorted keys of a flattened path.
func Keys(flat map[string]any) []string {
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
