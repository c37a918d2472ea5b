# Extra Vault policy of tenant namespaces (policy name: ohmlab-tenant-allow-delete), attached to the
# tenant role only when targets.vault.tenants.allowDelete is true: a tenant's deletionPolicy: Delete
# removes every version and the metadata of a path of its own prefix. Replace <accessor> as in
# tenant-policy.hcl.

path "ohmlab/metadata/tenants/{{identity.entity.aliases.<accessor>.metadata.service_account_namespace}}/*" {
  capabilities = ["delete"]
}
