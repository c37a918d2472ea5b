# Extra Vault policy of the ohmlab controller (policy name: ohmlab-controller-allow-delete),
# attached to its role only when deletion is allowed: targets.vault.allowDelete in this chart and
# ohmlab.controller.allowDelete in vault-operator.
#
# DELETE <mount>/metadata/<path> removes every version and the metadata of a path. The
# controller deletes only paths whose owner marker names the deleted object.

path "ohmlab/metadata/platforms/+/+/*" {
  capabilities = ["delete"]
}

path "secret/metadata/platforms/+/+/*" {
  capabilities = ["delete"]
}
