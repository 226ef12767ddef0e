package shred

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/varve-go/varve"
)

// MasterKey wraps and unwraps data keys. The store never sees it: a key
// management service can stand behind the interface (its Wrap and Unwrap
// are then calls of the service's encrypt and decrypt). aad binds a wrapped
// key to its subject and id: Unwrap with another aad fails.
type MasterKey interface {
	// ID names the key; it is kept beside every key it wrapped, so that a
	// rotation knows which keys to wrap again. 1..128 bytes of text.
	ID() string
	Wrap(ctx context.Context, dataKey, aad []byte) ([]byte, error)
	Unwrap(ctx context.Context, wrapped, aad []byte) ([]byte, error)
}

// ErrMasterKey: a master key is malformed, missing, or does not unwrap a
// data key it should (another master key, or tampered bytes).
var ErrMasterKey = errors.New("shred: master key")

type aesMaster struct {
	id   string
	aead cipher.AEAD
}

// NewMasterKey returns a master key that wraps data keys with AES-256-GCM
// under key (32 bytes), named id.
func NewMasterKey(id string, key []byte) (MasterKey, error) {
	if len(id) == 0 || len(id) > varve.MaxMasterIDLen || strings.ContainsAny(id, ":\x00") {
		return nil, fmt.Errorf("%w: id %q: 1..%d bytes without ':'", ErrMasterKey, id, varve.MaxMasterIDLen)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("%w %q: %d bytes, want 32 (AES-256)", ErrMasterKey, id, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrMasterKey, id, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrMasterKey, id, err)
	}
	return &aesMaster{id: id, aead: aead}, nil
}

func (m *aesMaster) ID() string { return m.id }

func (m *aesMaster) Wrap(_ context.Context, dataKey, aad []byte) ([]byte, error) {
	nonce := make([]byte, m.aead.NonceSize(), m.aead.NonceSize()+len(dataKey)+m.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return m.aead.Seal(nonce, nonce, dataKey, aad), nil
}

func (m *aesMaster) Unwrap(_ context.Context, wrapped, aad []byte) ([]byte, error) {
	n := m.aead.NonceSize()
	if len(wrapped) < n+m.aead.Overhead() {
		return nil, fmt.Errorf("%w %q: wrapped key of %d bytes", ErrMasterKey, m.id, len(wrapped))
	}
	key, err := m.aead.Open(nil, wrapped[:n], wrapped[n:], aad)
	if err != nil {
		return nil, fmt.Errorf("%w %q does not unwrap this key: %v", ErrMasterKey, m.id, err)
	}
	return key, nil
}

// ParseMasterKey parses the text form of a master key, "<id>:<key>", the
// key being 32 bytes in hex (64 digits) or base64 (standard or URL
// alphabet, padded or not).
func ParseMasterKey(s string) (MasterKey, error) {
	id, enc, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return nil, fmt.Errorf("%w: want <id>:<32 bytes in hex or base64>", ErrMasterKey)
	}
	var key []byte
	var err error
	switch {
	case len(enc) == 64:
		key, err = hex.DecodeString(enc)
	default:
		for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if key, err = e.DecodeString(enc); err == nil {
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w %q: the key is neither hex nor base64", ErrMasterKey, id)
	}
	return NewMasterKey(id, key)
}

// MasterKeyFromEnv reads a master key in the text form of ParseMasterKey
// from the environment variable name.
func MasterKeyFromEnv(name string) (MasterKey, error) {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return nil, fmt.Errorf("%w: environment variable %s is not set", ErrMasterKey, name)
	}
	return ParseMasterKey(v)
}

// MasterKeyFromFile reads a master key in the text form of
// ParseMasterKey from the file at path, which only its owner may read.
func MasterKeyFromFile(path string) (MasterKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMasterKey, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is readable by others (mode %s): chmod 600 it", ErrMasterKey, path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMasterKey, err)
	}
	return ParseMasterKey(string(b))
}

// NewMasterKeyText returns the text form of a new random master key named
// id, for MasterKeyFromEnv or MasterKeyFromFile.
func NewMasterKeyText(id string) (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	if _, err := NewMasterKey(id, key); err != nil {
		return "", err
	}
	return id + ":" + base64.RawURLEncoding.EncodeToString(key), nil
}
