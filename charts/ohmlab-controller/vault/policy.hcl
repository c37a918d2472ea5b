# Vault policy of the ohmlab controller's Vault target (policy name: ohmlab-controller).
#
# KV v2 data and metadata under platforms/<platform>/<tier>/... of the system mount (ohmlab) and
# of the instance's mount (secret), and nothing else: no identity, policies, auth methods,
# mounts or other tokens. For other mount names, replace "ohmlab" and "secret" below (the
# README's "Vault side" shows the template).
#
#   data      read: observe a path (value, version, custom_metadata)
#             create/update: write with check-and-set; patch: merge-patch keys
#   metadata  read: owner marker and rotation token
#             create/update/patch: record them (custom_metadata; creates no version)
# Deleting a path (deletionPolicy: Delete) needs policy-allow-delete.hcl as well.

path "ohmlab/data/platforms/+/+/*" {
  capabilities = ["read", "create", "update", "patch"]
}

path "ohmlab/metadata/platforms/+/+/*" {
  capabilities = ["read", "create", "update", "patch"]
}

path "secret/data/platforms/+/+/*" {
  capabilities = ["read", "create", "update", "patch"]
}

path "secret/metadata/platforms/+/+/*" {
  capabilities = ["read", "create", "update", "patch"]
}

# The controller's own token: the role sets token_no_default_policy, so these are granted here.
path "auth/token/lookup-self" {
  capabilities = ["read"]
}

path "auth/token/renew-self" {
  capabilities = ["update"]
}

path "auth/token/revoke-self" {
  capabilities = ["update"]
}
