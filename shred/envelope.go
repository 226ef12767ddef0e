package shred

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// A sealed payload ("envelope") is
//
//	magic (5 bytes) | key id (16) | uvarint len(subject) | subject | nonce (12) | AES-256-GCM(plaintext)
//
// with everything before the nonce as the additional data of the AEAD, so
// that neither the key id nor the subject can be changed. A sealed field
// of a JSON document is the JSON string fieldPrefix + base64url(envelope).
var magic = []byte("\x00vsh\x01")

const (
	fieldPrefix = "varve-shred:1:"
	nonceLen    = 12
	tagLen      = 16
)

// ErrCorrupt: sealed data that cannot be parsed or whose authentication
// fails under its own key: it was changed after it was sealed.
var ErrCorrupt = errors.New("shred: corrupt sealed data")

type header struct {
	key  uuid.UUID
	subj []byte // the subject, within the envelope: Subject() copies it
	aad  []byte // the header's bytes
	body []byte // nonce | ciphertext
}

// sealedHeader parses the header of an envelope.
func sealedHeader(b []byte) (header, error) {
	var h header
	if !bytes.HasPrefix(b, magic) || len(b) < len(magic)+16+1 {
		return h, fmt.Errorf("%w: no envelope", ErrCorrupt)
	}
	copy(h.key[:], b[len(magic):])
	rest := b[len(magic)+16:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n == 0 || n > uint64(len(rest)-k) {
		return h, fmt.Errorf("%w: subject", ErrCorrupt)
	}
	h.subj = rest[k : k+int(n)]
	end := len(b) - len(rest) + k + int(n)
	h.aad, h.body = b[:end], b[end:]
	if len(h.body) < nonceLen+tagLen {
		return h, fmt.Errorf("%w: %d bytes of ciphertext", ErrCorrupt, len(h.body))
	}
	return h, nil
}

// IsSealed reports whether data is a sealed payload, or a JSON document
// with sealed fields.
func IsSealed(data []byte) bool {
	return bytes.HasPrefix(data, magic) || bytes.Contains(data, []byte(`"`+fieldPrefix))
}

// Subject returns the subject whose key sealed data (a sealed payload), or
// "" when data is not one.
func Subject(data []byte) string {
	h, err := sealedHeader(data)
	if err != nil {
		return ""
	}
	return h.subject()
}

func (h header) subject() string { return string(h.subj) }

// erasedJSON is the marker that replaces data sealed by an erased key:
// {"$erased":{"subject":...,"key":...}}.
type erasedJSON struct {
	Erased struct {
		Subject string    `json:"subject"`
		Key     uuid.UUID `json:"key"`
	} `json:"$erased"`
}

func marker(h header) []byte {
	var m erasedJSON
	m.Erased.Subject, m.Erased.Key = h.subject(), h.key
	b, _ := json.Marshal(m)
	return b
}

// Erased reports whether data holds data that was erased, and whose: the
// marker {"$erased":{"subject":...,"key":...}} that a read returns in place
// of a sealed payload whose key is gone, or a JSON document whose sealed
// fields were erased. Such fields read as null (so that the document still
// decodes into the type it had), and the document begins with the marker
// as an extra field.
func Erased(data []byte) (subject string, ok bool) {
	if !bytes.HasPrefix(data, []byte(`{"$erased":`)) {
		return "", false
	}
	var m erasedJSON
	if json.Unmarshal(data, &m) != nil || m.Erased.Subject == "" {
		return "", false
	}
	return m.Erased.Subject, true
}

// withFieldMarker returns doc, a JSON object some of whose fields were
// erased by the key of h, with the marker as its first field.
func withFieldMarker(doc []byte, h header) []byte {
	i := bytes.IndexByte(doc, '{')
	if i < 0 {
		return doc
	}
	m := marker(h)
	out := make([]byte, 0, len(doc)+len(m))
	out = append(out, doc[:i]...)
	out = append(out, m[:len(m)-1]...) // {"$erased":{...}
	out = append(out, ',')
	return append(out, doc[i+1:]...)
}

// fieldTokens calls fn for each sealed field of doc with the envelope it
// holds, and returns doc with each token replaced by what fn returns.
func fieldTokens(doc []byte, fn func(env []byte) ([]byte, error)) ([]byte, error) {
	tok := []byte(`"` + fieldPrefix)
	if !bytes.Contains(doc, tok) {
		return doc, nil
	}
	out := make([]byte, 0, len(doc))
	rest := doc
	for {
		i := bytes.Index(rest, tok)
		if i < 0 {
			return append(out, rest...), nil
		}
		out = append(out, rest[:i]...)
		if escaped(rest[:i]) {
			// An escaped quote inside a string, not a sealed field.
			out = append(out, tok...)
			rest = rest[i+len(tok):]
			continue
		}
		rest = rest[i+len(tok):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return nil, fmt.Errorf("%w: unterminated sealed field", ErrCorrupt)
		}
		env, err := base64.RawURLEncoding.DecodeString(string(rest[:j]))
		if err != nil {
			return nil, fmt.Errorf("%w: sealed field: %v", ErrCorrupt, err)
		}
		v, err := fn(env)
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
		rest = rest[j+1:]
	}
}

// escaped reports whether the quote that follows b is escaped: b ends with
// an odd number of backslashes.
func escaped(b []byte) bool {
	n := 0
	for n < len(b) && b[len(b)-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}
