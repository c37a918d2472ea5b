package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	vaultapi "github.com/hashicorp/vault/api"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// planPath is a path of the tests' Vault, under platforms/+/+/ of the ohmlab
// mount.
func planPath(name string) string { return "ohmlab/platforms/p/core/" + name }

// put writes a path with the root token (as the old Job or a person did)
// and merges custom_metadata into it when md is not nil.
func put(t *testing.T, v *harness.Vault, name string, data map[string]any, md map[string]any) {
	t.Helper()
	ctx := context.Background()
	kv := v.Client.KVv2(harness.VaultMount)
	rest := strings.TrimPrefix(planPath(name), harness.VaultMount+"/")
	if _, err := kv.Put(ctx, rest, data); err != nil {
		t.Fatal(err)
	}
	if md != nil {
		if err := kv.PatchMetadata(ctx, rest, vaultapi.KVMetadataPatchInput{CustomMetadata: md}); err != nil {
			t.Fatal(err)
		}
	}
}

// owned is the owner marker of object vo/<name>.
func owned(name string) map[string]any {
	return map[string]any{ohmlabv1alpha1.OwnerMetadataKey: "vo/" + name}
}

// tokenWithPolicy creates a Vault token whose only policy is hcl.
func tokenWithPolicy(t *testing.T, v *harness.Vault, name, hcl string) string {
	t.Helper()
	if err := v.Client.Sys().PutPolicy(name, hcl); err != nil {
		t.Fatal(err)
	}
	s, err := v.Client.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{name}, NoDefaultPolicy: true, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	return s.Auth.ClientToken
}

// snapshot is every path's metadata, as the root token reads it: versions,
// times and custom_metadata. A write or a metadata change alters it.
func snapshot(t *testing.T, v *harness.Vault) map[string]any {
	t.Helper()
	out := map[string]any{}
	keys, err := v.Client.Logical().List("ohmlab/metadata/platforms/p/core")
	if err != nil || keys == nil {
		t.Fatalf("listing the paths: %v", err)
	}
	for _, k := range keys.Data["keys"].([]any) {
		s, err := v.Client.Logical().Read("ohmlab/metadata/platforms/p/core/" + k.(string))
		if err != nil {
			t.Fatal(err)
		}
		out[k.(string)] = s.Data
	}
	return out
}

// Every value the tests write to Vault: none may appear in plan's output.
var planValues = []string{"adopt-user-typed", "adopt-webhook-typed", "update-password-typed", "not-a-bcrypt-hash",
	"prune-keep-typed", "prune-keep-edited", "prune-old-typed", "rotate-password-typed", "owned-typed", "deleted-typed", "insync-typed", "src-typed", "waiting-copy-typed"}

// seedEveryAction writes the paths of planObjects: one object per action
// kind and per reason to wait or stall.
func seedEveryAction(t *testing.T, v *harness.Vault) {
	put(t, v, "adopt", map[string]any{"user": "adopt-user-typed", "webhook": "adopt-webhook-typed"}, nil)
	put(t, v, "update", map[string]any{"password": "update-password-typed", "hash": "not-a-bcrypt-hash"}, owned("update"))
	// The controller wrote old at version 1; a person changed keep since,
	// so the prune reads version 1 to see that old is unchanged.
	put(t, v, "prune", map[string]any{"keep": "prune-keep-typed", "old": "prune-old-typed"}, owned("prune"))
	put(t, v, "prune", map[string]any{"keep": "prune-keep-edited", "old": "prune-old-typed"}, nil)
	put(t, v, "rotate", map[string]any{"password": "rotate-password-typed"},
		map[string]any{ohmlabv1alpha1.OwnerMetadataKey: "vo/rotate", ohmlabv1alpha1.RotationTokenMetadataKey: "t1"})
	put(t, v, "owned", map[string]any{"a": "owned-typed"}, map[string]any{ohmlabv1alpha1.OwnerMetadataKey: "vo/someone-else"})
	put(t, v, "deleted", map[string]any{"a": "deleted-typed"}, nil)
	if err := v.Client.KVv2(harness.VaultMount).Delete(context.Background(), "platforms/p/core/deleted"); err != nil {
		t.Fatal(err)
	}
	put(t, v, "insync", map[string]any{"a": "insync-typed"}, owned("insync"))
	// A copy that exists while its source is missing: the rest of the path
	// is still maintained.
	put(t, v, "waiting", map[string]any{"copy": "waiting-copy-typed"}, owned("waiting"))
}

