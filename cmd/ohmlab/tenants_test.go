package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ohmlab/ohmlab-controller/templating"
)

// tenantValues are chart values with two tenants and a shared source.
const tenantValues = `targets:
  vault:
    enabled: true
    namespaces: [vault-operator-system]
    tenants:
      enabled: true
      namespaces: [team-a, team-b]
      sharedSources: [ohmlab/shared/public/]
`

func tenantSeed(namespace, name, spec string) string {
	s := "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata:\n  name: " + name + "\n"
	if namespace != "" {
		s += "  namespace: " + namespace + "\n"
	}
	return s + "spec:\n" + spec
}

// TestValidateTenants: with the chart's values, `ohmlab validate` refuses
// a tenant's object out of its scope with the webhook's message, naming the
// key and the allowed prefix; a platform object is judged as before.
func TestValidateTenants(t *testing.T) {
	dir := writeTree(t, map[string]string{"values.yaml": tenantValues})
	values := filepath.Join(dir, "values.yaml")
	pathScope := "spec.path: must be a path under ohmlab/tenants/team-a/, this namespace's prefix (" + templating.PathRule + "); a tenant's object cannot choose another"
	refScope := "k: <ref:> must read a path under ohmlab/tenants/team-a/ (this namespace's prefix) or under a shared source (ohmlab/shared/public/); a tenant's object cannot read elsewhere"
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout []string
		// wantStderr is a line standard error holds, "" for none checked.
		wantStderr string
	}{
		{name: "in scope", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/tenants/team-a/app\n  data:\n    k: \"<ref:ohmlab/shared/public/ca#pem>\"\n"),
			wantCode: exitValid},
		{name: "another tenant's path", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/tenants/team-b/app\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: " + pathScope}},
		{name: "a platform path", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/platforms/production/core/keycloak\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: " + pathScope}},
		{name: "dot-dot", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/tenants/team-a/../team-b/app\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: spec.path: " + templating.PathMessage, "-:team-a/app: " + pathScope}},
		{name: "double slash", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/tenants/team-a//app\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: spec.path: " + templating.PathMessage, "-:team-a/app: " + pathScope}},
		{name: "percent-encoding", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/tenants/team-a/%2e%2e/team-b\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: spec.path: " + templating.PathMessage, "-:team-a/app: " + pathScope}},
		{name: "trailing space", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: \"ohmlab/tenants/team-a/app \"\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: spec.path: " + templating.PathMessage, "-:team-a/app: " + pathScope}},
		{name: "look-alike Unicode", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/tenants/team-\u0430/app\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: spec.path: " + templating.PathMessage, "-:team-a/app: " + pathScope}},
		{name: "<ref:> to another tenant", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/tenants/team-a/app\n  data:\n    k: \"<ref:ohmlab/tenants/team-b/db#password>\"\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: " + refScope}},
		{name: "<ref:> to a platform path", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/tenants/team-a/app\n  data:\n    k: \"<ref:ohmlab/platforms/production/core/keycloak#k>\"\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: " + refScope}},
		{name: "<ref:> to an unlisted shared path", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/tenants/team-a/app\n  data:\n    k: \"<ref:ohmlab/shared/private/ca#pem>\"\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: " + refScope}},
		{name: "deletionPolicy Delete", args: []string{"--values", values},
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/tenants/team-a/app\n  deletionPolicy: Delete\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: spec.deletionPolicy: Delete is not allowed in tenant namespaces (the controller's chart leaves targets.vault.tenants.allowDelete false): use Retain"}},
		{name: "an object without a namespace takes --namespace's", args: []string{"--values", values, "--namespace", "team-a"},
			stdin:    tenantSeed("", "app", "  path: ohmlab/platforms/production/core/keycloak\n"),
			wantCode: exitInvalid, wantStdout: []string{"-:team-a/app: " + pathScope}},
		{name: "--namespace leaves a named namespace alone", args: []string{"--values", values, "--namespace", "team-a"},
			stdin:    tenantSeed("vault-operator-system", "app", "  path: ohmlab/platforms/production/core/keycloak\n"),
			wantCode: exitValid},
		{name: "a platform object is judged as before", args: []string{"--values", values},
			stdin:    tenantSeed("vault-operator-system", "app", "  path: ohmlab/platforms/production/core/keycloak\n  data:\n    k: \"<ref:ohmlab/tenants/team-a/app#k>\"\n"),
			wantCode: exitValid},
		{name: "an object without a namespace, and no --namespace: valid, with a warning that its scope is not checked", args: []string{"--values", values},
			stdin:      tenantSeed("", "app", "  path: ohmlab/platforms/production/core/keycloak\n"),
			wantCode:   exitValid,
			wantStderr: "-:app: warning: metadata.namespace: the object names no namespace, so its tenant scope (targets.vault.tenants of --values) is not checked: pass --namespace, the namespace it is applied to"},
		{name: "a --namespace that is no namespace name", args: []string{"--values", values, "--namespace", "TEAM-A"},
			stdin:      tenantSeed("", "app", "  path: ohmlab/tenants/team-a/app\n"),
			wantCode:   exitUsage,
			wantStderr: `ohmlab validate: --namespace "TEAM-A" is not a namespace name: a lowercase RFC 1123 label`},
		{name: "without --values no namespace is a tenant",
			stdin:    tenantSeed("team-a", "app", "  path: ohmlab/platforms/production/core/keycloak\n"),
			wantCode: exitValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCLI(t, tt.stdin, append(append([]string{"validate"}, tt.args...), "-")...)
			if got.Code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", got.Code, tt.wantCode, got.Stderr)
			}
			var lines []string
			if s := strings.TrimSuffix(got.Stdout, "\n"); s != "" {
				lines = strings.Split(s, "\n")
			}
			if diff := cmp.Diff(tt.wantStdout, lines); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if tt.wantStderr != "" && !strings.Contains(got.Stderr, tt.wantStderr) {
				t.Errorf("standard error lacks %q:\n%s", tt.wantStderr, got.Stderr)
			}
		})
	}
}

