package planner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// PreviewOptions are the parts of the target's configuration that change a
// plan.
type PreviewOptions struct {
	// AllowDelete is the target's allowDelete: without it an object asking
	// for deletionPolicy Delete is Stalled (Forbidden).
	AllowDelete bool
	// Now is the clock of rotate.every; zero: the time of the call.
	Now time.Time
}

// Preview is what the controller would do to one object's path (`ohmlab
// plan`). It holds key names and reasons, never a value.
type Preview struct {
	Namespace, Name, Path string
	// Drifted is the Drifted condition a reconcile in observe-only mode
	// would set: True with the plan's summary as message (for an object
	// that waits or stalls on some keys, followed by why: heldSummary),
	// False when a real run changes nothing, Unknown when the object waits
	// or stalls and would write nothing, with the reason (RefPending,
	// OwnedByAnother, PathDeleted, InvalidSpec, InvalidRotation, RefCycle,
	// Forbidden) and its message.
	Drifted metav1.Condition
	// Stalled and Waits say that a real run would stall (checked again at
	// each resync) or wait (retried with backoff), whether or not it still
	// writes some keys; Reason and Message then say why (its Ready
	// condition's).
	Stalled, Waits  bool
	Reason, Message string
	// Unreadable says that Vault refused or failed a read of the path or
	// of a source (a policy that does not cover it, a mount that does not
	// exist): nothing is planned, and Drifted is Unknown with the reason a
	// reconcile reports (Forbidden, BackendError) and Vault's error.
	Unreadable bool
	// Actions are the planned changes: when Drifted is True, including
	// for an object that waits or stalls on some keys while a real run
	// would still write the others (a stall on one key does not freeze the
	// path).
	Actions []Action
	// Writes sums Actions ("" when a real run would write nothing).
	Writes string
	// After names the objects of the input ("<namespace>/<name>") whose
	// planned data writes this plan read: its references were resolved
	// against what those objects would write first.
	After []string
}

// Changes says whether a real run would change the path.
func (p Preview) Changes() bool { return p.Drifted.Status == metav1.ConditionTrue }

// PreviewSeeds plans every object as the controller's observe-only mode
// does, with the same code (Check, Observe, Decide, ObserveOnlyResult), reading kv
// and writing nothing: kv has no write method. The planner is dry: no
// bcrypt or age work is spent on values that are never written.
//
// References between the objects are planned in dependency order: a source
// is planned before the objects that copy it, and they read what its plan
// would write (an in-memory overlay of the paths), as the controller
// converges once the source is written (a write notifies its dependents).
// An observe-only reconcile, which writes nothing, reports such a dependent
// RefPending instead; Preview.After names the sources it was planned after.
// status.managedKeys of the objects given (for example from kubectl get -o
// yaml) are those a prune compares with.
//
// The previews are in the order of objs. A read that Vault refused or
// failed for one path makes that object's preview Unreadable, and the
// others are planned. The error is a read of a Vault that does not answer
// (vaultkv.ErrUnavailable: refused connection, sealed, timeout), where no
// other read would succeed, or value generation's; wrapped with the object
// and path, Vault's reason included, it comes with the previews of the
// objects planned before it.
func PreviewSeeds(ctx context.Context, kv KVReader, analysed []seeds.Analysed, opts PreviewOptions) ([]Preview, error) {
	all := make([]templating.Object, len(analysed))
	for i, a := range analysed {
		all[i] = a.Object
	}
	set := templating.AnalyseSet(all)
	ov := &overlay{kv: kv, planned: map[string]*vaultkv.Secret{}, writer: map[string]string{}}
	gen := templating.Generator{Dry: true}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	out := make([]Preview, len(analysed))
	var planned []int
	for _, i := range dependencyOrder(analysed) {
		a := analysed[i]
		in := Input{Analysed: a, Managed: a.Seed.Status.ManagedKeys, Ring: RingThrough(set, seeds.Owner(a.Seed)), AllowDelete: opts.AllowDelete, Now: opts.Now}
		pv, err := previewOne(ctx, ov, gen, in)
		if err != nil {
			return collect(out, planned), fmt.Errorf("%s %s: %w", seeds.Owner(a.Seed), a.Seed.Spec.Path, err)
		}
		out[i] = pv
		planned = append(planned, i)
	}
	return out, nil
}

