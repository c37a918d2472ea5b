package templating

import (
	"crypto/ed25519"
	cryptorand "crypto/rand"
	"encoding/pem"
	"errors"
	"strings"
	"sync"

	"filippo.io/age"
	"golang.org/x/crypto/ssh"
)

// keyPair is a kind of key pair template: a private key drawn from
// crypto/rand and the public key derived from it (product document,
// "Templates": within one path the two always belong together). Every rule
// about pairs is written once, over [keyPairs]: one private key per object,
// a public key needs it ([Analyse]), a public key rotates through its
// private key, and is created or put back when missing or different from
// the private key's ([Generator.Fill]).
type keyPair struct {
	// name is the template name, "age" in <age:secret>.
	name string
	// private, public are the kinds of the two templates, and their
	// arguments.
	private, public       Kind
	privateArg, publicArg string
	// privateLen is the length in bytes of a generated private key: more
	// than bcrypt takes.
	privateLen int
	// what names a private key in messages, without any of it.
	what string
	// generate draws a new private key from crypto/rand.
	generate func() (string, error)
	// derive returns the public key of a private key; its error never holds
	// any of the private key.
	derive func(private string) (string, error)
	// dry is the private key of every dry Generate, made once per process.
	dry func() (string, error)
}

func (p *keyPair) privateTemplate() string { return "<" + p.name + ":" + p.privateArg + ">" }
func (p *keyPair) publicTemplate() string  { return "<" + p.name + ":" + p.publicArg + ">" }

// keyPairs are the key pair templates: <age:secret>/<age:public> and
// <ssh:private>/<ssh:public>.
var keyPairs = []*keyPair{
	{
		name: "age", private: KindAgeSecret, public: KindAgePublic, privateArg: "secret", publicArg: "public",
		privateLen: 74, what: ageWhat,
		generate: generateAge, derive: AgePublic, dry: sync.OnceValues(generateAge),
	},
	{
		name: "ssh", private: KindSSHPrivate, public: KindSSHPublic, privateArg: "private", publicArg: "public",
		privateLen: sshPrivateLen, what: sshWhat,
		generate: generateSSH, derive: SSHPublic, dry: sync.OnceValues(generateSSH),
	},
}

// pairOf returns the key pair whose private or public kind k is, or nil.
func pairOf(k Kind) *keyPair {
	for _, p := range keyPairs {
		if k == p.private || k == p.public {
			return p
		}
	}
	return nil
}

// pairNamed returns the key pair of template name name, or nil.
func pairNamed(name string) *keyPair {
	for _, p := range keyPairs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// isPrivate reports whether k is the private kind of a key pair.
func isPrivate(k Kind) bool {
	p := pairOf(k)
	return p != nil && p.private == k
}

// isPublic reports whether k is the public kind of a key pair.
func isPublic(k Kind) bool {
	p := pairOf(k)
	return p != nil && p.public == k
}

// privateKeys are the keys of a's private keys, by key pair, in key order.
func privateKeys(a Analysis) map[*keyPair][]string {
	out := map[*keyPair][]string{}
	for _, k := range a.Keys {
		if kind := a.Leaves[k].Kind; isPrivate(kind) {
			p := pairOf(kind)
			out[p] = append(out[p], k)
		}
	}
	return out
}

// What the private key of each pair is, in messages.
const (
	ageWhat = "an age X25519 secret key (AGE-SECRET-KEY-1…)"
	sshWhat = "an SSH private key without a passphrase"
)

// generateAge draws an age X25519 identity. The age library reads
// crypto/rand only and keeps its Bech32 encoding internal (see [Generator]).
func generateAge() (string, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// AgePublic returns the age X25519 recipient ("age1…") of an age X25519
// identity ("AGE-SECRET-KEY-1…"). The error never contains the secret, nor
// any part of it.
func AgePublic(secret string) (string, error) {
	id, err := age.ParseX25519Identity(secret)
	if err != nil {
		return "", errors.New("templating: not " + ageWhat)
	}
	return id.Recipient().String(), nil
}

// sshPrivateLen is the length of an Ed25519 key in OpenSSH private key
// format without passphrase or comment, PEM-encoded with its final newline.
const sshPrivateLen = 387

// generateSSH draws an Ed25519 key and encodes it in OpenSSH private key
// format ("-----BEGIN OPENSSH PRIVATE KEY-----") with golang.org/x/crypto/ssh,
// no comment. ssh.MarshalPrivateKey reads crypto/rand too (the format's
// check bytes), so the pair takes its randomness where the age pair does.
func generateSSH() (string, error) {
	_, key, err := ed25519.GenerateKey(cryptorand.Reader)
	if err != nil {
		return "", err
	}
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(block)), nil
}

// SSHPublic returns the public key, in authorized_keys format without a
// comment ("ssh-ed25519 AAAA…"), of an SSH private key without passphrase
// in any PEM encoding ssh.ParsePrivateKey reads: the OpenSSH format that
// <ssh:private> generates, and the keys a person may have put there by
// hand. The error never contains the private key, nor any part of it.
func SSHPublic(private string) (string, error) {
	signer, err := ssh.ParsePrivateKey([]byte(private))
	if err != nil {
		// Not err: its text is the library's, not checked for key material.
		return "", errors.New("templating: not " + sshWhat)
	}
	return strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(signer.PublicKey())), "\n"), nil
}
