package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/json"
)

// DeletionPolicy says what happens to the Vault path when its VaultSeed is
// deleted (product document, "Deletion").
// +kubebuilder:validation:Enum=Retain;Delete
type DeletionPolicy string

const (
	// DeletionPolicyRetain leaves the path in Vault. No finalizer is added.
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDelete removes the path and all its versions, provided it
	// carries this object's owner marker and the target allows deletion.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// VaultSeedSpec declares one KV v2 path and the tree it must hold.
type VaultSeedSpec struct {
	// The rule and its message are templating.ValidPath's and
	// templating.PathMessage, which the webhook and `ohmlab validate` use
	// (webhooks.TestPathSpellings checks that they agree). maxLength only
	// bounds the rule's cost, which the API server must be able to bound;
	// the rule refuses paths over 512 bytes itself, so that they get the
	// message of every other bad path.

	// Path is <mount>/<path> of the KV v2 secret, for example
	// ohmlab/platforms/production/core/keycloak: two or more segments of
	// letters, digits, '.', '_' and '-', separated by '/' (no segment '.' or
	// '..', at most 512 characters), so that one spelling names one Vault
	// path. Immutable: delete the object and create another.
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.size() <= 512 && self.matches('^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)+$') && self.split('/').all(s, s != '.' && s != '..')",message="must be <mount>/<path>: two or more segments of letters, digits, '.', '_' and '-', separated by '/' (no segment '.' or '..', at most 512 characters)"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.path is immutable: delete the object and create another"
	Path string `json:"path"`

	// Data is the tree the path must hold. Nodes are maps; leaves are
	// strings (plain values or templates such as "<random:24>"), numbers or
	// booleans. A key name must not contain a dot.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Data *apiextensionsv1.JSON `json:"data,omitempty"`

	// Rotate regenerates generated keys once per distinct token, once per
	// period, or both.
	// +optional
	Rotate *Rotation `json:"rotate,omitempty"`

	// Prune removes the keys this controller wrote (status.managedKeys) that
	// data no longer declares.
	// +kubebuilder:default=false
	// +optional
	Prune bool `json:"prune,omitempty"`

	// DeletionPolicy is Retain (default) or Delete.
	// +kubebuilder:default=Retain
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// Rotation asks for the regeneration of generated keys, once per token,
// once per period, or both: a new token rotates at once and starts the
// period again.
// +kubebuilder:validation:XValidation:rule="has(self.token) || has(self.every)",message="needs a token, a period (every), or both"
type Rotation struct {
	// The rules and their messages are templating.TokenProblem's, which the
	// webhook and `ohmlab validate` use (webhooks.TestTokenSpellings checks
	// that they agree): the token is recorded as a custom_metadata value of
	// the path, and Vault refuses a value with a character that is not
	// printable (unicode.IsPrint) or over 512 bytes. They came after the
	// first releases: an object stored with such a token never reconciled,
	// and ratcheting keeps its other writes working (docs/users/upgrading.md).

	// Token is compared with the token recorded on the path; when they
	// differ the keys are regenerated once and the token is recorded.
	// Printable characters only (no tab or newline), at most 256 characters
	// and 512 bytes. Optional when every is set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches(r'^[\\p{L}\\p{M}\\p{N}\\p{P}\\p{S} ]*$')",message="must be printable: letters, marks, digits, punctuation, symbols and the ASCII space only, no tab, newline, other space or invisible character (Vault refuses them in custom_metadata, where the token is recorded)"
	// +kubebuilder:validation:XValidation:rule="bytes(self).size() <= 512",message="must be at most 512 bytes of UTF-8 (Vault refuses a longer custom_metadata value, where the token is recorded)"
	// +optional
	Token string `json:"token,omitempty"`

	// The rule and its message are templating.ParsePeriod's and
	// templating.PeriodMessage, which the webhook and `ohmlab validate` use.

	// Every is the rotation period: a whole number of days (d, 24 hours)
	// or hours (h), from 1h, for example 90d or 36h. The keys are
	// regenerated at the first resync once the period has passed since the
	// time recorded on the path (ohmlab.fr/rotated-at: the last rotation,
	// or when the path was created or adopted, or when the period was
	// first declared on it).
	// +kubebuilder:validation:MaxLength=6
	// +kubebuilder:validation:XValidation:rule="self.matches('^[1-9][0-9]{0,4}[dh]$')",message="must be a whole number of days (d) or hours (h) from 1h, at most 5 digits, for example 90d or 36h"
	// +optional
	Every string `json:"every,omitempty"`

	// Keys are dotted key paths (admin.password). Empty means every
	// generated key of the object.
	// +listType=set
	// +optional
	Keys []string `json:"keys,omitempty"`
}

// VaultSeedStatus is what the controller observed and did. It never holds a
// value: only key names, versions and conditions.
type VaultSeedStatus struct {
	// ObservedGeneration is the generation whose reconcile last finished or
	// stalled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready is always present; Reconciling and Stalled only when
	// True, never both; Drifted only in observe-only mode.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ManagedKeys are the keys this controller wrote on the path, sorted by
	// key, each with a KV version that holds the value of its last write by
	// the controller. Only these are ever pruned, and only while their value
	// is still the one at that version (product document, "Pruning").
	// +listType=map
	// +listMapKey=key
	// +optional
	ManagedKeys []ManagedKey `json:"managedKeys,omitempty"`

	// Version is the KV v2 version of the path last read or written.
	// +optional
	Version int64 `json:"version,omitempty"`

	// LastHandledReconcileAt is the value of the annotation
	// ohmlab.fr/reconcile-requested-at that the last reconcile handled
	// (Flux's convention, reconcile.fluxcd.io/requestedAt): once it equals
	// the annotation, the reconcile asked for has run and this status is
	// its result.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// ManagedKey is one key this controller wrote. It holds no value and no
// digest of one: the value the controller wrote is read back from Vault at
// Version when a prune needs it.
type ManagedKey struct {
	// Key is the dotted key path.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
	// Version is the KV v2 version the controller's last write of the key
	// created, or a later version of the path that holds the same value
	// (carried forward, so that Vault's max_versions never ages it out).
	// Absent when unknown: the key was recorded by the first release,
	// which kept names only, and is never pruned on a guess.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Version int64 `json:"version,omitempty"`
	// CreatedTime is the created_time Vault gave Version (RFC 3339, to the
	// nanosecond). Version numbers start again at 1 when a path is deleted
	// with its metadata and written again, and go back with a restored
	// snapshot: the record holds only while Version has this created_time.
	// Absent when recorded by an earlier release: it is taken from Vault
	// the first time Version is read on the path this object owns.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	CreatedTime string `json:"createdTime,omitempty"`

	// StoredAsName is set when the key was decoded from the first
	// release's shape, a bare name: the object's status must be written
	// again in today's shape. Never serialized. Exported, because
	// equality.Semantic, which compares statuses, refuses unexported
	// fields.
	StoredAsName bool `json:"-"`
}

// UnmarshalJSON reads both shapes of a managed key: today's {key, version}
// and the first release's bare name, which becomes {Key: name} with an
// unknown version: objects stored by the first release must decode, or the
// cache never syncs (docs/users/upgrading.md).
func (m *ManagedKey) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var name string
		if err := json.Unmarshal(data, &name); err != nil {
			return err
		}
		*m = ManagedKey{Key: name, StoredAsName: true}
		return nil
	}
	// managedKey has ManagedKey's fields without its methods, so that
	// decoding it does not call UnmarshalJSON again.
	type managedKey ManagedKey
	var k managedKey
	if err := json.Unmarshal(data, &k); err != nil {
		return err
	}
	*m = ManagedKey(k)
	return nil
}

// VaultSeed declares one KV v2 path of Vault: the controller seeds missing
// keys once, keeps references equal to their source and reports what it did.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=ohmlab
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.spec.path`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VaultSeed struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VaultSeedSpec   `json:"spec"`
	Status VaultSeedStatus `json:"status,omitempty"`
}

// VaultSeedList is a list of VaultSeed.
//
// +kubebuilder:object:root=true
type VaultSeedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VaultSeed `json:"items"`
}