// previewOne is one observe-only reconcile (Check, Observe, Decide),
// against the overlay and with the object's own status.managedKeys, and
// records what a real run would write. A read that Vault refused or failed
// makes the preview Unreadable; the error is one of a Vault that does not
// answer, or value generation's.
func previewOne(ctx context.Context, ov *overlay, gen templating.Generator, in Input) (Preview, error) {
	seed := in.Seed
	if stop := Check(in); stop != nil {
		res, _, _ := stop.ObserveOnlyResult(0)
		return previewOf(seed, res, nil, nil), nil
	}
	o, err := Observe(ctx, ov, in)
	switch {
	case err != nil && errors.Is(err, vaultkv.ErrUnavailable):
		return Preview{}, err
	case err != nil:
		pv := previewOf(seed, BackendResult(err), nil, nil)
		pv.Unreadable = true
		return pv, nil
	}
	p, err := Decide(ctx, in, o, gen)
	if err != nil {
		return Preview{}, err
	}
	if p.Outcome == OutcomeNewer {
		res, _ := p.Result(0)
		return previewOf(seed, res, nil, nil), nil
	}
	owner := seeds.Owner(seed)
	ov.record(seed.Spec.Path, o.Path, p, owner)
	var after []string
	for ref := range o.Refs {
		if w := ov.writer[ref]; w != "" && w != owner {
			after = append(after, w)
		}
	}
	slices.Sort(after)
	res, _, shown := p.ObserveOnlyResult(o.Path.Version)
	if !shown {
		return previewOf(seed, res, nil, slices.Compact(after)), nil
	}
	return previewOf(seed, res, &p, slices.Compact(after)), nil
}

// previewOf turns a result into what the Drifted condition would say,
// through the same code that writes status.
func previewOf(seed *ohmlabv1alpha1.VaultSeed, res Result, p *Plan, after []string) Preview {
	var st ohmlabv1alpha1.VaultSeedStatus
	res.Apply(&st, seed.Generation, true)
	pv := Preview{Namespace: seed.Namespace, Name: seed.Name, Path: seed.Spec.Path, Stalled: res.Stalled, Waits: res.Reconciling, After: after}
	if res.Stalled || res.Reconciling {
		pv.Reason, pv.Message = res.Reason, res.Message.Capped(MaxConditionMessage)
	}
	if c := meta.FindStatusCondition(st.Conditions, ohmlabv1alpha1.ConditionDrifted); c != nil {
		pv.Drifted = *c
	}
	if p != nil && !p.Empty() {
		pv.Actions, pv.Writes = p.Actions, p.Summary()
	}
	return pv
}

func collect(out []Preview, planned []int) []Preview {
	slices.Sort(planned)
	done := make([]Preview, 0, len(planned))
	for _, i := range planned {
		done = append(done, out[i])
	}
	return done
}

// dependencyOrder returns the indexes of objs with every reference source
// of the input before the objects that reference it, ties in input order.
// Objects on a ring (RefCycle, stalled anyway) come last, in input order.
func dependencyOrder(objs []seeds.Analysed) []int {
	byPath := map[string][]int{}
	for i, o := range objs {
		byPath[o.Seed.Spec.Path] = append(byPath[o.Seed.Spec.Path], i)
	}
	waitsFor := make([]int, len(objs)) // sources not planned yet
	dependents := make([][]int, len(objs))
	for i, o := range objs {
		for _, ref := range o.Analysis.RefPaths {
			for _, j := range byPath[ref] {
				if j != i {
					waitsFor[i]++
					dependents[j] = append(dependents[j], i)
				}
			}
		}
	}
	done := make([]bool, len(objs))
	var order []int
	for progress := true; progress; {
		progress = false
		for i := range objs {
			if done[i] || waitsFor[i] > 0 {
				continue
			}
			done[i], progress = true, true
			order = append(order, i)
			for _, d := range dependents[i] {
				waitsFor[d]--
			}
			break // restart from the first object, so ties keep input order
		}
	}
	for i := range objs {
		if !done[i] {
			order = append(order, i)
		}
	}
	return order
}

// overlay reads Vault through the writes that the objects planned so far
// would make. It has no write method.
type overlay struct {
	kv      KVReader
	planned map[string]*vaultkv.Secret
	// writer is the owner of the plan that writes each path's data: the
	// references that read it are planned after it.
	writer map[string]string
}

func (o *overlay) Read(ctx context.Context, path string) (*vaultkv.Secret, error) {
	if s, ok := o.planned[path]; ok {
		c := *s
		return &c, nil
	}
	return o.kv.Read(ctx, path)
}

// ReadVersion reads Vault: the versions a prune compares with were written
// before this plan.
func (o *overlay) ReadVersion(ctx context.Context, path string, version int) (*vaultkv.Secret, error) {
	return o.kv.ReadVersion(ctx, path, version)
}

// record keeps what apply would write for the plan: metadata (owner marker,
// rotation token) and the data tree as a new version.
func (o *overlay) record(path string, seen *vaultkv.Secret, p Plan, owner string) {
	rotation := p.RotationRecord()
	if p.Mark == nil && p.Data == nil && rotation == nil {
		return
	}
	s := *seen
	s.CustomMetadata = maps.Clone(seen.CustomMetadata)
	if s.CustomMetadata == nil {
		s.CustomMetadata = map[string]string{}
	}
	maps.Copy(s.CustomMetadata, p.Mark)
	maps.Copy(s.CustomMetadata, rotation)
	if p.Data != nil {
		s.Exists, s.Deleted, s.Data, s.Version = true, false, p.Data, p.CAS+1
		o.writer[path] = owner
	}
	o.planned[path] = &s
}
