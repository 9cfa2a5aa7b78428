package iam

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// sealer seals the directory's secrets (AES-256-GCM) so that reading the
// drives is not enough to sign as a user: with a key derived from the
// tenant's default master key (engine/kms) when sealing, recorded by its
// ID so that a secret still opens after another master key became the
// default. The associated data is the access key, so a sealed secret
// cannot be moved to another key's object.
type sealer struct {
	keys MasterKeys
	info string // HKDF's info: what the derived keys seal
}

// MasterKeys are the tenant's master keys (engine/kms.Keys).
type MasterKeys interface {
	Key(id string) ([]byte, bool)
	Default() string
}

// sealInfo makes the directory's keys differ from SSE's for the same
// master key.
const sealInfo = "strata IAM directory secrets"

func (s sealer) aead(id string) (cipher.AEAD, error) {
	master, ok := s.keys.Key(id)
	if !ok {
		return nil, fmt.Errorf("master key %q is not in the keys file", id)
	}
	key, err := hkdf.Key(sha256.New, master, nil, s.info, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// seal returns the sealed secret and the ID of the master key it used.
func (s sealer) seal(plain []byte, aad string) ([]byte, string, error) {
	id := s.keys.Default()
	aead, err := s.aead(id)
	if err != nil {
		return nil, "", err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, "", err
	}
	return aead.Seal(nonce, nonce, plain, []byte(aad)), id, nil
}

var errSealed = errors.New("sealed secret does not open with its master key")

func (s sealer) open(sealed []byte, keyID, aad string) ([]byte, error) {
	aead, err := s.aead(keyID)
	if err != nil {
		return nil, err
	}
	n := aead.NonceSize()
	if len(sealed) < n+aead.Overhead() {
		return nil, errSealed
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(aad))
	if err != nil {
		return nil, errSealed
	}
	return plain, nil
}

// Identifiers as IAM shapes them: a four-letter prefix saying what the ID
// names (AIDA a user, AKIA an access key) and upper-case letters and
// digits; secrets are 40 characters of the base64 alphabet.
const (
	idAlphabet     = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	secretAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
)

func randomString(alphabet string, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)] // both alphabets divide 256
	}
	return string(b)
}

func newID(prefix string) string { return prefix + randomString(idAlphabet, 17) }

func newAccessKey() string { return "AKIA" + randomString(idAlphabet, 16) }

func newSecretKey() string { return randomString(secretAlphabet, 40) }
