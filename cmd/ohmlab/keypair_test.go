package main

import (
	"crypto/ed25519"
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// TestPlanKeyPairs: ohmlab plan plans key pairs as the controller does (a
// new pair, a public key put back, a rotation of both), with no key work
// and no word of a private key in its output.
func TestPlanKeyPairs(t *testing.T) {
	v := harness.VaultForTest(t)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	sshPrivate := string(pem.EncodeToMemory(block))
	pub, err := ssh.NewPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	sshPublic := strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(pub)), "\n")
	// Both public keys edited by hand: the plan puts them back.
	put(t, v, "pairs", map[string]any{
		"age": map[string]any{"secret": id.String(), "public": "age1edited"},
		"ssh": map[string]any{"private": sshPrivate, "public": "ssh-ed25519 edited"},
	}, owned("pairs"))
	put(t, v, "rotated", map[string]any{"ssh": map[string]any{"private": sshPrivate, "public": sshPublic}},
		map[string]any{ohmlabv1alpha1.OwnerMetadataKey: "vo/rotated", ohmlabv1alpha1.RotationTokenMetadataKey: "t1"})
	pair := "  data:\n    age:\n      secret: \"<age:secret>\"\n      public: \"<age:public>\"\n    ssh:\n      private: \"<ssh:private>\"\n      public: \"<ssh:public>\"\n"
	objects := strings.Join([]string{
		vaultSeed("new", "  path: "+planPath("new")+"\n"+pair),
		vaultSeed("pairs", "  path: "+planPath("pairs")+"\n"+pair),
		vaultSeed("rotated", "  path: "+planPath("rotated")+"\n  data:\n    ssh:\n      private: \"<ssh:private>\"\n      public: \"<ssh:public>\"\n  rotate:\n    token: t2\n    keys: [ssh.private]\n"),
	}, "---\n")
	setVault(t, v, harness.VaultRootToken)
	before := snapshot(t, v)

	got := runCLI(t, objects, "plan", "-")

	p := planPath
	want := result{Code: planChanges, Stdout: "vo/new " + p("new") + ": 1 create, 4 create-field (age.public, age.secret, ssh.private, ssh.public)\n" +
		"vo/pairs " + p("pairs") + ": 2 update-field (age.public, ssh.public)\n" +
		"vo/rotated " + p("rotated") + ": 1 update-field (ssh.public), 1 rotate (ssh.private), 1 record-token\n" +
		"Plan: 3 objects: 3 with changes (1 create, 4 create-field, 3 update-field, 1 rotate, 1 record-token), 0 would wait, 0 would stall, 0 in sync.\n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ohmlab plan (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, snapshot(t, v)); diff != "" {
		t.Errorf("plan changed Vault's metadata or versions (-before +after):\n%s", diff)
	}
	out := got.Stdout + got.Stderr
	for _, s := range append([]string{id.String(), "AGE-SECRET-KEY-1", "PRIVATE KEY-----"}, strings.Split(sshPrivate, "\n")...) {
		if len(s) >= 8 && strings.Contains(out, s) {
			t.Errorf("the output holds a private key or its marker: %.3s…", s)
		}
	}
}

// The sample of docs/users/argocd-repository.md is valid.
func TestValidateArgoCDRepositorySample(t *testing.T) {
	got := runCLI(t, "", "validate", filepath.Join("..", "..", "config", "samples", "production-core-argocd-repository.yaml"))
	if diff := cmp.Diff(result{Code: exitValid}, got); diff != "" {
		t.Errorf("ohmlab validate (-want +got):\n%s", diff)
	}
}
