package planner

import (
	"context"
	"time"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// Input is one object to plan and what its caller knows of it beyond the
// object: a reconcile and `ohmlab plan` differ only here.
type Input struct {
	seeds.Analysed
	// Managed is status.managedKeys as the caller knows them: a write that
	// status could not record yet included.
	Managed []ohmlabv1alpha1.ManagedKey
	// Unreported: the caller holds a write of this object that status does
	// not record yet; a record of it on the path is reported already.
	Unreported bool
	// Ring is the reference cycle through the object, "" when none: over
	// the cache for a reconcile, over the input set for a preview.
	Ring string
	// AllowDelete is the target's allowDelete.
	AllowDelete bool
	// CheckRecord: check the write record on the path (a reconcile that
	// writes). A write whose writer stopped before reporting it is reported
	// late (Plan.Late) when Now is within ReportWithin of its writer's
	// deadline, and a rotation it made is never made again. Now is also
	// the clock of rotate.every, and the time a rotation records.
	CheckRecord  bool
	Now          time.Time
	ReportWithin time.Duration
}

// KVReader is the part of vaultkv.KV that observing needs: reads only, so
// a preview cannot write.
type KVReader interface {
	Read(ctx context.Context, path string) (*vaultkv.Secret, error)
	ReadVersion(ctx context.Context, path string, version int) (*vaultkv.Secret, error)
}

// Check is the plan of an object that stops before Vault is read: invalid,
// on a reference cycle, or asking for a Delete that is not allowed; nil
// when it goes on. Such a plan reads and writes nothing.
func Check(in Input) *Plan {
	stop := func(reason string, message Message) *Plan {
		return &Plan{Outcome: OutcomeStop, Reason: reason, Message: message}
	}
	if ps := in.Analysis.Problems; len(ps) > 0 {
		return stop(problemsReason(ps), problemsMessage(ps))
	}
	if in.Ring != "" {
		return stop(ohmlabv1alpha1.ReasonRefCycle, Text(in.Ring+"; change or remove a <ref:> of one of these objects to break it; until then nothing is written to these paths"))
	}
	if in.Seed.Spec.DeletionPolicy == ohmlabv1alpha1.DeletionPolicyDelete && !in.AllowDelete {
		return stop(ohmlabv1alpha1.ReasonForbidden, Text(
			"deletionPolicy Delete is not allowed: the controller's chart must set targets.vault.allowDelete: true "+
				"(and vault-operator ohmlab.controller.allowDelete: true, which grants the delete in Vault), or set deletionPolicy: Retain; "+
				"until then nothing is written to the path and the object has no finalizer"))
	}
	return nil
}

// Observe reads the object's path, every path it references (one request
// each), the older versions a prune or a carry compares with
// (versionReads), and the versions that tell whether the write record on
// the path landed (recordReads). On a failed read the path is still
// returned when it was read: a reconcile reports what it shows.
func Observe(ctx context.Context, kv KVReader, in Input) (Observed, error) {
	path := in.Seed.Spec.Path
	own, err := kv.Read(ctx, path)
	if err != nil {
		return Observed{}, err
	}
	o := Observed{Path: own, Refs: make(map[string]*vaultkv.Secret, len(in.Analysis.RefPaths)), Written: map[int]*vaultkv.Secret{own.Version: own}}
	for _, p := range in.Analysis.RefPaths {
		if o.Refs[p], err = kv.Read(ctx, p); err != nil {
			return Observed{Path: own}, err
		}
	}
	for _, v := range versionReads(in.desired(), own) {
		if o.Written[v], err = kv.ReadVersion(ctx, path, v); err != nil {
			return Observed{Path: own}, err
		}
	}
	w, ok := in.recordToCheck(own)
	if !ok {
		return o, nil
	}
	o.Record = &RecordVersions{Written: own}
	if own.Version > w.Version {
		if o.Record.Written, err = kv.ReadVersion(ctx, path, w.Version); err != nil {
			return Observed{Path: own}, err
		}
	}
	if w.Version > 1 {
		if o.Record.Before, err = kv.ReadVersion(ctx, path, w.Version-1); err != nil {
			return Observed{Path: own}, err
		}
	}
	return o, nil
}

// Decide plans the object against what Observe read (product document,
// "What the controller does with a path"). It reads and writes nothing;
// the values it generates come from g, and stop when ctx ends (a
// *templating.StoppedError). Every problem of the object or of the path is
// an outcome of the plan; the error is value generation's.
func Decide(ctx context.Context, in Input, o Observed, g templating.Generator) (Plan, error) {
	if staleCopy(in.Seed, o.Path) {
		return Plan{Outcome: OutcomeNewer, Reason: ohmlabv1alpha1.ReasonProgressing, CAS: o.Path.Version,
			Message: Text("a newer generation of the object has written the path; waiting for it to reach this process")}, nil
	}
	w, late := in.landed(o)
	if w != nil {
		o.LandedToken, o.LandedAt, o.LandedRotatedAt = w.Token, w.Version, w.RotatedAt
	}
	p, err := decide(ctx, in.desired(), o, g)
	p.Late = late
	return p, err
}

// desired is what the object declares, with the managed keys the caller
// knows.
func (in Input) desired() Desired {
	seed := in.Seed
	d := Desired{Owner: seeds.Owner(seed), Analysis: in.Analysis, Prune: seed.Spec.Prune, Version: int(seed.Status.Version),
		Period: in.Analysis.RotationPeriod, Now: in.Now}
	if seed.Spec.Rotate != nil {
		d.RotationToken = seed.Spec.Rotate.Token
	}
	d.WrittenAt = make(map[string]int, len(in.Managed))
	d.CreatedAt = make(map[string]string, len(in.Managed))
	for _, m := range in.Managed {
		d.ManagedKeys = append(d.ManagedKeys, m.Key)
		d.WrittenAt[m.Key] = int(m.Version)
		d.CreatedAt[m.Key] = m.CreatedTime
	}
	return d
}

// declared is the rotation the object declares.
func (in Input) declared() declaredRotation {
	if in.Seed.Spec.Rotate == nil {
		return declaredRotation{}
	}
	return declaredRotation{token: in.Seed.Spec.Rotate.Token, period: in.Analysis.RotationPeriod > 0}
}

// declaredRotation is what a landed rotation is compared with: the
// declared token, and whether a period is declared.
type declaredRotation struct {
	token  string
	period bool
}

// RingThrough returns the message of the reference cycle through the
// object owner ("<namespace>/<name>") among the problems of
// templating.AnalyseSet, or "".
func RingThrough(set []templating.Problem, owner string) string {
	for _, p := range set {
		if p.Reason == templating.ReasonRefCycle && p.Object == owner {
			return p.Message
		}
	}
	return ""
}
