package vaultseed

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// Brake is when the target stops creating anew the paths its objects wrote
// and that are now missing (planner.Plan.Vanished): when more than Share of
// the target's known paths, and at least Min of them, are missing within
// one resync period. One path deleted by a person is created anew at once;
// a Vault restored from an older snapshot, or a mount disabled and enabled
// again, would otherwise replace every generated value of the platform.
type Brake struct {
	// Share of the known paths (0 to 1) that must be exceeded; 0: 0.5.
	Share float64
	// Min is the fewest vanished paths that hold it, so that one path of a
	// small target does not; 0: 5.
	Min int
	// ReleasedAt lets through the vanished paths whose object last wrote
	// them before it (status.managedKeys[].createdTime): a person accepted
	// their loss. A path created anew after it is held again if it
	// vanishes. Zero: none.
	ReleasedAt time.Time
}

// withDefaults is b with the defaults of its zero fields.
func (b Brake) withDefaults() Brake {
	if b.Share == 0 {
		b.Share = 0.5
	}
	if b.Min == 0 {
		b.Min = 5
	}
	return b
}

// holds says whether vanished of known paths exceed the brake's share.
func (b Brake) holds(vanished, known int) bool {
	return vanished >= b.Min && float64(vanished) > b.Share*float64(max(known, vanished))
}

// releases says whether the brake lets a vanished path with these records
// be created anew: every write status records was made before ReleasedAt.
// Records without a time (the first release's) count as before.
func (b Brake) releases(managed []ohmlabv1alpha1.ManagedKey) bool {
	if b.ReleasedAt.IsZero() {
		return false
	}
	for _, m := range managed {
		t, err := time.Parse(time.RFC3339Nano, m.CreatedTime)
		if err == nil && !t.Before(b.ReleasedAt) {
			return false
		}
	}
	return true
}

// vanishedPaths counts the target's vanished known paths over a sliding
// resync period. A reconcile that finds its path vanished adds it; one that
// finds its path present, or creates it anew, takes it out; a sighting older
// than the period is dropped. Counting only what reconciles see would let
// the first vanished paths be created before the brake holds (each object
// comes at its own phase of the period), and a restarted process starts
// with nothing: so a vanished path that is not counted yet surveys every
// known path of the target (survey) before it is written. Safe for
// concurrent use.
type vanishedPaths struct {
	brake   Brake
	period  time.Duration
	now     func() time.Time
	publish func(vanished int, holds bool)

	// surveying serializes surveys: the vanished objects reconciled at once
	// wait for the first one's, which counts them all.
	surveying sync.Mutex

	mu    sync.Mutex
	known int // the known paths at the last survey
	seen  map[types.NamespacedName]time.Time
}

func newVanishedPaths(b Brake, period time.Duration, now func() time.Time, publish func(int, bool)) *vanishedPaths {
	if period <= 0 {
		period = 10 * time.Minute
	}
	if publish == nil {
		publish = func(int, bool) {}
	}
	return &vanishedPaths{brake: b.withDefaults(), period: period, now: now, publish: publish, seen: map[types.NamespacedName]time.Time{}}
}

// surveyDue says whether key's vanished path is not counted yet: no survey
// or sighting within the period saw it missing. Another vanishing may have
// come with it (a process that just started knows of none).
func (v *vanishedPaths) surveyDue(key types.NamespacedName) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	t, ok := v.seen[key]
	return !ok || v.now().Sub(t) >= v.period
}

// surveyedNow records a survey: of the known paths, the keys' vanished. It
// replaces what was counted: the paths restored since are not missing.
func (v *vanishedPaths) surveyedNow(known int, vanished []types.NamespacedName) {
	v.mu.Lock()
	now := v.now()
	v.known = known
	clear(v.seen)
	for _, k := range vanished {
		v.seen[k] = now
	}
	v.mu.Unlock()
	v.holds()
}

// saw records that the object's path vanished.
func (v *vanishedPaths) saw(key types.NamespacedName) {
	v.mu.Lock()
	v.seen[key] = v.now()
	v.mu.Unlock()
}

// back records that the object's path is there (again).
func (v *vanishedPaths) back(key types.NamespacedName) {
	v.mu.Lock()
	_, was := v.seen[key]
	delete(v.seen, key)
	v.mu.Unlock()
	if was {
		v.holds()
	}
}

// holds drops the sightings older than a period, publishes the count and
// says whether the brake holds: the vanished paths and the known ones it
// compared.
func (v *vanishedPaths) holds() (bool, int, int) {
	v.mu.Lock()
	now := v.now()
	for k, t := range v.seen {
		if now.Sub(t) >= v.period {
			delete(v.seen, k)
		}
	}
	n, known := len(v.seen), v.known
	v.mu.Unlock()
	holds := v.brake.holds(n, known)
	v.publish(n, holds)
	return holds, n, known
}