// planObjects are the objects of seedEveryAction, as a rendered chart (and
// for prune, kubectl get -o yaml, which carries status) would give them.
var planObjects = strings.Join([]string{
	vaultSeed("create", "  path: "+planPath("create")+"\n  data:\n    password: \"<random:16>\"\n"),
	vaultSeed("adopt", "  path: "+planPath("adopt")+"\n  data:\n    user: admin\n    webhook: \"\"\n    token: \"<random:8>\"\n"),
	vaultSeed("update", "  path: "+planPath("update")+"\n  data:\n    password: \"\"\n    hash: \"<bcrypt:password>\"\n"),
	vaultSeed("prune", "  path: "+planPath("prune")+"\n  prune: true\n  data:\n    keep: \"\"\nstatus:\n  managedKeys:\n  - key: old\n    version: 1\n"),
	vaultSeed("rotate", "  path: "+planPath("rotate")+"\n  data:\n    password: \"<random:12>\"\n  rotate:\n    token: t2\n    keys: [password]\n"),
	vaultSeed("owned", "  path: "+planPath("owned")+"\n  data:\n    a: \"\"\n"),
	vaultSeed("deleted", "  path: "+planPath("deleted")+"\n  data:\n    a: \"\"\n"),
	vaultSeed("pending", "  path: "+planPath("pending")+"\n  data:\n    copy: \"<ref:"+planPath("nowhere")+"#k>\"\n"),
	vaultSeed("insync", "  path: "+planPath("insync")+"\n  data:\n    a: \"\"\n"),
	vaultSeed("held", "  path: "+planPath("held")+"\n  data:\n    x: \"\"\n    xHash: \"<bcrypt:x>\"\n    other: \"<random:10>\"\n"),
	vaultSeed("waiting", "  path: "+planPath("waiting")+"\n  data:\n    copy: \"<ref:"+planPath("nowhere")+"#k>\"\n    extra: \"<random:6>\"\n"),
}, "---\n")

// ownedByAnother is the OwnedByAnother message of planObjects' object name.
func ownedByAnother(name string) string {
	return "the path is owned by vo/someone-else (custom_metadata ohmlab.fr/owner): delete one of the two objects, or hand the path over with: vault kv metadata patch -remove-custom-metadata=ohmlab.fr/owner " + planPath(name)
}

func setVault(t *testing.T, v *harness.Vault, token string) {
	t.Setenv("VAULT_ADDR", v.Addr)
	t.Setenv("VAULT_TOKEN", token)
	t.Setenv("VAULT_CACERT", "")
}

// TestPlanEveryAction plans one object per action kind and per reason to
// wait or stall against a real Vault, with a token whose policy grants read
// on the data paths and nothing else, and checks that nothing changed in
// Vault and that no value appears.
func TestPlanEveryAction(t *testing.T) {
	v := harness.VaultForTest(t)
	seedEveryAction(t, v)
	tokenFile := filepath.Join(t.TempDir(), "token")
	token := tokenWithPolicy(t, v, "plan-read", `path "ohmlab/data/*" { capabilities = ["read"] }`)
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	setVault(t, v, "")
	before := snapshot(t, v)

	got := runCLI(t, planObjects, "plan", "--token-file", tokenFile, "-")

	p := planPath
	want := result{Code: planChanges, Stdout: "vo/create " + p("create") + ": 1 create, 1 create-field (password)\n" +
		"vo/adopt " + p("adopt") + ": 1 adopt, 1 create-field (token)\n" +
		"vo/update " + p("update") + ": 1 update-field (hash)\n" +
		"vo/prune " + p("prune") + ": 1 delete-field (old)\n" +
		"vo/rotate " + p("rotate") + ": 1 rotate (password), 1 record-token\n" +
		"vo/held " + p("held") + ": 1 create, 2 create-field (other, x); the rest stalls: InvalidSpec: xHash: cannot be computed while x is empty; fill it in (vault kv patch " + p("held") + " x=...)\n" +
		"vo/waiting " + p("waiting") + ": 1 create-field (extra); the rest waits: RefPending: waiting for " + p("nowhere") + "#k (path missing)\n" +
		"vo/owned " + p("owned") + ": would stall: OwnedByAnother: " + ownedByAnother("owned") + "\n" +
		"vo/deleted " + p("deleted") + ": would stall: PathDeleted: the latest version (1) of the path is deleted: undelete it (vault kv undelete -versions=1 " + p("deleted") + "), or delete the path's metadata (vault kv metadata delete " + p("deleted") + ") to have it created anew\n" +
		"vo/pending " + p("pending") + ": would wait: RefPending: waiting for " + p("nowhere") + "#k (path missing)\n" +
		"Plan: 11 objects: 7 with changes (2 create, 1 adopt, 5 create-field, 1 update-field, 1 delete-field, 1 rotate, 1 record-token), 2 would wait, 3 would stall, 1 in sync.\n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ohmlab plan (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, snapshot(t, v)); diff != "" {
		t.Errorf("plan changed Vault's metadata or versions (-before +after):\n%s", diff)
	}
	for _, value := range planValues {
		if strings.Contains(got.Stdout+got.Stderr, value) {
			t.Errorf("the output holds the value %q", value)
		}
	}
}

