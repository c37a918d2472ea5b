# Vault policy of the ohmlab controller's Vault target (policy name: ohmlab-controller).
#
# KV v2 data and metadata under platforms/<platform>/<tier>/... of the system mount (ohmlab) and
# of the instance's mount (secret), and passwords from Vault's password policies; nothing else: no
# identity, policies, auth methods, mounts, other tokens, not even its own token's lookup/renew
# (the controller logs in again instead). For other mount names, replace "ohmlab" and "secret" below (the README's "Vault
# side" shows the template).
#
# Each capability is needed by one of the controller's calls (TestVaultPolicyIsMinimal removes
# each in turn against a real Vault):
#   data      read:   GET <mount>/data/<path>: observe a path (value, version, custom_metadata)
#             update: POST <mount>/data/<path> with cas. The owner marker is written first, so
#                     the path always exists (has metadata) when its data is written: never
#                     create.
#   metadata  read:   GET <mount>/metadata/<path>: the first read of an object never written, which
#                     tells a path without metadata (its marker creates them in one request) from
#                     one with someone's custom_metadata and no version (the marker is merged).
#                     Without it, that read is refused and the path is read and marked as any
#                     other, one request more per new path.
#             patch:  PATCH <mount>/metadata/<path>: merge the owner marker and the rotation
#                     token into custom_metadata
#             create: POST <mount>/metadata/<path>: the same on a path that has no metadata yet
#   sys/policies/password/<name>/generate
#             read:   GET: a <vault-password:name> key's value, from Vault's password policy of
#                     that name. It only generates; the policies themselves stay unreadable.
# Deleting a path (deletionPolicy: Delete) needs policy-allow-delete.hcl as well.

path "ohmlab/data/platforms/+/+/*" {
  capabilities = ["read", "update"]
}

path "ohmlab/metadata/platforms/+/+/*" {
  capabilities = ["read", "create", "patch"]
}

path "secret/data/platforms/+/+/*" {
  capabilities = ["read", "update"]
}

path "secret/metadata/platforms/+/+/*" {
  capabilities = ["read", "create", "patch"]
}

path "sys/policies/password/+/generate" {
  capabilities = ["read"]
}