// brakeVanished decides, before any write, whether the plan of a vanished
// path goes on: held is true when it does not, with the outcome to report
// (VaultDataLoss). A Kubernetes error (listing the objects) is returned.
func (r *Reconciler) brakeVanished(ctx context.Context, in planner.Input) (out outcome, held bool, err error) {
	key := client.ObjectKeyFromObject(in.Seed)
	r.vanished.surveying.Lock()
	if r.vanished.surveyDue(key) {
		var list ohmlabv1alpha1.VaultSeedList
		// Read only: the cache's objects themselves, not copies of them.
		if err := r.Client.List(ctx, &list, append(r.shardOnly(), client.UnsafeDisableDeepCopy)...); err != nil {
			r.vanished.surveying.Unlock()
			return outcome{}, true, fmt.Errorf("listing the objects to count the vanished paths: %w", err)
		}
		r.survey(ctx, key, list.Items)
	}
	r.vanished.surveying.Unlock()
	r.vanished.saw(key)
	holds, n, known := r.vanished.holds()
	if !holds {
		return outcome{}, false, nil
	}
	if r.vanished.brake.releases(in.Managed) {
		ctrl.LoggerFrom(ctx).Info("creating a vanished path anew: the brake is released for it", "path", in.Seed.Spec.Path, "releasedAt", r.vanished.brake.ReleasedAt)
		return outcome{}, false, nil
	}
	return outcome{Result: planner.StalledResult(ohmlabv1alpha1.ReasonVaultDataLoss, planner.Text(r.dataLossMessage(in.Seed.Namespace, n, known)))}, true, nil
}

// shardOnly are the list options of this process's objects.
func (r *Reconciler) shardOnly() []client.ListOption {
	if r.Selector == nil {
		return nil
	}
	return []client.ListOption{client.MatchingLabelsSelector{Selector: r.Selector}}
}

// dataLossMessage says why the path is not created anew and what to do. A
// tenant's object is not told the counts: they are of other namespaces'
// paths too.
func (r *Reconciler) dataLossMessage(namespace string, vanished, known int) string {
	b := r.vanished.brake
	counts := fmt.Sprintf("%d of the %d paths this target's objects wrote are missing within one resync period (the brake holds at %d or more and above %s)",
		vanished, known, b.Min, shareString(b.Share))
	if r.tenant(namespace) {
		counts = "so are too many of the paths the controller's objects wrote, within one resync period"
	}
	return "the path is missing from Vault although this object wrote it (its status records the write); " + counts +
		": Vault most likely lost data (restored from an older snapshot, a mount disabled and enabled again). " +
		"Nothing is written to the vanished paths: restore Vault, or accept the loss and set targets.vault.brake.releasedAt to now, after which they are created anew with new values (docs/users/vault-data-loss.md)"
}

// shareString is a share as a percentage.
func shareString(s float64) string {
	return fmt.Sprintf("%g%%", math.Round(s*1000)/10)
}

// survey reads the path of every object of this process that status says
// wrote its path (but key's, which vanished), each with its namespace's
// Vault identity (a tenant's own), and records how many are missing. It
// costs one read per such object, once for each path that vanishes alone,
// once for all that vanish together (within a period); a target whose paths
// stay never surveys. A path that cannot be read (a tenant whose login
// fails) is left out of the count rather than holding every vanished path
// of the target in backoff.
func (r *Reconciler) survey(ctx context.Context, key types.NamespacedName, objects []ohmlabv1alpha1.VaultSeed) {
	known, vanished, unread := 1, []types.NamespacedName{key}, 0
	for i := range objects {
		seed := &objects[i]
		k := client.ObjectKeyFromObject(seed)
		// Not counted: key's own, counted already; one being deleted,
		// whose path may go on purpose; one that never wrote its path;
		// a tenant's out of its scope, whose path is never read.
		if managed, _ := r.store.managed(seed); k == key || !seed.DeletionTimestamp.IsZero() || seed.Status.Version == 0 && len(managed) == 0 || !r.inScope(seed) {
			continue
		}
		kv, err := r.kvFor(seed.Namespace)
		var s *vaultkv.Secret
		if err == nil {
			s, err = kv.Read(ctx, seed.Spec.Path)
		}
		if err != nil {
			unread++
			ctrl.LoggerFrom(ctx).V(1).Info("cannot read a path to count the vanished ones; left out", "path", seed.Spec.Path, "reason", err.Error())
			continue
		}
		known++
		if !s.Exists {
			vanished = append(vanished, k)
		}
	}
	ctrl.LoggerFrom(ctx).Info("a path this target wrote vanished; counted the others", "known", known, "vanished", len(vanished), "unread", unread)
	r.vanished.surveyedNow(known, vanished)
}
