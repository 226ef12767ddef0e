package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/varve-go/varve"
)

// SecretPrefix starts a secret in the form the Standard Webhooks scheme
// shows it to users: "whsec_" and the base64 of the key.
const SecretPrefix = "whsec_"

// ParseSecret returns the HMAC key of a shared secret. A secret in the
// Standard Webhooks form, "whsec_" and base64, gives the decoded bytes (with
// or without base64 padding); any other secret is the key as it is, so raw
// key bytes stay possible as long as they do not begin with "whsec_". An
// empty key, or "whsec_" with bad base64, is an error wrapping
// varve.ErrInvalidArgument.
func ParseSecret(secret string) ([]byte, error) {
	if encoded, ok := strings.CutPrefix(secret, SecretPrefix); ok {
		key, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			key, err = base64.RawStdEncoding.DecodeString(encoded)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: secret %s...: the part after the prefix is not base64", varve.ErrInvalidArgument, SecretPrefix)
		}
		secret = string(key)
	}
	if secret == "" {
		return nil, fmt.Errorf("%w: empty secret", varve.ErrInvalidArgument)
	}
	return []byte(secret), nil
}

// sign returns the Standard Webhooks signature "v1,<base64>" of a message.
func sign(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// ErrBadSignature is returned by [Verify] for a request that was not
// signed with the secret, or is too old.
var ErrBadSignature = errors.New("bad webhook signature")

// Verify checks the signature of a webhook request, for receivers: secret
// is the sender's [Config.Secret] (either form), h holds the request's
// headers and body its body. One of the space-separated signatures of the
// header must match, as the scheme allows while a secret is rotated. With
// tolerance > 0, a timestamp further than tolerance from now fails too
// (replay protection).
func Verify(secret []byte, h http.Header, body []byte, tolerance time.Duration) error {
	key, err := ParseSecret(string(secret))
	if err != nil {
		return fmt.Errorf("webhook: verify: %w", err)
	}
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: missing %s, %s or %s", ErrBadSignature, HeaderID, HeaderTimestamp, HeaderSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q", ErrBadSignature, ts)
	}
	if age := time.Since(time.Unix(sec, 0)); tolerance > 0 && (age > tolerance || age < -tolerance) {
		return fmt.Errorf("%w: timestamp %s is %v away", ErrBadSignature, ts, age.Round(time.Second))
	}
	want := sign(key, id, ts, body)
	for sig := range strings.FieldsSeq(sigs) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("%w: no signature matches", ErrBadSignature)
}
