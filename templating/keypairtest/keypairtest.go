// Package keypairtest holds what tests of key pair templates share: each
// kind, and how its own library reads a private key.
package keypairtest

import (
	"bytes"

	"filippo.io/age"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
)

// Kind is one kind of key pair template: the two kinds go through the same
// steps in the planner's and the reconciler's tests.
type Kind struct {
	Name            string
	Private, Public string // the templates
	// PublicOf reads a private key with the pair's own library and returns
	// its public key in the template's format.
	PublicOf func(g Gomega, private string) string
}

// Kinds are every key pair template.
var Kinds = []Kind{
	{Name: "age", Private: "<age:secret>", Public: "<age:public>", PublicOf: func(g Gomega, private string) string {
		id, err := age.ParseX25519Identity(private)
		g.Expect(err).NotTo(HaveOccurred(), "age parses the secret")
		return id.Recipient().String()
	}},
	{Name: "ssh", Private: "<ssh:private>", Public: "<ssh:public>", PublicOf: func(g Gomega, private string) string {
		g.Expect(private).To(HavePrefix("-----BEGIN OPENSSH PRIVATE KEY-----\n"))
		signer, err := ssh.ParsePrivateKey([]byte(private))
		g.Expect(err).NotTo(HaveOccurred(), "ssh.ParsePrivateKey parses the private key")
		g.Expect(signer.PublicKey().Type()).To(Equal(ssh.KeyAlgoED25519))
		return string(bytes.TrimSuffix(ssh.MarshalAuthorizedKey(signer.PublicKey()), []byte("\n")))
	}},
}