// TestValidateBadValues: a values file the controller would refuse is a
// usage error naming the key.
func TestValidateBadValues(t *testing.T) {
	tests := []struct {
		name, values, want string
	}{
		{name: "a bad prefix", values: "targets:\n  vault:\n    tenants: {enabled: true, namespaces: [team-a], prefix: ohmlab/tenants/}\n",
			want: `ohmlab validate: --values VALUES: targets.vault.tenants.prefix: "ohmlab/tenants/" must be <mount>/.../{namespace}/`},
		{name: "an unknown key", values: "targets:\n  vault:\n    tenants: {enabled: true, namespaces: [team-a], role2: x}\n",
			want: `ohmlab validate: --values VALUES: targets.vault.tenants: error unmarshaling JSON: while decoding JSON: json: unknown field "role2"`},
		{name: "an empty file", values: "# nothing\n",
			want: `ohmlab validate: --values VALUES: holds no values: give the chart's values (helm get values --all RELEASE)`},
		{name: "a tenant also a platform namespace", values: "targets:\n  vault:\n    namespaces: [team-a]\n    tenants: {enabled: true, namespaces: [team-a]}\n",
			want: `ohmlab validate: --values VALUES: targets.vault.tenants.namespaces[0]: "team-a" is also in targets.vault.namespaces`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values := filepath.Join(writeTree(t, map[string]string{"values.yaml": tt.values}), "values.yaml")
			got := runCLI(t, tenantSeed("team-a", "app", "  path: ohmlab/tenants/team-a/app\n"), "validate", "--values", values, "-")
			if got.Code != exitUsage {
				t.Errorf("exit code %d, want %d", got.Code, exitUsage)
			}
			if stderr := strings.ReplaceAll(got.Stderr, values, "VALUES"); !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not hold %q", stderr, tt.want)
			}
		})
	}
}
