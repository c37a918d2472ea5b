# Vault policy of tenant namespaces (policy name: ohmlab-tenant), attached to the tenant role
# (tenant-role.json) only, never to the controller's own role.
#
# One policy for every tenant: Vault fills {{identity.entity.aliases.<accessor>.metadata.
# service_account_namespace}} at each request with the namespace of the ServiceAccount that logged
# in, taken from the token the API server signed, so a login for team-a reaches
# ohmlab/tenants/team-a/ and nothing of team-b, whatever the controller asks. Replace <accessor>
# with the accessor of the Kubernetes auth mount (vault auth list: "auth_kubernetes_..."), and the
# "ohmlab" mount and "tenants/" of the paths below with those of targets.vault.tenants.prefix
# ({namespace} is the template) if you changed it.
#
# The capabilities are the controller's own on its prefix (policy.hcl says which call needs
# each), plus read on each shared source of targets.vault.tenants.sharedSources (here
# ohmlab/shared/public/): a tenant's <ref:> copies from there, and writes nothing there. With
# targets.vault.tenants.allowDelete, add tenant-policy-allow-delete.hcl. A tenant's
# <vault-password:policy> asks Vault's password policy with the tenant's own login: the last
# stanza only generates, for any policy name, as in policy.hcl; it reads no path.

path "ohmlab/data/tenants/{{identity.entity.aliases.<accessor>.metadata.service_account_namespace}}/*" {
  capabilities = ["read", "update"]
}

path "ohmlab/metadata/tenants/{{identity.entity.aliases.<accessor>.metadata.service_account_namespace}}/*" {
  capabilities = ["read", "create", "patch"]
}

path "ohmlab/data/shared/public/*" {
  capabilities = ["read"]
}

path "sys/policies/password/+/generate" {
  capabilities = ["read"]
}