// TestPlanJSON: --output json gives each object's state, reason, message
// and actions, the totals, and validate's report.
func TestPlanJSON(t *testing.T) {
	v := harness.VaultForTest(t)
	seedEveryAction(t, v)
	setVault(t, v, harness.VaultRootToken)
	got := runCLI(t, planObjects, "plan", "-", "--output", "json")
	if got.Code != planChanges {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", got.Code, planChanges, got.Stderr)
	}
	var rep planReport
	if err := json.Unmarshal([]byte(got.Stdout), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, got.Stdout)
	}
	type row struct {
		Name, State, Reason, Actions string
		Changes                      bool
		Held                         string // "<reason>: <message>" of held
	}
	var rows []row
	for _, o := range rep.Objects {
		var acts []string
		for _, a := range o.Actions {
			acts = append(acts, strings.TrimSuffix(a.Action+" "+a.Key, " "))
		}
		r := row{Name: o.Name, State: o.State, Reason: o.Reason, Actions: strings.Join(acts, ", "), Changes: o.Changes}
		if o.Held != nil {
			r.Held = o.Held.Reason + ": " + o.Held.Message
		}
		rows = append(rows, r)
	}
	p := planPath
	pending := "RefPending: waiting for " + p("nowhere") + "#k (path missing)"
	// An object that waits or stalls on some keys and writes the others
	// says both: its writes (changes, actions) and why the rest waits
	// (held), as its Drifted message does.
	wantRows := []row{
		{"create", "changes", "ObserveOnly", "create, create-field password", true, ""},
		{"adopt", "changes", "ObserveOnly", "adopt, create-field token", true, ""},
		{"update", "changes", "ObserveOnly", "update-field hash", true, ""},
		{"prune", "changes", "ObserveOnly", "delete-field old", true, ""},
		{"rotate", "changes", "ObserveOnly", "rotate password, record-token", true, ""},
		{"owned", "stalls", "OwnedByAnother", "", false, "OwnedByAnother: " + ownedByAnother("owned")},
		{"deleted", "stalls", "PathDeleted", "", false, "PathDeleted: the latest version (1) of the path is deleted: undelete it (vault kv undelete -versions=1 " + p("deleted") + "), or delete the path's metadata (vault kv metadata delete " + p("deleted") + ") to have it created anew"},
		{"pending", "waits", "RefPending", "", false, pending},
		{"insync", "in-sync", "InSync", "", false, ""},
		{"held", "stalls", "ObserveOnly", "create, create-field other, create-field x", true, "InvalidSpec: xHash: cannot be computed while x is empty; fill it in (vault kv patch " + p("held") + " x=...)"},
		{"waiting", "waits", "ObserveOnly", "create-field extra", true, pending},
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	wantTotal := planTotal{Objects: 11, Changes: 7, Waits: 2, Stalls: 3, InSync: 1, Actions: map[string]int{
		"create": 2, "adopt": 1, "create-field": 5, "update-field": 1, "delete-field": 1, "rotate": 1, "record-token": 1}}
	if diff := cmp.Diff(wantTotal, rep.Total); diff != "" {
		t.Errorf("total (-want +got):\n%s", diff)
	}
	var verdict report
	if err := json.Unmarshal(rep.Validation, &verdict); err != nil || !verdict.Valid || verdict.Objects != 11 {
		t.Errorf("validation %s: want validate's report, valid, 11 objects (%v)", rep.Validation, err)
	}
	for _, value := range planValues {
		if strings.Contains(got.Stdout+got.Stderr, value) {
			t.Errorf("the output holds the value %q", value)
		}
	}
}

