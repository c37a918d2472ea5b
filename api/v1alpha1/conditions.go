package v1alpha1

// Condition types of a VaultSeed (product document, "Conditions"). They follow
// kstatus: Ready is always present; Reconciling and Stalled are present only
// when True and never both.
const (
	// ConditionReady is True when the path holds what is declared.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the object waits for something and
	// retries with backoff (5 s doubling to 5 min).
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the controller cannot go on as
	// declared. It is checked again at every resync, never with a backoff.
	ConditionStalled = "Stalled"
	// ConditionDrifted is True, in observe-only mode only, when a real run
	// would change something. Its message sums the planned changes.
	ConditionDrifted = "Drifted"
)

// Reasons of the conditions above. The comment of each says on which
// condition and with which status it appears.
const (
	// ReasonReconciled: Ready=True. The path holds what is declared.
	ReasonReconciled = "Reconciled"
	// ReasonRefPending: Ready=False with Reconciling=True. A <ref:> source
	// path or key is missing or empty; nothing is written until it exists.
	ReasonRefPending = "RefPending"
	// ReasonRefCycle: Stalled=True (and Ready=False). Objects reference each
	// other; the message lists the ring of paths.
	ReasonRefCycle = "RefCycle"
	// ReasonInvalidSpec: Stalled=True (and Ready=False). The message names
	// the key and the problem.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonInvalidRotation: Stalled=True (and Ready=False). rotate.keys
	// names a key that does not exist or is not generated.
	ReasonInvalidRotation = "InvalidRotation"
	// ReasonOwnedByAnother: Stalled=True (and Ready=False). The path's owner
	// marker names another object; nothing is written. Only a person can
	// hand the path over, so it is checked again at every resync.
	ReasonOwnedByAnother = "OwnedByAnother"
	// ReasonForbidden: Ready=False with Reconciling=True when Vault refused
	// (login, policy); Stalled=True when a Delete was asked without being
	// allowed. The message carries Vault's reason.
	ReasonForbidden = "Forbidden"
	// ReasonBackendUnavailable: Ready=False with Reconciling=True. Vault
	// does not answer: sealed, restarting or unreachable.
	ReasonBackendUnavailable = "BackendUnavailable"
	// ReasonPathDeleted: Stalled=True (and Ready=False). The latest version
	// of the path was deleted (vault kv delete) or destroyed. The controller
	// does not seed it anew on its own: that would regenerate every key and
	// drop hand-filled values while the old version can still be undeleted.
	// Undelete the version, or delete the path's metadata to have it created
	// anew.
	ReasonPathDeleted = "PathDeleted"
	// ReasonBackendError: Ready=False with Reconciling=True. Vault answered
	// with an error that is neither a refusal nor an outage, for example a
	// mount that does not exist; the message carries Vault's reason.
	ReasonBackendError = "BackendError"
	// ReasonObserveOnly: Ready=False with Drifted=True. Observe-only mode
	// would change the path.
	ReasonObserveOnly = "ObserveOnly"
	// ReasonProgressing: Ready=False with Reconciling=True. The path changed
	// during each check-and-set attempt of a reconcile (someone else writes
	// it in a loop); retried with backoff.
	ReasonProgressing = "Progressing"
	// ReasonInSync: Drifted=False in observe-only mode when a real run would
	// change nothing.
	ReasonInSync = "InSync"
	// ReasonShardChanged: Ready=Unknown with Reconciling=True. The label
	// ohmlab.fr/shard moved the object to another process, which has not
	// reconciled it yet (or, for a shard no process runs, never will); the
	// process it left wrote this once and no longer keeps the status up to
	// date. The message names the shard.
	ReasonShardChanged = "ShardChanged"
	// ReasonGenerationTimeout: Stalled=True (and Ready=False). Computing the
	// object's values (its bcrypt hashes and key pairs) did not finish in
	// the time a reconcile leaves to it; nothing is written. The message
	// gives the count. Checked again at the next resync, not retried with
	// backoff: each attempt would cost as much again.
	ReasonGenerationTimeout = "GenerationTimeout"
	// ReasonOutOfScope: Stalled=True (and Ready=False). An object of a
	// tenant namespace reaches outside its namespace's scope (spec.path or
	// a <ref:> outside its prefix and the shared sources, deletionPolicy
	// Delete or the adoption of an unmarked path that the chart does not
	// allow tenants). Nothing is written for it, and nothing outside its
	// scope is read: only adoption is found by reading its own path. The
	// message names the key and what is allowed, never whether a path
	// outside the scope exists or who owns it.
	ReasonOutOfScope = "OutOfScope"
	// ReasonVaultDataLoss: Stalled=True (and Ready=False). The path is
	// missing although this object wrote it, and so are more than the
	// configured share of the target's paths that their objects wrote
	// (targets.vault.brake): Vault most likely lost data (restored from an
	// older snapshot, a mount disabled and enabled again). The controller
	// does not create them anew, which would replace every generated value
	// at once, until Vault is restored or a person releases the brake
	// (targets.vault.brake.releasedAt). The message gives the counts.
	ReasonVaultDataLoss = "VaultDataLoss"
)

