package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
)

const secret = "s3cr3t-typed-by-hand"

// result is what one run of the command did.
type result struct {
	Code           int
	Stdout, Stderr string
}

func runCLI(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(stdin), &stdout, &stderr)
	return result{Code: code, Stdout: stdout.String(), Stderr: stderr.String()}
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeTree writes files (relative name -> content) under a new directory
// and returns it.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func vaultSeed(name, spec string) string {
	return "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata:\n  name: " + name + "\n  namespace: vo\nspec:\n" + spec
}

// TestValidateHelmTemplate runs `ohmlab validate -` over streams shaped like
// `helm template` output: Deployments, ConfigMaps, Services and empty
// documents mixed with VaultSeeds.
func TestValidateHelmTemplate(t *testing.T) {
	const invalid = "-:vault-operator-system/"
	tests := []struct {
		name       string
		stdin      string
		args       []string
		wantCode   int
		wantStdout string
	}{
		{
			name:     "a valid rendering",
			stdin:    readFile(t, "testdata/helm-template.yaml"),
			args:     []string{"validate", "-"},
			wantCode: exitValid,
		},
		{
			name:     "an invalid rendering: one line per problem, in input order",
			stdin:    readFile(t, "testdata/helm-template-invalid.yaml"),
			args:     []string{"validate", "-"},
			wantCode: exitInvalid,
			wantStdout: invalid + `keycloak: admin.db.password: key name "db.password" contains a dot: nest maps instead
` + invalid + `keycloak: admin.password: <random:N> needs a decimal length N from 1 to 4096, found "<random:0>"
` + invalid + `keycloak: admin.passwordHashed: <bcrypt:admin.pasword> hashes admin.pasword, which data does not declare (a key filled by hand is declared as "")
` + invalid + `keycloak: admin.secret: rotate.keys names "admin.secret", which data does not declare
` + invalid + `keycloak: clientSecret: reference cycle: ohmlab/platforms/production/core/grafana -> ohmlab/platforms/production/core/keycloak -> ohmlab/platforms/production/core/grafana
` + invalid + `keycloak: spec.path: path ohmlab/platforms/production/core/keycloak is also declared by vault-operator-system/keycloak-again
` + invalid + `grafana: metadata.name: vault-operator-system/grafana is declared 2 times
` + invalid + `grafana: oidc.clientSecret: reference cycle: ohmlab/platforms/production/core/grafana -> ohmlab/platforms/production/core/keycloak -> ohmlab/platforms/production/core/grafana
` + invalid + `grafana: hosts: lists are not supported: leaves are strings, numbers or booleans, nodes are maps
` + invalid + `grafana: metadata.name: vault-operator-system/grafana is declared 2 times
` + invalid + `keycloak-again: spec.path: path ohmlab/platforms/production/core/keycloak is also declared by vault-operator-system/keycloak
` + invalid + `keycloak-again: spec.path: reference cycle: ohmlab/platforms/production/core/grafana -> ohmlab/platforms/production/core/keycloak -> ohmlab/platforms/production/core/grafana
`,
		},
		{
			name:     "flags after the input",
			stdin:    readFile(t, "testdata/helm-template.yaml"),
			args:     []string{"validate", "-", "--output", "text"},
			wantCode: exitValid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCLI(t, tt.stdin, tt.args...)
			if got.Code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", got.Code, tt.wantCode, got.Stderr)
			}
			if diff := cmp.Diff(tt.wantStdout, got.Stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if strings.Contains(got.Stdout+got.Stderr, secret) {
				t.Errorf("the output holds a value")
			}
		})
	}
}