// TestPlanRefsInOneStream: a copy whose source another object of the input
// creates is planned after it, against what its plan would write, as the
// controller converges; a copy of a path nobody creates waits.
func TestPlanRefsInOneStream(t *testing.T) {
	v := harness.VaultForTest(t)
	put(t, v, "rotated-src", map[string]any{"key": "src-typed"}, map[string]any{ohmlabv1alpha1.OwnerMetadataKey: "vo/rotated-src", ohmlabv1alpha1.RotationTokenMetadataKey: "t1"})
	put(t, v, "rotated-copy", map[string]any{"copy": "src-typed"}, owned("rotated-copy"))
	setVault(t, v, harness.VaultRootToken)
	p := planPath
	stdin := strings.Join([]string{
		// Dependents first: the order of the input does not matter.
		vaultSeed("dep", "  path: "+p("dep")+"\n  data:\n    copy: \"<ref:"+p("src")+"#key>\"\n"),
		vaultSeed("src", "  path: "+p("src")+"\n  data:\n    key: \"<random:16>\"\n"),
		vaultSeed("rotated-copy", "  path: "+p("rotated-copy")+"\n  data:\n    copy: \"<ref:"+p("rotated-src")+"#key>\"\n"),
		vaultSeed("rotated-src", "  path: "+p("rotated-src")+"\n  data:\n    key: \"<random:16>\"\n  rotate:\n    token: t2\n"),
		vaultSeed("orphan", "  path: "+p("orphan")+"\n  data:\n    copy: \"<ref:"+p("nobody")+"#key>\"\n"),
	}, "---\n")
	got := runCLI(t, stdin, "plan", "-")
	want := result{Code: planChanges, Stdout: "vo/dep " + p("dep") + ": 1 create, 1 create-field (copy); after vo/src\n" +
		"vo/src " + p("src") + ": 1 create, 1 create-field (key)\n" +
		"vo/rotated-copy " + p("rotated-copy") + ": 1 update-field (copy); after vo/rotated-src\n" +
		"vo/rotated-src " + p("rotated-src") + ": 1 rotate (key), 1 record-token\n" +
		"vo/orphan " + p("orphan") + ": would wait: RefPending: waiting for " + p("nobody") + "#key (path missing)\n" +
		"Plan: 5 objects: 4 with changes (2 create, 2 create-field, 1 update-field, 1 rotate, 1 record-token), 1 would wait, 0 would stall, 0 in sync.\n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ohmlab plan (-want +got):\n%s", diff)
	}
}

