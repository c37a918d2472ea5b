package tenancy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*tenancy.Config)
		want   []string
	}{
		{name: "the tests' configuration", change: func(*tenancy.Config) {}},
		{name: "off, anything goes", change: func(c *tenancy.Config) { *c = tenancy.Config{Prefix: "nonsense"} }},
		{name: "the defaults, enabled, need namespaces", change: func(c *tenancy.Config) { *c = tenancy.DefaultConfig(); c.Enabled = true },
			want: []string{"targets.vault.tenants.namespaces: required when enabled: list the tenant namespaces"}},
		{name: "bad, repeated and platform namespaces", change: func(c *tenancy.Config) {
			c.Namespaces = []string{"team-a", "Team_B", "team-a", "vault-operator-system"}
		},
			want: []string{
				`targets.vault.tenants.namespaces[1]: "Team_B" is not a namespace name (a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'))`,
				`targets.vault.tenants.namespaces[2]: "team-a" is listed twice`,
				`targets.vault.tenants.namespaces[3]: "vault-operator-system" is also in targets.vault.namespaces: a namespace is a platform namespace (the controller's Vault identity) or a tenant (its own), not both`,
			}},
		{name: "a prefix elsewhere in the mount", change: func(c *tenancy.Config) { c.Prefix = "secret/apps/{namespace}/seeded/" }},
	}
	prefixRule := "must be <mount>/.../{namespace}/: {namespace} once, as a whole segment after the mount, other segments of letters, digits, '.', '_' and '-', and a trailing '/'"
	for _, p := range []string{
		"", "ohmlab/tenants/", "ohmlab/tenants/{namespace}", "{namespace}/x/", "ohmlab/t-{namespace}/",
		"ohmlab/{namespace}/{namespace}/", "ohmlab//{namespace}/", "ohmlab/../{namespace}/", "/ohmlab/{namespace}/",
		"ohmlab/ten ants/{namespace}/", "ohmlab/<namespace>/", "ohmlab/{{namespace}}/",
	} {
		tests = append(tests, struct {
			name   string
			change func(*tenancy.Config)
			want   []string
		}{name: "prefix " + p, change: func(c *tenancy.Config) { c.Prefix = p }, want: []string{`targets.vault.tenants.prefix: "` + p + `" ` + prefixRule}})
	}
	tests = append(tests, []struct {
		name   string
		change func(*tenancy.Config)
		want   []string
	}{
		{name: "shared sources", change: func(c *tenancy.Config) {
			c.SharedSources = []string{"ohmlab/shared/public/", "ohmlab/shared", "ohmlab/tenants/", "ohmlab/tenants/team-a/", "ohmlab/", "ohmlab/a//b/", "ohmlab/sh%41red/"}
		}, want: []string{
			`targets.vault.tenants.sharedSources[1]: "ohmlab/shared" must be a path prefix ending in '/', <mount>/<path>/: two or more segments of letters, digits, '.', '_' and '-'`,
			`targets.vault.tenants.sharedSources[2]: "ohmlab/tenants/" overlaps the tenants' prefix "ohmlab/tenants/{namespace}/": a shared source must lie outside every tenant's prefix`,
			`targets.vault.tenants.sharedSources[3]: "ohmlab/tenants/team-a/" overlaps the tenants' prefix "ohmlab/tenants/{namespace}/": a shared source must lie outside every tenant's prefix`,
			`targets.vault.tenants.sharedSources[4]: "ohmlab/" must be a path prefix ending in '/', <mount>/<path>/: two or more segments of letters, digits, '.', '_' and '-'`,
			`targets.vault.tenants.sharedSources[5]: "ohmlab/a//b/" must be a path prefix ending in '/', <mount>/<path>/: two or more segments of letters, digits, '.', '_' and '-'`,
			`targets.vault.tenants.sharedSources[6]: "ohmlab/sh%41red/" must be a path prefix ending in '/', <mount>/<path>/: two or more segments of letters, digits, '.', '_' and '-'`,
		}},
		{name: "identity and limits", change: func(c *tenancy.Config) {
			c.ServiceAccount, c.Role, c.Audience, c.TokenExpirationSeconds, c.MaxObjectsPerNamespace = "", "", "", 599, -1
		}, want: []string{
			`targets.vault.tenants.serviceAccount: "" is not a ServiceAccount name`,
			"targets.vault.tenants.role: required: the Vault role tenants log in to",
			"targets.vault.tenants.audience: required: the audience the Vault role accepts",
			"targets.vault.tenants.tokenExpirationSeconds: must be at least 600 (the API server's minimum)",
			"targets.vault.tenants.maxObjectsPerNamespace: must be 0 (no limit) or more",
		}},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tenants()
			tt.change(&c)
			if diff := cmp.Diff(tt.want, c.Validate([]string{"vault-operator-system"})); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}
