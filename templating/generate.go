package templating

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"
)

// MaxBcryptInput is the longest input bcrypt accepts, in bytes.
const MaxBcryptInput = 72

// ErrBcryptInputTooLong is returned by [Generator.Bcrypt] for an input over
// [MaxBcryptInput] bytes. bcrypt would silently ignore the rest.
var ErrBcryptInputTooLong = errors.New("templating: bcrypt input is longer than 72 bytes")

// Generator generates and derives values (product document, "Templates").
// The zero value is usable: crypto/rand and bcrypt's default cost, no cache.
//
// Randomness comes from two places. random, hex, password and uuid values
// read [Generator.Rand]. The private keys of key pairs (<age:secret>,
// <ssh:private>) and bcrypt salts read crypto/rand: they are made by
// libraries that take no reader (filippo.io/age's
// age.GenerateX25519Identity, golang.org/x/crypto/bcrypt) or read
// crypto/rand themselves (golang.org/x/crypto/ssh's MarshalPrivateKey, for
// the format's check bytes), and this package does not reimplement their
// encodings to feed them one. Tests that need exact output make crypto/rand
// deterministic with testing/cryptotest.SetGlobalRandom.
type Generator struct {
	// Rand is the randomness of random, hex, password and uuid values: crypto/rand.Reader
	// in production (used when nil), a deterministic reader in tests. age
	// and SSH private keys and bcrypt salts never come from it (see
	// [Generator]).
	Rand io.Reader
	// BcryptCost is the bcrypt cost (log2 of rounds); 0 (or anything below
	// bcrypt.MinCost) means bcrypt.DefaultCost, 10. Above bcrypt.MaxCost,
	// 31, hashing fails.
	BcryptCost int
	// Cache, when set, spares bcrypt's cost when [Generator.Matches] checks
	// a (hash, source) pair it has verified or [Generator.Fill] generated
	// before in the same slot. May be nil.
	Cache *HashCache
	// Dry makes values for a plan that is never written (observe-only
	// mode): Bcrypt returns [DryBcrypt] without hashing and the private key
	// of each key pair is one key made once per process, so planning the
	// same missing keys at every resync costs no bcrypt or key work.
	Dry bool
	// Slots, when set, bounds the bcrypt hashes and compares that run at
	// once, across every Generator sharing it. May be nil (no bound).
	Slots *BcryptSlots
	// Turn names whose hashes and compares these are (the object's
	// namespace) when they wait for a slot: waiting computations of
	// different turns take the free slots in turn.
	Turn string
	// VaultPassword asks Vault's password policy of that name for a new
	// password (<vault-password:policy>); its error names no value. A dry
	// Generator makes [DryVaultPassword] without asking; without it, a
	// vault-password fails to generate: this package never reaches Vault
	// itself.
	VaultPassword func(ctx context.Context, policy string) (string, error)
}

// DryBcrypt is what a dry [Generator.Bcrypt] returns: not a bcrypt hash, so
// it never matches anything.
const DryBcrypt = "<dry-run bcrypt hash>"

func (g Generator) rand() io.Reader {
	if g.Rand == nil {
		return cryptorand.Reader
	}
	return g.Rand
}

// Generate draws a new value for a generated leaf ([Leaf.Generated]):
//   - random: Length characters from [A-Za-z0-9], uniform (rejection
//     sampling, no modulo bias);
//   - hex: Length lowercase hex characters (Length/2 random bytes);
//   - password: Length characters, one of each of its Classes, the rest
//     from their union, shuffled, each drawn uniformly (no modulo bias);
//   - vault-password: what g.VaultPassword answers (see [Generator]);
//   - uuid: a UUID version 4, "xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx";
//   - age-secret: an age X25519 identity "AGE-SECRET-KEY-1…" from
//     age.GenerateX25519Identity; [AgePublic] gives its recipient;
//   - ssh-private: an Ed25519 key in OpenSSH private key format, from
//     golang.org/x/crypto/ssh; [SSHPublic] gives its public key.
//
// random, hex, password and uuid read g.Rand; private keys read
// crypto/rand, not g.Rand (see [Generator]).
//
// It returns an error for any other kind, a length outside the template's
// range, a failing Rand (wrapped; random, hex, password and uuid only), or
// a failing g.VaultPassword (wrapped).
func (g Generator) Generate(l Leaf) (string, error) {
	v, err := g.generate(context.Background(), l)
	if err != nil && l.Kind == KindVaultPassword {
		return "", fmt.Errorf("templating: %w", err)
	}
	return v, err
}