func TestValidateJSON(t *testing.T) {
	got := runCLI(t, readFile(t, "testdata/helm-template-invalid.yaml"), "validate", "--output", "json", "-")
	if got.Code != exitInvalid {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", got.Code, exitInvalid, got.Stderr)
	}
	var rep report
	if err := json.Unmarshal([]byte(got.Stdout), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, got.Stdout)
	}
	type row struct {
		Line              int
		Name, Key, Reason string
	}
	var rows []row
	for _, f := range rep.Problems {
		if f.File != "-" || f.Namespace != "vault-operator-system" || f.Message == "" {
			t.Errorf("finding %+v: want file -, namespace vault-operator-system and a message", f)
		}
		rows = append(rows, row{f.Line, f.Name, f.Key, f.Reason})
	}
	want := []row{
		{11, "keycloak", "admin.db.password", "InvalidSpec"},
		{11, "keycloak", "admin.password", "InvalidSpec"},
		{11, "keycloak", "admin.passwordHashed", "InvalidSpec"},
		{11, "keycloak", "admin.secret", "InvalidRotation"},
		{11, "keycloak", "clientSecret", "RefCycle"},
		{11, "keycloak", "spec.path", "DuplicatePath"},
		{29, "grafana", "metadata.name", "DuplicateName"},
		{29, "grafana", "oidc.clientSecret", "RefCycle"},
		{50, "grafana", "hosts", "InvalidSpec"},
		{50, "grafana", "metadata.name", "DuplicateName"},
		{61, "keycloak-again", "spec.path", "DuplicatePath"},
		{61, "keycloak-again", "spec.path", "RefCycle"},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if rep.Valid || rep.Objects != 4 || len(rep.Warnings) != 0 {
		t.Errorf("valid %v, objects %d, warnings %v; want false, 4, none", rep.Valid, rep.Objects, rep.Warnings)
	}
}

func TestValidateFilesAndDirectories(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"a.yaml":             vaultSeed("a", "  path: ohmlab/x\n"),
		"sub/deeper/b.yml":   vaultSeed("b", "  path: ohmlab/x\n"),
		"sub/notes.txt":      vaultSeed("ignored", "  path: ohmlab/x\n"),
		"sub/j.json":         `{"apiVersion": "ohmlab.fr/v1alpha1", "kind": "VaultSeed", "metadata": {"name": "j", "namespace": "vo"}, "spec": {"path": "ohmlab/x"}}`,
		"sub/c.yaml":         "# only a comment\n---\n",
		"explicit.manifests": vaultSeed("e", "  path: ohmlab/e\n  data:\n    k: \"<hex:3>\"\n"),
	})
	got := runCLI(t, "", "validate", filepath.Join(dir, "sub"), filepath.Join(dir, "a.yaml"), filepath.Join(dir, "explicit.manifests"))
	want := result{
		Code: exitInvalid,
		Stdout: filepath.Join(dir, "sub/deeper/b.yml") + ":vo/b: spec.path: path ohmlab/x is also declared by vo/a, vo/j\n" +
			filepath.Join(dir, "sub/j.json") + ":vo/j: spec.path: path ohmlab/x is also declared by vo/a, vo/b\n" +
			filepath.Join(dir, "a.yaml") + ":vo/a: spec.path: path ohmlab/x is also declared by vo/b, vo/j\n" +
			filepath.Join(dir, "explicit.manifests") + ":vo/e: k: <hex:N> needs an even decimal length N from 2 to 4096, found \"<hex:3>\"\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run (-want +got):\n%s", diff)
	}
}

