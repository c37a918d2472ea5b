package vaultseed

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// rulePolicy is a Vault password policy: 24 characters of letters, digits
// and "!#", at least 2 digits and 1 of "!#".
const rulePolicy = `
length = 24
rule "charset" {
  charset = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#"
}
rule "charset" {
  charset = "0123456789"
  min-chars = 2
}
rule "charset" {
  charset = "!#"
  min-chars = 1
}
`

// followsRulePolicy says whether v is a value rulePolicy generates; it
// never shows v.
func followsRulePolicy(v any) bool {
	s, ok := v.(string)
	return ok && regexp.MustCompile(`^[A-Za-z0-9!#]{24}$`).MatchString(s) &&
		len(regexp.MustCompile(`[0-9]`).FindAllString(s, -1)) >= 2 && strings.ContainsAny(s, "!#")
}

// TestVaultPasswordPolicy: a <vault-password:policy> key is seeded once
// from Vault's own password policy endpoint, rotated by a new token, and a
// policy Vault does not have is reported on the object with the key, and
// nothing is written. A <password:N:classes> key beside it holds its
// classes.
func TestVaultPasswordPolicy(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{resync: time.Second})
	policy := f.ns + "-db"
	if _, err := vault.Client.Logical().Write("sys/policies/password/"+policy, map[string]any{"policy": rulePolicy}); err != nil {
		t.Fatal(err)
	}
	path := f.path("db")
	obj := f.seed("db", path, `{"db": {"password": "<vault-password:`+policy+`>", "local": "<password:20:upper,lower,digit,symbol>"}}`)
	obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: "t1", Keys: []string{"db.password"}}
	f.create(obj)
	f.waitReady("db")

	seeded := readPath(t, path)
	g.Expect(seeded.Version).To(Equal(1))
	password := leaf(seeded.Data, "db.password")
	g.Expect(followsRulePolicy(password)).To(BeTrue(), "db.password follows the Vault policy")
	local, _ := leaf(seeded.Data, "db.local").(string)
	g.Expect(len(local) == 20 && strings.ContainsAny(local, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") && strings.ContainsAny(local, "abcdefghijklmnopqrstuvwxyz") &&
		strings.ContainsAny(local, "0123456789") && strings.ContainsAny(local, "-._~")).To(BeTrue(), "db.local holds each of its classes")
	g.Consistently(func() int { return readPath(t, path).Version }).WithTimeout(2*time.Second).Should(Equal(1),
		"seeded once: later resyncs ask Vault for nothing new")

	f.update("db", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Rotate.Token = "t2" })
	g.Eventually(func() int { return readPath(t, path).Version }).WithTimeout(10 * time.Second).Should(Equal(2))
	f.waitReady("db")
	rotated := readPath(t, path)
	g.Expect(followsRulePolicy(leaf(rotated.Data, "db.password"))).To(BeTrue(), "the rotated db.password follows the Vault policy")
	g.Expect(leaf(rotated.Data, "db.password") != password).To(BeTrue(), "the rotation asked Vault for a new password")
	g.Expect(leaf(rotated.Data, "db.local") == local).To(BeTrue(), "db.local is not listed in rotate.keys")

	missing := f.path("missing")
	f.create(f.seed("missing", missing, `{"password": "<vault-password:`+f.ns+`-nope>"}`))
	got := f.waitReason("missing", ohmlabv1alpha1.ReasonBackendError, 20*time.Second)
	msg := apimeta.FindStatusCondition(got.Status.Conditions, ohmlabv1alpha1.ConditionReady).Message
	g.Expect(msg).To(And(ContainSubstring("generating password: <vault-password:"+f.ns+"-nope>"), ContainSubstring("policy does not exist")))
	mount, rest, _ := strings.Cut(missing, "/")
	_, err := vault.Client.KVv2(mount).Get(context.Background(), rest)
	g.Expect(err).To(HaveOccurred(), "nothing is written for a key Vault cannot generate")

	assertNoValueEmitted(t, f, seeded.Data)
	assertNoValueEmitted(t, f, rotated.Data)
}
