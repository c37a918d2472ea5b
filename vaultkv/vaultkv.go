// Package vaultkv is the controller's only door to HashiCorp Vault: KV v2
// reads, check-and-set writes, custom_metadata marks and deletes, over
// github.com/hashicorp/vault/api, with Kubernetes-auth login and errors
// classified for the reconciler (see Class).
//
// Paths are given as "<mount>/<rest>", exactly as a VaultSeed's spec.path:
// the first segment is the KV v2 mount, the rest the secret's path in it.
// No error or log line of this package carries a secret value, a token or a
// request or response body.
package vaultkv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"
)

// Operation names, used in errors (Error.Op) and as the operation label of
// the metrics.
const (
	OpRead   = "read"
	OpWrite  = "write"
	OpMark   = "mark"
	OpDelete = "delete"
	OpLogin  = "login"
)

// Vault's limits on custom_metadata, checked by Mark before sending.
const (
	MaxMetadataKeys       = 64
	MaxMetadataKeyBytes   = 128
	MaxMetadataValueBytes = 512
)

// Secret is one KV v2 path as read in ONE request (GET <mount>/data/<path>).
type Secret struct {
	// Exists is false when the path has no version ("absent"): Vault
	// answers 404 without metadata. This is also the case of a path that
	// has metadata (for example a Mark) but no version yet.
	Exists bool
	// Version is the current (latest) version, 0 when absent.
	Version int
	// Created is the created_time Vault gave Version (zero when absent).
	// Version numbers start again at 1 when a path is deleted with its
	// metadata and written again, and go back with a restored snapshot: the
	// number and the created_time together name one write.
	Created time.Time
	// Deleted is true when the latest version is soft-deleted or destroyed:
	// the path is present and empty, and a write to it needs cas=Version.
	Deleted bool
	// Data is the tree of the latest version, nil when absent or deleted.
	// JSON numbers are json.Number, so a tree read and written back keeps
	// them exactly.
	Data map[string]any
	// CustomMetadata is the path's custom_metadata, nil when there is none.
	// Read cannot see it on an absent path; ReadNew can.
	CustomMetadata map[string]string
	// NoMetadata is true when ReadNew found that the path has no metadata
	// at all, so MarkNew replaces nobody's custom_metadata. Read never sets
	// it: its 404 is the same with or without metadata.
	NoMetadata bool
}

// Written is Vault's answer to a write: the version it created and that
// version's created_time.
type Written struct {
	Version int
	Created time.Time
}

// KV is the Vault KV v2 access the reconciler uses. *Client implements it
// against a real Vault; package fake implements it in memory. Every method
// returns nil or an error that ClassOf classifies (an *Error for *Client).
type KV interface {
	// Read returns the path's latest version, data and custom_metadata in
	// one request. An absent path is not an error: Secret.Exists is false.
	Read(ctx context.Context, path string) (*Secret, error)
	// ReadVersion returns one version of the path (1 or more), answered as
	// Read: Exists false when the path or the version does not exist,
	// Deleted when that version is soft-deleted or destroyed. A prune reads
	// the version the controller wrote to tell whether a key changed since.
	ReadVersion(ctx context.Context, path string, version int) (*Secret, error)
	// ReadNew is Read for a path expected to have no version yet (an
	// object never written): it reads the path's metadata first, one
	// request, and tells an absent path with no metadata (NoMetadata) from
	// one with metadata and no version (someone's custom_metadata put
	// there first, in CustomMetadata). When the path has a version, it
	// reads it as Read does, a second request.
	ReadNew(ctx context.Context, path string) (*Secret, error)
	// GeneratePassword asks Vault's password policy named policy for a
	// new password, as this client's identity (<vault-password:policy>).
	GeneratePassword(ctx context.Context, policy string) (string, error)
	// Write replaces the path's whole data tree with check-and-set: cas is
	// the version read (0: the path must have no version). It returns the
	// new version and its created_time, or an error of class ErrCASMismatch when the path's
	// current version is not cas. An ErrUnavailable does not prove that
	// nothing was written (a timed-out request may still be served): read
	// again before writing again, as for a CAS mismatch.
	Write(ctx context.Context, path string, data map[string]any, cas int) (Written, error)
	// Mark merges metadata into the path's custom_metadata (keys others put
	// there are kept), creating the path's metadata when it has none. It
	// never creates a KV version. Keys and values must respect Vault's
	// limits (see ValidateMetadata); an empty value is refused (Vault
	// refuses it too), so Mark cannot remove a key.
	Mark(ctx context.Context, path string, metadata map[string]string) error
	// MarkNew is Mark for a path that ReadNew found without metadata
	// (Secret.NoMetadata): one request that creates the path's metadata
	// with this custom_metadata, where Mark takes two (a merge that finds
	// no metadata, then the creation). On a path that has metadata it
	// replaces custom_metadata (its other settings are kept): call Mark
	// there. It never creates a KV version; the limits are Mark's.
	MarkNew(ctx context.Context, path string, metadata map[string]string) error
	// Delete removes the path with all its versions and its metadata.
	// Deleting an absent path is not an error.
	Delete(ctx context.Context, path string) error
}