func TestValidateInputs(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"broken.yaml": vaultSeed("ok", "  path: ohmlab/ok\n") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: [b\n",
		"empty.yaml":  "\n",
	})
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  result
	}{
		{
			name:  "items of a List and of a VaultSeedList",
			stdin: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n- apiVersion: ohmlab.fr/v1alpha1\n  kind: VaultSeed\n  metadata: {name: a, namespace: vo}\n  spec: {path: ohmlab/x}\n---\napiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeedList\nitems:\n- metadata: {name: b, namespace: vo}\n  spec: {path: ohmlab/x}\n",
			args:  []string{"validate", "-"},
			want: result{Code: exitInvalid, Stdout: "-:vo/a: spec.path: path ohmlab/x is also declared by vo/b\n" +
				"-:vo/b: spec.path: path ohmlab/x is also declared by vo/a\n"},
		},
		{
			name: "documents that cannot be analysed",
			stdin: strings.Join([]string{
				vaultSeed("a", "  path: 42\n"),
				vaultSeed("", "  path: ohmlab/b\n"),
				"apiVersion: ohmlab.fr/v1\nkind: VaultSeed\nmetadata: {name: c, namespace: vo}\nspec: {path: ohmlab/c}\n",
				vaultSeed("d", "  path: ohmlab/d\n  data:\n    k: <uuid>\n  deletionPolicy: [Delete]\n"),
				vaultSeed("e", "  path: ohmlab/e\n  data: "+secret+"\n"),
				vaultSeed("f", "  path: ohmlab/f\n  dta: {k: <uuid>}\n  rotate: {token: \"1\", Keys: [k]}\n"),
				"apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata: {name: g, namespace: vo, creationTimestamp: yesterday}\nspec: {path: ohmlab/g}\n",
			}, "---\n"),
			args: []string{"validate", "-"},
			want: result{Code: exitInvalid, Stdout: "-:vo/a: spec.path: must be a string, not a JSON number\n" +
				"-:vo/: metadata.name: is empty: kubectl apply needs a name\n" +
				"-:vo/c: apiVersion: ohmlab.fr/v1 is not a version this ohmlab knows: use ohmlab.fr/v1alpha1\n" +
				"-:vo/d: spec.deletionPolicy: must be a string, not a JSON array\n" +
				"-:vo/e: spec.data: spec.data is not an object\n" +
				"-:vo/f: spec.dta: is not a field of VaultSeed (field names are case-sensitive): kubectl apply refuses it\n" +
				"-:vo/f: spec.rotate.Keys: is not a field of VaultSeed (field names are case-sensitive): kubectl apply refuses it\n" +
				"-:vo/g: metadata: cannot be read as a VaultSeed: parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\"\n"},
		},
		{
			name: "an ssh key pair is refused as the age pair is, one message each",
			stdin: strings.Join([]string{
				vaultSeed("pub", "  path: ohmlab/pub\n  data:\n    deploy: {public: \"<ssh:public>\"}\n"),
				vaultSeed("two", "  path: ohmlab/two\n  data:\n    a: \"<ssh:private>\"\n    b: \"<ssh:private>\"\n"),
				vaultSeed("rot", "  path: ohmlab/rot\n  data:\n    private: \"<ssh:private>\"\n    public: \"<ssh:public>\"\n  rotate: {token: \"1\", keys: [public]}\n"),
				vaultSeed("age", "  path: ohmlab/age\n  data:\n    public: \"<age:public>\"\n"),
			}, "---\n"),
			args: []string{"validate", "-"},
			want: result{Code: exitInvalid, Stdout: "-:vo/pub: deploy.public: <ssh:public> needs an <ssh:private> in the same object\n" +
				"-:vo/two: a: an object holds at most one <ssh:private>, found 2 (a, b)\n" +
				"-:vo/two: b: an object holds at most one <ssh:private>, found 2 (a, b)\n" +
				"-:vo/rot: public: rotate.keys names an <ssh:public>: list its <ssh:private> instead, the pair rotates together\n" +
				"-:vo/age: public: <age:public> needs an <age:secret> in the same object\n"},
		},
		{
			name:  "a template typed wrong is shown as typed, with what is expected; a value of a template's shape is not",
			stdin: vaultSeed("t", "  path: ohmlab/t\n  data:\n    a: \"<random:0>\"\n    b: {c: \"<ref:noslash>\"}\n    d: \"<RANDOM:12>\"\n    e: \"<"+secret+">\"\n"),
			args:  []string{"validate", "-"},
			want: result{Code: exitInvalid, Stdout: "-:vo/t: a: <random:N> needs a decimal length N from 1 to 4096, found \"<random:0>\"\n" +
				"-:vo/t: b.c: <ref:mount/path#key.path> needs a path, then '#', then a dotted key path (no empty segment), found \"<ref:noslash>\"\n" +
				"-:vo/t: d: template kinds are lowercase: write \"<random:12>\", found \"<RANDOM:12>\"\n" +
				"-:vo/t: e: unknown template kind (templates are lowercase: <random:N>, <hex:N>, <password:N>, <password:N:classes>, <vault-password:policy>, <uuid>, <age:secret>, <age:public>, <ssh:private>, <ssh:public>, <bcrypt:key.path>, <ref:mount/path#key.path>); a plain value cannot have the shape <name> or <name:args>\n"},
		},
		{
			name: "a password rule that cannot be met is refused, naming the key",
			stdin: vaultSeed("p", "  path: ohmlab/p\n  data:\n    db: {password: \"<password:2>\"}\n    a: \"<password:8:upper,Lower>\"\n"+
				"    b: \"<password:8:symbol=!!>\"\n    c: \"<vault-password:..>\"\n    ok: \"<password:24:lower,symbol=!#,>\"\n    v: \"<vault-password:app-db>\"\n"),
			args: []string{"validate", "-"},
			want: result{Code: exitInvalid, Stdout: "-:vo/p: a: the classes of <password:N:classes> are upper, lower, digit and symbol (or symbol=CHARS, last), separated by ',', each at most once, found \"<password:8:upper,Lower>\"\n" +
				"-:vo/p: b: the symbols of symbol=CHARS in <password:N:classes> are printable ASCII characters other than letters, digits, space, '<' and '>', each at most once, found \"<password:8:symbol=!!>\"\n" +
				"-:vo/p: c: <vault-password:policy> needs the name of a Vault password policy: 1 to 128 letters, digits, '.', '_' and '-', not '.' or '..', found \"<vault-password:..>\"\n" +
				"-:vo/p: db.password: the length N of <password:N:classes> must be at least its number of classes, to hold one character of each (<password:N> has 3: upper, lower, digit), found \"<password:2>\"\n"},
		},
		{
			name:  "a composed value is valid, without warning",
			stdin: vaultSeed("c", "  path: ohmlab/c\n  data:\n    url: \"postgres://app:<ref:ohmlab/platforms/prod/core/db#password>@db:5432/app\"\n"),
			args:  []string{"validate", "-"},
			want:  result{Code: exitValid},
		},
		{
			name:  "a composed value with another template inside is refused, naming the key, never the text",
			stdin: vaultSeed("c", "  path: ohmlab/c\n  data:\n    url: \"postgres://app:"+secret+"@<ref:ohmlab/db#host><random:8>\"\n"),
			args:  []string{"validate", "-"},
			want: result{Code: exitInvalid, Stdout: "-:vo/c: url: a composed value joins text and <ref:mount/path#key.path> references only: " +
				"give this template a key of its own in the object and compose <ref:own/path#that.key>, found \"<random:8>\"\n"},
		},
		{
			name:  "a template never closed is a warning: stored literally, and the template to write",
			stdin: vaultSeed("u", "  path: ohmlab/u\n  data:\n    a: \"<random:12\"\n"),
			args:  []string{"validate", "-"},
			want:  result{Code: exitValid, Stderr: "-:vo/u: warning: a: is plain text, the template <random:12> without its closing '>': it is stored in Vault literally, as typed, not generated; write <random:12> to generate the value\n"},
		},
		{
			name:  "a plain value that looks like a secret is a warning naming its key, never the value",
			stdin: vaultSeed("s", "  path: ohmlab/s\n  data:\n    user: admin\n    api: {token: q7RzK2mX9vLp4TnW8bYc}\n"),
			args:  []string{"validate", "-"},
			want:  result{Code: exitValid, Stderr: "-:vo/s: warning: api.token: is a plain value that looks like a secret (long and random, or a private key): spec.data is kept in Git and in the cluster, readable by anyone who can read the object; generate it with a template (<random:N>, <hex:N>, <ssh:private>, <age:secret>), or declare it as \"\" and fill it in Vault by hand\n"},
		},
		{
			name:  "an object too large for etcd is refused, not only warned of",
			stdin: vaultSeed("huge", "  path: ohmlab/huge\n  data:\n    bundle: "+strings.Repeat("x", 2<<20)+"\n"),
			args:  []string{"validate", "-"},
			want:  result{Code: exitInvalid, Stdout: "-:vo/huge: spec.data: the object is 2049 KiB of JSON, more than the 1.5 MiB an API server's etcd stores by default: kubectl apply fails, server-side too; split its keys over several objects\n"},
		},
		{
			name:  "an object too large for client-side kubectl apply is a warning",
			stdin: vaultSeed("big", "  path: ohmlab/big\n  data:\n    bundle: "+strings.Repeat("x", 300<<10)+"\n"),
			args:  []string{"validate", "-"},
			want:  result{Code: exitValid, Stderr: "-:vo/big: warning: the object is 301 KiB of JSON, more than the 256 KiB that client-side kubectl apply (and Argo CD's default sync) keeps of it in the annotation kubectl.kubernetes.io/last-applied-configuration: kubectl apply refuses it; apply it server-side (kubectl apply --server-side, Argo CD's ServerSideApply=true), or split its keys over several objects\n"},
		},
		{
			name:  "warnings go to stderr and do not fail",
			stdin: vaultSeed("a", "  path: ohmlab/a\n  data:\n    p: "+secret+"\n  rotate:\n    token: \"1\"\n"),
			args:  []string{"validate", "-"},
			want:  result{Code: exitValid, Stderr: "-:vo/a: warning: spec.rotate: rotate has no keys and data declares no generated key (<random:N>, <hex:N>, <password:N>, <vault-password:policy>, <uuid>, <age:secret>, <ssh:private>): a new token regenerates nothing\n"},
		},
		{
			name:  "a path copied from vault kv get's Secret Path (data/ after the mount) is a warning, not a refusal",
			stdin: vaultSeed("d", "  path: ohmlab/data/platforms/x\n  data:\n    k: \"<random:8>\"\n"),
			args:  []string{"validate", "-"},
			want: result{Code: exitValid, Stderr: "-:vo/d: warning: spec.path: ohmlab/data/platforms/x has data/ after the mount, as KV v2's API path does (vault kv prints it as \"Secret Path\"), " +
				"but a VaultSeed's path is <mount>/<path> without it: the controller adds data/ itself and would use ohmlab/data/data/platforms/x, which its policy usually does not cover (permission denied). " +
				"Write ohmlab/platforms/x, unless the secret's own path does begin with data/\n"},
		},
		{
			name:  "a rotate block without keys over a key pair is a warning naming its private key",
			stdin: vaultSeed("r", "  path: ohmlab/r\n  data:\n    pw: \"<random:8>\"\n    sops: {secret: \"<age:secret>\", public: \"<age:public>\"}\n  rotate:\n    token: \"1\"\n"),
			args:  []string{"validate", "-"},
			want: result{Code: exitValid, Stderr: "-:vo/r: warning: spec.rotate: rotate has no keys, so a new token regenerates every generated key, the private keys sops.secret (<age:secret>) included, " +
				"and their public keys with them: what was encrypted to the old age key, or trusts the old SSH key, stops working. List the keys to regenerate in rotate.keys (a private key only when its pair must change)\n"},
		},
		{
			name:  "a shard label no process can take is a warning, as at kubectl apply",
			stdin: "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata:\n  name: a\n  namespace: vo\n  labels: {ohmlab.fr/shard: \"\"}\nspec:\n  path: ohmlab/a\n",
			args:  []string{"validate", "-"},
			want:  result{Code: exitValid, Stderr: "-:vo/a: warning: metadata.labels[ohmlab.fr/shard]: empty: no process reconciles this object (the controller's process without a shard takes only objects without the label); remove the label or name a shard of targets.vault.shards\n"},
		},
		{
			name:  "an unquoted YAML 1.1 boolean value is a warning with its line, in a List too",
			stdin: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: ohmlab.fr/v1alpha1\n  kind: VaultSeed\n  metadata: {name: a, namespace: vo}\n  spec:\n    path: ohmlab/a\n    data:\n      country: NO\n      quoted: \"NO\"\n      flag: true\n      smtp: {tls: on}\n",
			args:  []string{"validate", "-"},
			want: result{Code: exitValid, Stderr: "-:vo/a: warning: spec.data.country: line 10: the unquoted NO is the boolean false for kubectl, Helm and Argo CD (YAML 1.1), and Vault gets false: quote it (\"NO\") if you meant the text\n" +
				"-:vo/a: warning: spec.data.smtp.tls: line 13: the unquoted on is the boolean true for kubectl, Helm and Argo CD (YAML 1.1), and Vault gets true: quote it (\"on\") if you meant the text\n"},
		},
		{
			name:  "a key a terminal would not print as itself is escaped in a warning too (a bidirectional override)",
			stdin: vaultSeed("k", "  path: ohmlab/k\n  data:\n    \"\\u202e\": {tls: on}\n"),
			args:  []string{"validate", "-"},
			want: result{Code: exitInvalid, Stdout: "-:vo/k: \\u202e: key name \"\\u202e\" contains the control or invisible character U+202E: a key that looks like another is refused\n",
				Stderr: "-:vo/k: warning: spec.data.\\u202e.tls: line 9: the unquoted on is the boolean true for kubectl, Helm and Argo CD (YAML 1.1), and Vault gets true: quote it (\"on\") if you meant the text\n"},
		},
		{
			name:  "a name the API server refuses is refused in its words, and printed escaped",
			stdin: "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata: {name: \"a\\u202eb\", namespace: vo}\nspec: {path: ohmlab/a}\n",
			args:  []string{"validate", "-"},
			want: result{Code: exitInvalid, Stdout: "-:vo/a\\u202eb: metadata.name: Invalid value: \"a\\u202eb\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', " +
				"and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'): kubectl apply refuses it\n"},
		},
		{
			name:  "an unquoted number that is not kept as written is a warning with its line, never its value",
			stdin: "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata: {name: a, namespace: vo}\nspec:\n  path: ohmlab/a\n  data:\n    port: 5432\n    ratio: 0.5\n    pin: 0755\n    big: 12345678901234567890\n    quoted: \"0755\"\n",
			args:  []string{"validate", "-"},
			want: result{Code: exitValid, Stderr: "-:vo/a: warning: spec.data.pin: line 9: " + numberWarning + "\n" +
				"-:vo/a: warning: spec.data.big: line 10: " + numberWarning + "\n"},
		},
		{
			name:  "empty standard input is unreadable, not valid",
			stdin: " \n\n",
			args:  []string{"validate", "-"},
			want:  result{Code: exitUsage, Stderr: "ohmlab validate: standard input is empty: did the command before the pipe fail? (set -o pipefail)\n"},
		},
		{
			name: "an empty file named on the command line is unreadable, not valid",
			args: []string{"validate", filepath.Join(dir, "empty.yaml")},
			want: result{Code: exitUsage, Stderr: "ohmlab validate: " + filepath.Join(dir, "empty.yaml") + " is empty: did the command that wrote it fail?\n"},
		},
		{
			name:  "a key given twice is a warning with its line",
			stdin: "apiVersion: v1\nkind: ConfigMap\n---\n# Source: x\n" + vaultSeed("a", "  path: ohmlab/a\n  data:\n    user: <uuid>\n    user: <random:8>\n"),
			args:  []string{"validate", "-"},
			want:  result{Code: exitValid, Stderr: "-:vo/a: warning: line 14: key \"user\" is given twice in its mapping: kubectl applies only the last one\n"},
		},
		{
			name:  "a misspelled kind is reported, not skipped",
			stdin: "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeeed\nmetadata: {name: a, namespace: vo}\nspec: {path: ohmlab/a}\n",
			args:  []string{"validate", "-"},
			want:  result{Code: exitInvalid, Stdout: "-:vo/a: kind: ohmlab.fr/v1alpha1 VaultSeeed is not a kind ohmlab knows: use ohmlab.fr/v1alpha1 VaultSeed\n"},
		},
		{
			name:  "no VaultSeed is valid and says so",
			stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n\n---\n# nothing\n---\n",
			args:  []string{"validate", "-"},
			want:  result{Code: exitValid, Stderr: "ohmlab validate: no VaultSeed found\n"},
		},
		{
			name:  "what the API server's message quotes is printed escaped too",
			stdin: "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata: {name: a, namespace: vo, finalizers: [orphan, foregroundDeletion, \"ex.com/a\\u202eb\"]}\nspec: {path: ohmlab/a}\n",
			args:  []string{"validate", "-"},
			want: result{Code: exitInvalid, Stdout: "-:vo/a: metadata.finalizers: Invalid value: \"ex.com/a\\u202eb\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'): kubectl apply refuses it\n" +
				"-:vo/a: metadata.finalizers: Invalid value: [\"orphan\",\"foregroundDeletion\",\"ex.com/a\\u202eb\"]: finalizer orphan and foregroundDeletion cannot be both set: kubectl apply refuses it\n"},
		},
		{
			name:  "a document that is a list is unreadable, not skipped: its objects would pass unchecked",
			stdin: "apiVersion: v1\nkind: ConfigMap\n---\n- apiVersion: ohmlab.fr/v1alpha1\n  kind: VaultSeed\n  metadata: {name: a, namespace: vo}\n",
			args:  []string{"validate", "-"},
			want:  result{Code: exitUsage, Stderr: "ohmlab validate: -:4: the document is a list, not an object: kubectl apply refuses it (several objects go in the items of a List)\n"},
		},
		{
			name:  "a document that is a single value is unreadable",
			stdin: "apiVersion: v1\nkind: ConfigMap\n---\nplain scalar\n",
			args:  []string{"validate", "-"},
			want:  result{Code: exitUsage, Stderr: "ohmlab validate: -:4: the document is a single value, not an object: kubectl apply refuses it\n"},
		},
		{
			name:  "JSON objects one after another are each checked, as kubectl applies each",
			stdin: `{"apiVersion": "ohmlab.fr/v1alpha1", "kind": "VaultSeed", "metadata": {"name": "a", "namespace": "vo"}, "spec": {"path": "ohmlab/a"}}` + "\n" + `{"apiVersion": "ohmlab.fr/v1alpha1", "kind": "VaultSeed", "metadata": {"name": "b", "namespace": "vo"}, "spec": {"path": "ohmlab/b", "data": {"k": "<random:0>"}}}`,
			args:  []string{"validate", "-"},
			want:  result{Code: exitInvalid, Stdout: "-:vo/b: k: <random:N> needs a decimal length N from 1 to 4096, found \"<random:0>\"\n"},
		},
		{
			name:  "JSON with a surrogate pair, as Python writes an emoji, is JSON",
			stdin: `{"apiVersion": "ohmlab.fr/v1alpha1", "kind": "VaultSeed", "metadata": {"name": "a", "namespace": "vo", "annotations": {"owner": "team \\ud83d\\ude80"}}, "spec": {"path": "ohmlab/a"}}`,
			args:  []string{"validate", "-"},
			want:  result{Code: exitValid},
		},
		{
			name:  "JSON followed by something else is unreadable",
			stdin: `{"apiVersion": "ohmlab.fr/v1alpha1", "kind": "VaultSeed", "metadata": {"name": "a", "namespace": "vo"}, "spec": {"path": "ohmlab/a"}}` + " trailing",
			args:  []string{"validate", "-"},
			want:  result{Code: exitUsage, Stderr: "ohmlab validate: -:1: the document is a single value, not an object: kubectl apply refuses it\n"},
		},
		{
			name:  "annotations that client-side apply would take over 256 KiB are a warning",
			stdin: "apiVersion: ohmlab.fr/v1alpha1\nkind: VaultSeed\nmetadata:\n  name: a\n  namespace: vo\n  annotations: {note: " + strings.Repeat("x", 140<<10) + "}\nspec: {path: ohmlab/a}\n",
			args:  []string{"validate", "-"},
			want:  result{Code: exitValid, Stderr: "-:vo/a: warning: metadata.annotations: are 141 KiB and the object 141 KiB of JSON: client-side kubectl apply (and Argo CD's default sync) adds a copy of the object in the annotation kubectl.kubernetes.io/last-applied-configuration, which takes the annotations over the API server's 256 KiB, so kubectl apply refuses it; apply it server-side (kubectl apply --server-side, Argo CD's ServerSideApply=true), or shorten them\n"},
		},
		{
			name:  "-- ends the flags",
			stdin: vaultSeed("a", "  path: ohmlab/a\n"),
			args:  []string{"validate", "--output=json", "--", "-"},
			want:  result{Code: exitValid, Stdout: "{\n  \"valid\": true,\n  \"objects\": 1,\n  \"problems\": [],\n  \"warnings\": []\n}\n"},
		},
		{
			name:  "a YAML syntax error names the file and its line",
			stdin: "apiVersion: v1\nkind: ConfigMap\n---\n# Source: x\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n   bad: indent\n",
			args:  []string{"validate", "-"},
			want:  result{Code: exitUsage, Stderr: "ohmlab validate: -:9: invalid YAML: yaml: mapping values are not allowed in this context\n"},
		},
		{
			name: "a YAML syntax error in a file",
			args: []string{"validate", filepath.Join(dir, "broken.yaml")},
			want: result{Code: exitUsage, Stderr: "ohmlab validate: " + filepath.Join(dir, "broken.yaml") + ":14: invalid YAML: yaml: did not find expected ',' or ']'\n"},
		},
		{
			name: "a missing file",
			args: []string{"validate", filepath.Join(dir, "missing.yaml")},
			want: result{Code: exitUsage, Stderr: "ohmlab validate: stat " + filepath.Join(dir, "missing.yaml") + ": no such file or directory\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCLI(t, tt.stdin, tt.args...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("run (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name             string
		args             []string
		wantCode         int
		wantStdout       string
		wantStderrPrefix string
	}{
		{name: "no command", wantCode: exitUsage, wantStderrPrefix: "Usage:"},
		{name: "unknown command", args: []string{"lint"}, wantCode: exitUsage, wantStderrPrefix: "ohmlab: unknown command \"lint\"\nUsage:"},
		{name: "help", args: []string{"help"}, wantCode: exitValid, wantStdout: usage},
		{name: "version", args: []string{"version"}, wantCode: exitValid, wantStdout: "ohmlab dev (revision unknown)\n"},
		{name: "version with an argument", args: []string{"version", "x"}, wantCode: exitUsage, wantStderrPrefix: "Usage:"},
		{name: "validate without input", args: []string{"validate"}, wantCode: exitUsage, wantStderrPrefix: "ohmlab validate: name the input"},
		{name: "validate with a bad output", args: []string{"validate", "--output", "yaml", "-"}, wantCode: exitUsage, wantStderrPrefix: "ohmlab validate: --output must be text or json"},
		{name: "validate with an unknown flag", args: []string{"validate", "--strict", "-"}, wantCode: exitUsage, wantStderrPrefix: "flag provided but not defined: -strict"},
		{name: "validate -h", args: []string{"validate", "-h"}, wantCode: exitValid, wantStderrPrefix: "Usage:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCLI(t, "", tt.args...)
			if got.Code != tt.wantCode || got.Stdout != tt.wantStdout || !strings.HasPrefix(got.Stderr, tt.wantStderrPrefix) {
				t.Errorf("run = %+v, want code %d, stdout %q, stderr starting with %q", got, tt.wantCode, tt.wantStdout, tt.wantStderrPrefix)
			}
		})
	}
}

// FuzzRead feeds the reader and the verdict arbitrary bytes: they never
// panic, and every object read is a VaultSeed with somewhere to report it.
func FuzzRead(f *testing.F) {
	for _, name := range []string{"testdata/helm-template.yaml", "testdata/helm-template-invalid.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: ohmlab.fr/v1alpha1\n  kind: VaultSeed\n  metadata: {name: a}\n  spec: {path: 1}\n"))
	f.Add([]byte("--- {kind: VaultSeedList, apiVersion: ohmlab.fr/v1alpha1, items: [{spec: {data: {a: [1]}}}]}\n---\n"))
	f.Add([]byte("a: &x [*x]\n---\n\t- :\n"))
	f.Add([]byte(vaultSeed("b", "  path: ohmlab/b\n  data: {c: NO, d: {e: on, e: off}, f: [y]}\n")))
	f.Add([]byte(vaultSeed("p", "  path: \"ohmlab/a/../b \"\n  data: {k: \"<ref:ohmlab/%2e/x#k>\", s: \" <random:8>\", t: \"< uuid >\"}\n")))
	f.Add([]byte(`{"apiVersion": "ohmlab.fr/v1alpha1", "kind": "VaultSeed", "metadata": {"name": "a \ud83d\ude80"}}{"kind": "List", "items": [{}]} x`))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := readStream("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml:") {
				t.Errorf("the error does not name the file: %v", err)
			}
			return
		}
		for _, o := range objs {
			if o.Seed == nil || o.File != "fuzz.yaml" || o.Line < 1 {
				t.Fatalf("object %+v", o)
			}
		}
		rep, _ := check(objs, tenancy.Config{})
		if rep.Valid != (len(rep.Problems) == 0) || rep.Objects != len(objs) {
			t.Errorf("report %+v", rep)
		}
		for _, p := range rep.Problems {
			if p.Key == "" && p.Reason == "" {
				t.Errorf("problem without key or reason: %+v", p)
			}
		}
	})
}

