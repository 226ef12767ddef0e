package delivery

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// Payload is the JSON body that the webhook and NATS sinks send. It is the
// same for every attempt of an event. Data and Metadata that are JSON are
// embedded as they are; other bytes go base64-encoded in DataBase64 and
// MetadataBase64.
type Payload struct {
	IdempotencyKey string          `json:"idempotency_key"`
	Subscription   string          `json:"subscription"`
	ID             uuid.UUID       `json:"id"`
	Stream         string          `json:"stream"`
	Version        varve.Version   `json:"version"`
	Position       varve.Position  `json:"position"`
	Type           string          `json:"type"`
	RecordedAt     time.Time       `json:"recorded_at"`
	Data           json.RawMessage `json:"data,omitempty"`
	DataBase64     []byte          `json:"data_base64,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	MetadataBase64 []byte          `json:"metadata_base64,omitempty"`
}

// NewPayload returns the payload of a delivery.
func NewPayload(d Delivery) Payload {
	e := d.Event
	p := Payload{
		IdempotencyKey: d.Key, Subscription: d.Subscription, ID: e.ID, Stream: e.Stream,
		Version: e.Version, Position: e.Position, Type: e.Type, RecordedAt: e.RecordedAt,
	}
	p.Data, p.DataBase64 = rawOrBytes(e.Data)
	p.Metadata, p.MetadataBase64 = rawOrBytes(e.Metadata)
	return p
}

func rawOrBytes(b []byte) (json.RawMessage, []byte) {
	switch {
	case len(b) == 0:
		return nil, nil
	case json.Valid(b):
		return b, nil
	}
	return nil, b
}

// MarshalPayload returns the JSON payload of a delivery.
func MarshalPayload(d Delivery) ([]byte, error) {
	return AppendPayload(make([]byte, 0, 256+len(d.Event.Data)+len(d.Event.Metadata)), d), nil
}

// AppendPayload appends the JSON payload of a delivery to b: the JSON of
// [NewPayload], in the same field order, written without reflection.
func AppendPayload(b []byte, d Delivery) []byte {
	e := &d.Event
	b = append(b, `{"idempotency_key":`...)
	b = appendJSONString(b, d.Key)
	b = append(b, `,"subscription":`...)
	b = appendJSONString(b, d.Subscription)
	b = append(b, `,"id":"`...)
	b = appendUUID(b, e.ID)
	b = append(b, `","stream":`...)
	b = appendJSONString(b, e.Stream)
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, e.Version, 10)
	b = append(b, `,"position":"`...)
	b = append(b, e.Position.String()...)
	b = append(b, `","type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"recorded_at":"`...)
	b = e.RecordedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendBytesField(b, "data", e.Data)
	b = appendBytesField(b, "metadata", e.Metadata)
	return append(b, '}')
}

func appendBytesField(b []byte, name string, v []byte) []byte {
	raw, bin := rawOrBytes(v)
	switch {
	case raw != nil:
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":`...)
		return appendCompact(b, raw)
	case bin != nil:
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, bin)
		return append(b, '"')
	}
	return b
}

// appendCompact appends valid JSON without insignificant white space, as
// encoding/json does with a RawMessage.
func appendCompact(b, raw []byte) []byte {
	if !bytes.ContainsAny(raw, " \t\r\n") {
		return append(b, raw...)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return append(b, raw...) // raw was checked valid; not reached
	}
	return append(b, buf.Bytes()...)
}

const hexDigits = "0123456789abcdef"

// appendUUID appends what id.String returns, without allocating.
func appendUUID(b []byte, id uuid.UUID) []byte {
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return b
}

// appendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it: quotes, backslashes, control characters, <, > and &, U+2028
// and U+2029, and invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