// Reasons of the Normal events of a VaultSeed (product document, "Events"). A
// Warning event takes the reason of the Ready condition it announces.
const (
	// EventReasonCreated: a write created the path.
	EventReasonCreated = "Created"
	// EventReasonRotated: a write rotated keys for a new rotate.token or
	// at the end of rotate.every's period (its note names the keys), or
	// recorded the token or time of a rotation that had landed.
	EventReasonRotated = "Rotated"
	// EventReasonAdopted: the owner marker was written on a path made by
	// hand; its data were left alone.
	EventReasonAdopted = "Adopted"
	// EventReasonUpdated: a write created, updated or pruned keys.
	EventReasonUpdated = "Updated"
	// EventReasonKept: a prune left keys on the path (changed by someone
	// else, or the controller cannot tell); the note says why, per key.
	EventReasonKept = "Kept"
	// EventReasonDeleted: the path and all its versions were deleted with
	// the object (deletionPolicy Delete).
	EventReasonDeleted = "Deleted"
)

// Finalizer is added to objects with deletionPolicy Delete, when the target
// allows deletion, so that the path is removed before the object goes.
const Finalizer = "ohmlab.fr/delete-path"

// ShardLabel assigns an object to a shard (docs/users/sharding.md): a process given the shard NAME reconciles only the objects
// labelled ohmlab.fr/shard=NAME, the process without a shard only the
// objects without the label.
const ShardLabel = "ohmlab.fr/shard"

// ReconcileRequestAnnotation asks for a reconcile now: any new value
// reconciles the object at once, reading every reference source from Vault
// rather than from what the process remembers of it, and the value is then
// recorded in status.lastHandledReconcileAt (Flux's convention,
// reconcile.fluxcd.io/requestedAt). For after a change made outside
// Kubernetes: a version undeleted, a source filled by hand.
const ReconcileRequestAnnotation = "ohmlab.fr/reconcile-requested-at"

// Custom metadata keys the controller keeps on a KV v2 path.
const (
	// OwnerMetadataKey holds "<namespace>/<name>" of the owning VaultSeed.
	OwnerMetadataKey = "ohmlab.fr/owner"
	// RotationTokenMetadataKey holds the last rotate.token applied.
	RotationTokenMetadataKey = "ohmlab.fr/rotation-token"
	// RotatedAtMetadataKey holds when the rotation keys were last
	// regenerated (RFC 3339, UTC): by rotate.token or rotate.every, or,
	// with rotate.every, when the path was created or adopted or the
	// period first declared on it. rotate.every counts from it.
	RotatedAtMetadataKey = "ohmlab.fr/rotated-at"
	// WriteMetadataKey holds the record of the controller's last data write
	// on the path, merged before that write: the KV version it creates, its
	// rotation token and its actions with their key names, never a value
	// (docs/DESIGN.md, "Provenance"). A record longer than one custom_metadata value
	// continues under WriteMetadataKey + "-2", "-3"...
	WriteMetadataKey = "ohmlab.fr/write"
)

// CRDRevisionAnnotation on the CRD carries the source revision it was built
// from; the controller compares it with its own build revision.
const CRDRevisionAnnotation = "ohmlab.fr/revision"
