// Package plantest holds the fixtures that the planner's and the
// reconciler's tests share: the product document's example object, its
// path as the controller seeded it, and paths with or without the owner
// marker. It knows nothing of the planner.
package plantest

import (
	"fmt"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/templating"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// M is a KV data tree.
type M = map[string]any

// The example object, its path and what the controller stored there.
const (
	Namespace  = "vault-operator-system"
	Name       = "production-core-keycloak"
	Owner      = Namespace + "/" + Name
	OtherOwner = Namespace + "/production-core-keycloak-copy"
	OwnPath    = "ohmlab/platforms/production/core/keycloak"
	PgPath     = "ohmlab/platforms/production/core/postgres"
	PgRef      = PgPath + "#users.keycloak.password"

	OwnerKey = ohmlabv1alpha1.OwnerMetadataKey
	TokenKey = ohmlabv1alpha1.RotationTokenMetadataKey

	StoredPassword = "stored-password"
	StoredClient   = "stored-client-secret"
)

// Keycloak is the product document's example VaultSeed data.
func Keycloak() M {
	return M{
		"admin": M{
			"username":       "admin",
			"password":       "<random:24>",
			"passwordHashed": "<bcrypt:admin.password>",
		},
		"clients": M{"grafana-core": M{"clientSecret": "<random:32>"}},
		"webhook": "",
	}
}

// KeycloakKeys are the keys of Keycloak, sorted.
var KeycloakKeys = []string{"admin.password", "admin.passwordHashed", "admin.username", "clients.grafana-core.clientSecret", "webhook"}

// Seeded is Keycloak's path as the controller seeded it earlier; edit
// applies dotted key -> value changes to it (nil deletes the key).
func Seeded(hash string, edit ...any) M {
	d := M{
		"admin": M{
			"username":       "admin",
			"password":       StoredPassword,
			"passwordHashed": hash,
		},
		"clients": M{"grafana-core": M{"clientSecret": StoredClient}},
		"webhook": "",
	}
	for i := 0; i < len(edit); i += 2 {
		k := edit[i].(string)
		if edit[i+1] == nil {
			templating.DeletePath(d, k)
			continue
		}
		templating.SetPath(d, k, edit[i+1])
	}
	return d
}

// DeepCopy copies a data tree independently of the code under test.
func DeepCopy(tree map[string]any) map[string]any {
	out := make(map[string]any, len(tree))
	for k, v := range tree {
		if sub, ok := v.(map[string]any); ok {
			v = DeepCopy(sub)
		}
		out[k] = v
	}
	return out
}

// MD is custom_metadata from key, value pairs.
func MD(kv ...string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// Ours is an existing path carrying this object's marker, plus kv.
func Ours(version int, data M, kv ...string) *vaultkv.Secret {
	return &vaultkv.Secret{Exists: true, Version: version, Data: data, CustomMetadata: MD(append([]string{OwnerKey, Owner}, kv...)...)}
}

// HandMade is an existing path without a marker.
func HandMade(version int, data M) *vaultkv.Secret {
	return &vaultkv.Secret{Exists: true, Version: version, Data: data}
}

// ManyKeys are n key names, too many for a write record to list.
func ManyKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("clients.grafana-core-%03d.clientSecret", i)
	}
	return keys
}
