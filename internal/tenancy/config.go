// Package tenancy is the configuration of tenant namespaces (the section
// targets.vault.tenants) and the one scope check that the admission
// webhook, `ohmlab validate` and the reconciler run on a tenant's
// VaultSeed, so that an object gets one verdict everywhere.
//
// A tenant's object says what to seed, never where or as whom: its
// namespace alone chooses its prefix, its Vault identity and what it may
// read. The check here is the controller's side; Vault's templated tenant
// policy (charts/ohmlab-controller/vault/tenant-policy.hcl) is the
// boundary that holds even if this check has a bug.
//
// Pure: no Kubernetes client, no Vault.
package tenancy

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ohmlab/ohmlab-controller/templating"
)

// Placeholder is the part of Config.Prefix that stands for the object's
// namespace. Braces, as in a URI template: the angle brackets of the
// issue's example are spec.data's template delimiters, and a prefix with
// "{{ }}" would read as Helm's or Vault's own templating.
const Placeholder = "{namespace}"

// Config is the section targets.vault.tenants of the controller's
// configuration, and the same keys under targets.vault.tenants in the
// chart's values. Nothing in it comes from an object.
type Config struct {
	// Enabled turns tenant namespaces on. Off, every field below is
	// ignored and no namespace is a tenant.
	Enabled bool `json:"enabled"`
	// Namespaces are the tenant namespaces, an explicit allow-list. A
	// namespace is a platform namespace (targets.vault.namespaces) or a
	// tenant, never both.
	Namespaces []string `json:"namespaces"`
	// Prefix is where a tenant's paths lie, "<mount>/.../{namespace}/":
	// Placeholder once, as a whole segment, and a trailing "/". A tenant's
	// spec.path and its <ref:> sources must lie under its own expansion.
	Prefix string `json:"prefix"`
	// ServiceAccount is the name of the ServiceAccount, in each tenant
	// namespace, whose token the controller requests to log in to Vault
	// for that namespace's objects.
	ServiceAccount string `json:"serviceAccount"`
	// Role is the Vault Kubernetes-auth role of tenants (on the mount of
	// targets.vault.backend.auth.mount); its templated policy confines a
	// login to its namespace's prefix.
	Role string `json:"role"`
	// Audience of the requested ServiceAccount token; the Vault role
	// accepts only it.
	Audience string `json:"audience"`
	// TokenExpirationSeconds is the lifetime the controller asks of each
	// tenant's ServiceAccount token (Kubernetes' minimum is 600).
	TokenExpirationSeconds int64 `json:"tokenExpirationSeconds"`
	// SharedSources are path prefixes, "<mount>/.../", that a tenant's
	// <ref:> may read besides its own prefix: read-only, shared by every
	// tenant.
	SharedSources []string `json:"sharedSources"`
	// AllowAdoption lets a tenant's object adopt a path of its prefix that
	// has no owner marker (written before the object, by hand or by
	// another tool).
	AllowAdoption bool `json:"allowAdoption"`
	// AllowDelete lets a tenant's object have deletionPolicy Delete.
	AllowDelete bool `json:"allowDelete"`
	// MaxObjectsPerNamespace is the most VaultSeeds a tenant namespace may
	// hold; the webhook refuses the creation of one more. 0: no limit.
	MaxObjectsPerNamespace int `json:"maxObjectsPerNamespace"`
}

// DefaultConfig holds every default of targets.vault.tenants, the chart's
// defaults too: off, and no adoption or deletion for tenants.
func DefaultConfig() Config {
	return Config{
		Prefix:                 "ohmlab/tenants/" + Placeholder + "/",
		ServiceAccount:         "ohmlab-vaultseed",
		Role:                   "ohmlab-tenant",
		Audience:               "vault",
		TokenExpirationSeconds: 600,
		MaxObjectsPerNamespace: 500,
	}
}

// MinTokenExpirationSeconds is the shortest token lifetime the API server
// grants through TokenRequest.
const MinTokenExpirationSeconds = 600