// TestPlanVaultCannotBeRead: an object whose path Vault refuses to read (a
// token whose policy does not cover it, an invalid token) or answers with
// an error (a server that is not Vault) is listed as unreadable, with the
// reason a reconcile would report and Vault's error, also on standard
// error, and the others are planned; the exit code is 3, not everything
// could be planned. A Vault that does not answer stops at the first read:
// no other read could succeed.
func TestPlanVaultCannotBeRead(t *testing.T) {
	v := harness.VaultForTest(t)
	p := planPath
	stdin := vaultSeed("a", "  path: "+p("a")+"\n  data:\n    k: \"<random:4>\"\n") + "---\n" +
		vaultSeed("b", "  path: "+p("b")+"\n  data:\n    k: \"<random:4>\"\n") + "---\n" +
		// A copy of b: its source cannot be read either.
		vaultSeed("c", "  path: "+p("c")+"\n  data:\n    k: \"<ref:"+p("b")+"#k>\"\n")
	token := tokenWithPolicy(t, v, "only-a-c", `path "ohmlab/data/platforms/p/core/a" { capabilities = ["read"] }
path "ohmlab/data/platforms/p/core/c" { capabilities = ["read"] }`)
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// A server that is not Vault, answering 404 with an empty body (as some
	// proxies do for a wrong address): every path is not "absent".
	notVault := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notVault.Close)
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	t.Cleanup(empty.Close)
	// unreadable is an object's line on standard output, and on standard
	// error, for a read of path that failed with reason.
	unreadable := func(name, reason, path, why string) (string, string) {
		err := "vaultkv: read " + path + ": " + why
		return "vo/" + name + " " + p(name) + ": cannot be read: " + reason + ": " + err + "\n",
			"ohmlab plan: Vault could not be read: vo/" + name + " " + p(name) + ": " + err + "\n"
	}
	every := func(reason, why string) result {
		var r result
		for _, name := range []string{"a", "b", "c"} {
			// Each object's own path is read first.
			out, errLine := unreadable(name, reason, p(name), why)
			r.Stdout += out
			r.Stderr += errLine
		}
		r.Code, r.Stdout = planNoVault, r.Stdout+"Plan: 3 objects: 0 with changes, 0 would wait, 0 would stall, 0 in sync, 3 could not be read.\n"
		return r
	}
	bOut, bErr := unreadable("b", "Forbidden", p("b"), "forbidden (403): permission denied")
	cOut, cErr := unreadable("c", "Forbidden", p("b"), "forbidden (403): permission denied")
	tests := []struct {
		name, addr, token string
		want              result
	}{
		{"a server that answers an empty 404", empty.URL, token, every("BackendError", "not_found (404): not found")},
		{"a server that answers a text 404", notVault.URL, token, every("BackendError", "not_found (404): not found")},
		{"a policy that refuses the read of one path", v.Addr, token, result{Code: planNoVault,
			Stdout: "vo/a " + p("a") + ": 1 create, 1 create-field (k)\n" + bOut + cOut +
				"Plan: 3 objects: 1 with changes (1 create, 1 create-field), 0 would wait, 0 would stall, 0 in sync, 2 could not be read.\n",
			Stderr: bErr + cErr}},
		{"an invalid token", v.Addr, "not-a-token", every("Forbidden", "forbidden (403): permission denied; invalid token")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("VAULT_ADDR", tt.addr)
			t.Setenv("VAULT_TOKEN", tt.token)
			if diff := cmp.Diff(tt.want, runCLI(t, stdin, "plan", "-")); diff != "" {
				t.Errorf("ohmlab plan (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("JSON: state unreadable, with the reason and Vault's error", func(t *testing.T) {
		t.Setenv("VAULT_ADDR", v.Addr)
		t.Setenv("VAULT_TOKEN", token)
		got := runCLI(t, stdin, "plan", "--output", "json", "-")
		var rep planReport
		if err := json.Unmarshal([]byte(got.Stdout), &rep); err != nil || got.Code != planNoVault {
			t.Fatalf("exit %d, stdout %s (%v)", got.Code, got.Stdout, err)
		}
		type row struct{ Name, State, Reason, Message string }
		var rows []row
		for _, o := range rep.Objects {
			rows = append(rows, row{o.Name, o.State, o.Reason, o.Message})
		}
		want := []row{
			{"a", "changes", "ObserveOnly", "1 create, 1 create-field (k)"},
			{"b", "unreadable", "Forbidden", "vaultkv: read " + p("b") + ": forbidden (403): permission denied"},
			{"c", "unreadable", "Forbidden", "vaultkv: read " + p("b") + ": forbidden (403): permission denied"},
		}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("objects (-want +got):\n%s", diff)
		}
		if rep.Total.Unreadable != 2 || rep.Total.Changes != 1 {
			t.Errorf("total %+v, want 2 unreadable and 1 with changes", rep.Total)
		}
	})
	t.Run("nothing listening: the first failed read, no plan", func(t *testing.T) {
		t.Setenv("VAULT_ADDR", "http://127.0.0.1:"+strconv.Itoa(port))
		t.Setenv("VAULT_TOKEN", token)
		got := runCLI(t, stdin, "plan", "-")
		const want = "ohmlab plan: Vault could not be read: vo/a " // the first object, and only it
		if got.Code != planNoVault || got.Stdout != "" || !strings.HasPrefix(got.Stderr, want) || !strings.Contains(got.Stderr, "connection refused") || strings.Count(got.Stderr, "\n") != 1 {
			t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing, one line %q... connection refused", got.Code, got.Stdout, got.Stderr, planNoVault, want)
		}
	})
}