const numberWarning = "this unquoted number is not kept as written: kubectl, Helm and Argo CD (YAML 1.1) send Vault another spelling or another number (a leading 0 is octal, 0x hexadecimal, an exponent is expanded, trailing zeros go, an integer beyond 64 bits is rounded): quote it if you meant the text"

// TestValidateDirFollowsLinksToFiles: a .yaml link in a directory is read
// as the file it names; a dangling one is unreadable, not skipped.
func TestValidateDirFollowsLinksToFiles(t *testing.T) {
	bad := writeTree(t, map[string]string{"bad.yaml": vaultSeed("a", "  path: ohmlab/a\n  data:\n    a.b: x\n")})
	tests := []struct {
		name     string
		target   string
		wantCode int
	}{
		{name: "a link to an invalid file is read", target: filepath.Join(bad, "bad.yaml"), wantCode: exitInvalid},
		{name: "a dangling link is unreadable", target: filepath.Join(bad, "missing.yaml"), wantCode: exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Symlink(tt.target, filepath.Join(dir, "link.yaml")); err != nil {
				t.Fatal(err)
			}
			if got := runCLI(t, "", "validate", dir); got.Code != tt.wantCode {
				t.Errorf("exit code %d, want %d: %+v", got.Code, tt.wantCode, got)
			}
		})
	}
}