// Validate returns every problem of the section, each naming its key under
// targets.vault.tenants; nil when it is good, or when it is off.
// platformNamespaces are targets.vault.namespaces: a namespace cannot be in
// both lists.
func (c Config) Validate(platformNamespaces []string) []string {
	if !c.Enabled {
		return nil
	}
	const key = "targets.vault.tenants."
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, key+fmt.Sprintf(format, args...)) }
	if len(c.Namespaces) == 0 {
		add("namespaces: required when enabled: list the tenant namespaces")
	}
	seen := map[string]bool{}
	for i, ns := range c.Namespaces {
		switch {
		case len(validation.IsDNS1123Label(ns)) > 0:
			add("namespaces[%d]: %q is not a namespace name (%s)", i, ns, strings.Join(validation.IsDNS1123Label(ns), "; "))
		case seen[ns]:
			add("namespaces[%d]: %q is listed twice", i, ns)
		case slices.Contains(platformNamespaces, ns):
			add("namespaces[%d]: %q is also in targets.vault.namespaces: a namespace is a platform namespace (the controller's Vault identity) or a tenant (its own), not both", i, ns)
		}
		seen[ns] = true
	}
	prefixOK := prefixProblem(c.Prefix) == ""
	if !prefixOK {
		add("prefix: %q %s", c.Prefix, prefixProblem(c.Prefix))
	}
	if len(validation.IsDNS1123Subdomain(c.ServiceAccount)) > 0 {
		add("serviceAccount: %q is not a ServiceAccount name", c.ServiceAccount)
	}
	if c.Role == "" {
		add("role: required: the Vault role tenants log in to")
	}
	if c.Audience == "" {
		add("audience: required: the audience the Vault role accepts")
	}
	if c.TokenExpirationSeconds < MinTokenExpirationSeconds {
		add("tokenExpirationSeconds: must be at least %d (the API server's minimum)", MinTokenExpirationSeconds)
	}
	if c.MaxObjectsPerNamespace < 0 {
		add("maxObjectsPerNamespace: must be 0 (no limit) or more")
	}
	fixed, _, _ := strings.Cut(c.Prefix, Placeholder)
	for i, s := range c.SharedSources {
		switch {
		case !strings.HasSuffix(s, "/") || !templating.ValidPath(strings.TrimSuffix(s, "/")):
			add("sharedSources[%d]: %q must be a path prefix ending in '/', %s", i, s, "<mount>/<path>/: two or more segments of letters, digits, '.', '_' and '-'")
		case prefixOK && (strings.HasPrefix(s, fixed) || strings.HasPrefix(fixed, s)):
			// A shared source over the tenants' prefixes would let every
			// tenant read every other tenant's paths.
			add("sharedSources[%d]: %q overlaps the tenants' prefix %q: a shared source must lie outside every tenant's prefix", i, s, c.Prefix)
		}
	}
	return errs
}

// prefixProblem says what is wrong with a prefix template; "" when it is
// good.
func prefixProblem(p string) string {
	const rule = "must be <mount>/.../" + Placeholder + "/: " + Placeholder + " once, as a whole segment after the mount, other segments of letters, digits, '.', '_' and '-', and a trailing '/'"
	if strings.Count(p, Placeholder) != 1 || !strings.HasSuffix(p, "/") {
		return rule
	}
	segs := strings.Split(strings.TrimSuffix(p, "/"), "/")
	at := slices.Index(segs, Placeholder)
	if at < 1 {
		return rule
	}
	// With a namespace in place of the placeholder, the prefix is a path.
	if !templating.ValidPath(strings.Replace(strings.TrimSuffix(p, "/"), Placeholder, "x", 1)) {
		return rule
	}
	return ""
}

// IsTenant reports whether namespace is a tenant namespace.
func (c Config) IsTenant(namespace string) bool {
	return c.Enabled && slices.Contains(c.Namespaces, namespace)
}

// PrefixOf is the prefix of namespace's paths, Prefix with the namespace in
// place of Placeholder.
func (c Config) PrefixOf(namespace string) string {
	return strings.Replace(c.Prefix, Placeholder, namespace, 1)
}

// SplitPrefix returns the parts of Prefix before and after Placeholder, for
// the chart's CEL rule and for Vault's templated policy.
func (c Config) SplitPrefix() (before, after string) {
	before, after, _ = strings.Cut(c.Prefix, Placeholder)
	return before, after
}