// generate is Generate, asking Vault under ctx.
func (g Generator) generate(ctx context.Context, l Leaf) (string, error) {
	r := g.rand()
	switch l.Kind {
	case KindPassword:
		return password(r, l)
	case KindVaultPassword:
		return g.vaultPassword(ctx, l)
	case KindRandom:
		if l.Length < MinRandomLength || l.Length > MaxRandomLength {
			return "", errors.New("templating: random length must be from 1 to 4096")
		}
		return randomAlnum(r, l.Length)
	case KindHex:
		if l.Length < MinHexLength || l.Length > MaxHexLength || l.Length%2 != 0 {
			return "", errors.New("templating: hex length must be even, from 2 to 4096")
		}
		b := make([]byte, l.Length/2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", fmt.Errorf("templating: reading randomness: %w", err)
		}
		return hex.EncodeToString(b), nil
	case KindUUID:
		u, err := uuid.NewRandomFromReader(r)
		if err != nil {
			return "", fmt.Errorf("templating: reading randomness: %w", err)
		}
		return u.String(), nil
	}
	if isPrivate(l.Kind) {
		p := pairOf(l.Kind)
		gen := p.generate
		if g.Dry {
			gen = p.dry
		}
		v, err := gen()
		if err != nil {
			return "", fmt.Errorf("templating: generating %s: %w", p.privateTemplate(), err)
		}
		return v, nil
	}
	return "", fmt.Errorf("templating: %s leaves are not generated", l.Kind)
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomAlnum returns n characters of alnum. A byte b is used only when
// b < 248 (= 4*62), so b%62 is uniform.
func randomAlnum(r io.Reader, n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/8+8)
	for len(out) < n {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("templating: reading randomness: %w", err)
		}
		for _, b := range buf {
			if b >= 248 {
				continue
			}
			out = append(out, alnum[b%62])
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}

// Bcrypt returns the bcrypt hash ("$2a$<cost>$…", 60 characters) of src at
// g.BcryptCost, with a fresh salt from crypto/rand. It returns
// [ErrBcryptInputTooLong] when src is over 72 bytes. Errors never contain
// src.
func (g Generator) Bcrypt(src string) (string, error) {
	return g.bcrypt(context.Background(), src)
}

// bcrypt is Bcrypt, stopped with ctx's error when ctx ends before the hash
// starts.
func (g Generator) bcrypt(ctx context.Context, src string) (string, error) {
	if len(src) > MaxBcryptInput {
		return "", ErrBcryptInputTooLong
	}
	if g.Dry {
		return DryBcrypt, nil
	}
	cost := g.BcryptCost
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	var h []byte
	var err error
	if err := g.Slots.run(ctx, g.Turn, func() { h, err = bcrypt.GenerateFromPassword([]byte(src), cost) }); err != nil {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("templating: bcrypt: %w", err)
	}
	return string(h), nil
}

// Matches reports whether the stored value of a derived leaf still derives
// from source (product document, "References follow their source": a hash
// is rewritten only when it stops matching):
//   - bcrypt: stored is a bcrypt hash of source (through g.Cache, under the
//     slot at, when set); false for a source over 72 bytes;
//   - the public key of a key pair: stored is the public key of source
//     ([AgePublic], [SSHPublic]), source being the private key; false when
//     source is not a private key of the pair.
//
// It returns false for every other kind.
func (g Generator) Matches(at Slot, l Leaf, stored, source string) bool {
	switch l.Kind {
	case KindBcrypt:
		ok, _ := g.Cache.matches(context.Background(), at, stored, source, g.seat())
		return ok
	}
	if isPublic(l.Kind) {
		pub, err := pairOf(l.Kind).derive(source)
		return err == nil && pub == stored
	}
	return false
}

// bcryptMatches is bcrypt.CompareHashAndPassword, refusing sources bcrypt
// would truncate; ctx's error when ctx ends before the compare starts.
func bcryptMatches(ctx context.Context, hash, source string, at seat) (bool, error) {
	if len(source) > MaxBcryptInput {
		return false, nil
	}
	var err error
	if err := at.slots.run(ctx, at.turn, func() { err = bcrypt.CompareHashAndPassword([]byte(hash), []byte(source)) }); err != nil {
		return false, err
	}
	return err == nil, nil
}