// SplitPath splits "<mount>/<rest>" at its first slash. Both parts must be
// non-empty, and no segment may be empty, "." or "..": vault/api cleans
// request paths (path.Join), so such a path would be read and written as
// another one. The error (class invalid) says why otherwise.
func SplitPath(path string) (mount, rest string, err error) {
	mount, rest, ok := strings.Cut(path, "/")
	if !ok || mount == "" || rest == "" {
		return "", "", fmt.Errorf("path %q is not <mount>/<path>", path)
	}
	for _, s := range strings.Split(path, "/") {
		if s == "" || s == "." || s == ".." {
			return "", "", fmt.Errorf("path %q has an empty, '.' or '..' segment, which Vault's client would resolve to another path", path)
		}
	}
	return mount, rest, nil
}

// ValidateMetadata checks custom_metadata against Vault's rules (the KV v2
// engine's validateCustomMetadata, which judges the request's
// custom_metadata alone, not the path's merged result): at most
// MaxMetadataKeys keys, each key 1 to MaxMetadataKeyBytes bytes, each value
// 1 to MaxMetadataValueBytes bytes, and keys and values of printable
// characters only (unicode.IsPrint: no tab, newline or other control,
// format or non-ASCII space). The error names the first offending key in
// sorted order, never a value.
func ValidateMetadata(metadata map[string]string) error {
	if n := len(metadata); n > MaxMetadataKeys {
		return fmt.Errorf("custom_metadata has %d keys, Vault allows at most %d", n, MaxMetadataKeys)
	}
	keys := make([]string, 0, len(metadata))
	for k := range metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := metadata[k]
		switch {
		case k == "":
			return fmt.Errorf("custom_metadata has an empty key")
		case len(k) > MaxMetadataKeyBytes:
			return fmt.Errorf("custom_metadata key %q is %d bytes, Vault allows at most %d", k, len(k), MaxMetadataKeyBytes)
		case v == "":
			return fmt.Errorf("custom_metadata value of key %q is empty, Vault requires at least 1 byte", k)
		case len(v) > MaxMetadataValueBytes:
			return fmt.Errorf("custom_metadata value of key %q is %d bytes, Vault allows at most %d", k, len(v), MaxMetadataValueBytes)
		case !printable(k):
			return fmt.Errorf("custom_metadata key %q has a character that is not printable, which Vault refuses", k)
		case !printable(v):
			return fmt.Errorf("custom_metadata value of key %q has a character that is not printable, which Vault refuses", k)
		}
	}
	return nil
}

// printable is Vault's test of custom_metadata (strutil.Printable).
func printable(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
}
