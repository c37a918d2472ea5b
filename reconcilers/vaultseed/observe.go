package vaultseed

import (
	"context"
	"time"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// planInput is what observing and planning one object takes besides the
// object. A reconcile (Reconciler.sync) and `ohmlab plan` (previewOne) run
// the same observePlan and differ only here (issue 23, item 5).
type planInput struct {
	// kv reads the path, its reference sources and the versions a prune
	// compares with.
	kv KVReader
	// ring returns the reference cycle through the object ("" when none):
	// over the cache for a reconcile, over the input set for a preview.
	ring func(obj templating.Object) (string, error)
	// managed returns status.managedKeys as the caller knows them.
	managed func() []ohmlabv1alpha1.ManagedKey
	// landed, when set, is given the path as read, before planning, and
	// returns the recorded write it reported or whose rotation token is left
	// to record, nil when none (Reconciler.landed).
	landed func(path *vaultkv.Secret) (*intent, error)
	// expect, when set, is told the sources the reconcile is about to read
	// and returns a function to call once it is over (sourcedReader.expect).
	expect func(paths []string) (done func())
	// allowDelete is the target's allowDelete.
	allowDelete bool
	gen         templating.Generator
	// fillBy, when set, is when value generation stops (a
	// *templating.StoppedError), earlier than ctx's end so that the writes
	// that follow still have time.
	fillBy time.Time
}

// planned is one object observed and planned.
type planned struct {
	// stop is the result of an object that stops before Vault is read
	// (invalid, on a reference cycle, or asking for a Delete that is not
	// allowed); nil when the path was read and planned.
	stop     *result
	observed Observed
	plan     Plan
}

// readError is Vault's answer to a read of observePlan: a reconcile
// reports it (backendOutcome), and so does a preview (the object is
// unreadable), which stops on it only when Vault does not answer.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// observePlan checks the object, reads its path and its sources through
// in.kv, and plans (DESIGN.md, "Data flow of one reconcile"). A failed read
// is a readError; any other error is the cycle check's or value
// generation's (*templating.StoppedError when it did not end by in.fillBy).
func observePlan(ctx context.Context, seed *ohmlabv1alpha1.VaultSeed, in planInput) (planned, error) {
	stop := func(res result) (planned, error) { return planned{stop: &res}, nil }
	obj, analysis := seeds.Analyse(seed)
	if len(analysis.Problems) > 0 {
		return stop(stalledResult(problemsReason(analysis.Problems), problemsMessage(analysis.Problems)))
	}
	ring, err := in.ring(obj)
	if err != nil {
		return planned{}, err
	}
	if ring != "" {
		return stop(stalledResult(ohmlabv1alpha1.ReasonRefCycle, textMessage(ring+"; change or remove a <ref:> of one of these objects to break it; until then nothing is written to these paths")))
	}
	if res, refused := deleteRefused(seed, in.allowDelete); refused {
		return stop(res)
	}
	desired := desiredOf(seed, analysis, in.managed())
	if in.expect != nil {
		defer in.expect(analysis.RefPaths)()
	}
	observed, err := observeVault(ctx, in.kv, seed.Spec.Path, analysis.RefPaths, desired)
	if err != nil {
		return planned{observed: observed}, readError{err}
	}
	if staleCopy(seed, observed.Path) {
		return stop(waitingResult(ohmlabv1alpha1.ReasonProgressing, textMessage("a newer generation of the object has written the path; waiting for it to reach this process")))
	}
	if in.landed != nil {
		w, err := in.landed(observed.Path)
		if err != nil {
			return planned{observed: observed}, readError{err}
		}
		if w != nil {
			observed.LandedToken, observed.LandedAt = w.Token, w.Version
		}
	}
	fillCtx := ctx
	if !in.fillBy.IsZero() {
		var cancel context.CancelFunc
		fillCtx, cancel = context.WithDeadline(ctx, in.fillBy)
		defer cancel()
	}
	p, err := plan(fillCtx, desired, observed, in.gen)
	if err != nil {
		return planned{}, err
	}
	return planned{observed: observed, plan: p}, nil
}