// TestPlanInvalidObjects: invalid objects exit 1 with validate's lines,
// before any Vault is needed.
func TestPlanInvalidObjects(t *testing.T) {
	t.Setenv("VAULT_ADDR", "")
	stdin := readFile(t, "testdata/helm-template-invalid.yaml")
	for _, output := range []string{"text", "json"} {
		t.Run(output, func(t *testing.T) {
			validate := runCLI(t, stdin, "validate", "--output", output, "-")
			got := runCLI(t, stdin, "plan", "--output", output, "-")
			if got.Code != planError || validate.Code != exitInvalid {
				t.Errorf("exit code %d (validate %d), want %d", got.Code, validate.Code, planError)
			}
			if diff := cmp.Diff(validate.Stdout, got.Stdout); diff != "" || got.Stdout == "" {
				t.Errorf("stdout is not validate's (-validate +plan):\n%s", diff)
			}
		})
	}
}

func TestPlanUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		wantOut  string // a part of stdout
		wantErr  string // a part of stderr
	}{
		{"help", []string{"plan", "--help"}, nil, 0, "Exit codes: 0 nothing to change, 2 changes", ""},
		{"no VaultSeed: nothing to read", []string{"plan", os.DevNull}, map[string]string{"VAULT_ADDR": ""}, planInSync,
			"Plan: 0 objects: 0 with changes, 0 would wait, 0 would stall, 0 in sync.\n", "no VaultSeed found"},
		{"no input", []string{"plan"}, nil, planError, "", "name the input"},
		{"bad output", []string{"plan", "--output", "yaml", "-"}, nil, planError, "", "--output must be text or json"},
		{"no address", []string{"plan", "-"}, map[string]string{"VAULT_ADDR": ""}, planError, "", "VAULT_ADDR is not set"},
		{"no token", []string{"plan", "-"}, map[string]string{"VAULT_ADDR": "http://127.0.0.1:1", "VAULT_TOKEN": ""}, planError, "", "set VAULT_TOKEN or pass --token-file"},
		{"a token file that cannot be read", []string{"plan", "--token-file", "/nonexistent/token", "-"}, map[string]string{"VAULT_ADDR": "http://127.0.0.1:1"},
			planError, "", "--token-file: open /nonexistent/token: no such file or directory"},
		{"an empty token file", []string{"plan", "--token-file", os.DevNull, "-"}, map[string]string{"VAULT_ADDR": "http://127.0.0.1:1"},
			planError, "", "--token-file: " + os.DevNull + " is empty"},
		{"a CA bundle that cannot be read", []string{"plan", "-"}, map[string]string{"VAULT_ADDR": "https://127.0.0.1:1", "VAULT_TOKEN": "t", "VAULT_CACERT": "/nonexistent/ca.pem"},
			planError, "", "reading the CA bundle: open /nonexistent/ca.pem: no such file or directory"},
	}
	stdin := vaultSeed("a", "  path: ohmlab/a\n")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			got := runCLI(t, stdin, tt.args...)
			if got.Code != tt.wantCode || !strings.Contains(got.Stdout, tt.wantOut) || !strings.Contains(got.Stderr, tt.wantErr) {
				t.Errorf("got %+v; want code %d, stdout with %q, stderr with %q", got, tt.wantCode, tt.wantOut, tt.wantErr)
			}
		})
	}
}

// TestPlanSaysAPruneCannotBePlannedWithoutStatus: a rendered object with
// prune: true has no status.managedKeys, so plan cannot tell what a real run
// of the live object prunes: it says so on standard error, and how to plan
// the live objects instead.
func TestPlanSaysAPruneCannotBePlannedWithoutStatus(t *testing.T) {
	v := harness.VaultForTest(t)
	setVault(t, v, harness.VaultRootToken)
	got := runCLI(t, vaultSeed("rendered", "  path: "+planPath("rendered")+"\n  prune: true\n  data:\n    a: \"\"\n"), "plan", "-")
	if got.Code != planChanges {
		t.Errorf("exit %d, want %d (the path would be created)", got.Code, planChanges)
	}
	want := "ohmlab plan: vo/rendered: prune: true, but the input has no status.managedKeys: no prune is planned; to see what a real run prunes, plan the live objects (kubectl get vaultseeds -A -o yaml | ohmlab plan -)\n"
	if diff := cmp.Diff(want, got.Stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}
