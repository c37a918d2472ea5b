package vaultseed

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// apply writes a plan: metadata (owner marker, and the record of the data
// write, planner.Record) first, then the data with check-and-set, then the
// rotation's record (token, time), so that a rotation is recorded only once
// its keys are written. It returns whether the plan's writes are to be reported (all
// done, or the data write landed before a later step failed), and the
// path's KV version as it leaves it: the version written, or the version
// read when nothing was.
func (r *Reconciler) apply(ctx context.Context, kv vaultkv.KV, seed *ohmlabv1alpha1.VaultSeed, p planner.Plan, read *vaultkv.Secret) (bool, vaultkv.Written, error) {
	path := seed.Spec.Path
	unchanged := vaultkv.Written{Version: p.CAS, Created: p.Base}
	mark := p.Mark
	var record planner.Record
	if p.Data != nil {
		deadline, _ := ctx.Deadline()
		record = planner.NewRecord(p, seed, deadline)
		mark = p.MarkWith(record)
	}
	if err := markPath(ctx, kv, path, mark, p.Creates() && read.NoMetadata); err != nil {
		return false, unchanged, err
	}
	written := unchanged
	if p.Data != nil {
		w, err := kv.Write(ctx, path, p.Data, p.CAS)
		if err != nil {
			void(ctx, kv, path, record, err)
			return false, unchanged, err
		}
		written = w
		// What a tenant wrote is not remembered for others: they read it
		// from Vault, with their own identity.
		if !r.tenant(seed.Namespace) && r.referenced(ctx, path) {
			r.sources.wrote(path, w.Version, p.Data)
		} else {
			r.sources.forget(path)
		}
		r.notifyDependents(ctx, path)
	}
	if !p.Empty() {
		ctrl.LoggerFrom(ctx).Info("wrote the path", "path", path, "changes", p.Summary(), "version", written.Version)
	}
	if md := p.RotationRecord(); md != nil {
		if err := kv.Mark(ctx, path, md); err != nil {
			return p.Data != nil, written, fmt.Errorf("recording the rotation (token %q, time %s) after rotating: %w", p.RecordToken, p.RecordRotatedAt, err)
		}
	}
	return true, written, nil
}

// markPath merges md into the path's custom_metadata through kv, nothing when
// md is nil.
// On a path without metadata at all (fresh: a plan that creates it, read
// with no metadata) the marker creates them in one request: a new path
// costs one read and two writes. Anywhere else it is merged, keeping what
// others put there.
func markPath(ctx context.Context, kv vaultkv.KV, path string, md map[string]string, fresh bool) error {
	switch {
	case md == nil:
		return nil
	case fresh:
		return kv.MarkNew(ctx, path, md)
	}
	return kv.Mark(ctx, path, md)
}

// void marks the record of a write that Vault refused, so that no later
// version (a person's, made while the controller waits) is taken for it. A
// write that may have been served (no answer, a conflict another writer
// may have caused) keeps its record: it is checked when the path is read.
func void(ctx context.Context, kv vaultkv.KV, path string, w planner.Record, err error) {
	if !errors.Is(err, vaultkv.ErrForbidden) && !errors.Is(err, vaultkv.ErrInvalid) {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	s, err := kv.Read(ctx, path)
	if err != nil {
		log.Info("cannot void the record of a refused write; it expires at its deadline", "path", path, "reason", err.Error())
		return
	}
	if cur, ok := planner.RecordOn(s.CustomMetadata); !ok || !w.Voids(cur) {
		return
	}
	if err := kv.Mark(ctx, path, w.VoidMetadata()); err != nil {
		log.Info("cannot void the record of a refused write; it expires at its deadline", "path", path, "reason", err.Error())
	}
}
