package server

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// Event is a recorded event as the API (and `varve streams`) shows it:
// data and metadata that are JSON are embedded; other bytes are base64.
type Event struct {
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

// EventOf returns e as the API shows it.
func EventOf(e varve.RecordedEvent) Event {
	out := Event{ID: e.ID, Stream: e.Stream, Version: e.Version, Position: e.Position, Type: e.Type, RecordedAt: e.RecordedAt}
	out.Data, out.DataBase64 = jsonOrBytes(e.Data)
	out.Metadata, out.MetadataBase64 = jsonOrBytes(e.Metadata)
	return out
}

// jsonOrBytes returns b as JSON when it is a JSON value in UTF-8, as bytes
// for base64 otherwise (encoding/json takes other bytes inside a string as
// valid, and embedding them would make the answer no UTF-8).
func jsonOrBytes(b []byte) (json.RawMessage, []byte) {
	if len(b) == 0 {
		return nil, nil
	}
	if utf8.Valid(b) && json.Valid(b) {
		var c bytes.Buffer
		if json.Compact(&c, b) == nil {
			return c.Bytes(), nil
		}
	}
	return nil, b
}

// newEventJSON is an event to append: Data (any JSON value, stored as its
// text) or DataBase64 (bytes), and the same for metadata.
type newEventJSON struct {
	ID             *uuid.UUID      `json:"id"`
	Type           string          `json:"type"`
	Data           json.RawMessage `json:"data"`
	DataBase64     []byte          `json:"data_base64"`
	Metadata       json.RawMessage `json:"metadata"`
	MetadataBase64 []byte          `json:"metadata_base64"`
}

func (n newEventJSON) event(i int) (varve.Event, error) {
	e := varve.Event{Type: n.Type}
	if n.ID != nil {
		if *n.ID == uuid.Nil {
			return e, badRequest("events[%d].id: the nil UUID is no event id", i)
		}
		e.ID = *n.ID
	}
	if n.Type == "" {
		return e, badRequest("events[%d].type is missing", i)
	}
	var err error
	if e.Data, err = oneOf(i, "data", n.Data, n.DataBase64); err != nil {
		return e, err
	}
	if e.Metadata, err = oneOf(i, "metadata", n.Metadata, n.MetadataBase64); err != nil {
		return e, err
	}
	return e, nil
}

func oneOf(i int, name string, raw json.RawMessage, b64 []byte) ([]byte, error) {
	if raw != nil && b64 != nil {
		return nil, badRequest("events[%d]: give %s or %s_base64, not both", i, name, name)
	}
	if raw != nil {
		if string(raw) == "null" {
			return nil, nil
		}
		if !utf8.Valid(raw) {
			return nil, badRequest("events[%d].%s is not valid UTF-8: JSON text must be; send other bytes as %s_base64", i, name, name)
		}
		return []byte(raw), nil
	}
	return b64, nil
}

// expectedJSON is an expected version: "any", "no-stream",
// "stream-exists" or a version number (as a number or a string).
type expectedJSON struct {
	v   varve.ExpectedVersion
	set bool
}

func (x *expectedJSON) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		s = string(b)
	}
	v, err := parseExpected(s)
	if err != nil {
		return err
	}
	x.v, x.set = v, true
	return nil
}

func parseExpected(s string) (varve.ExpectedVersion, error) {
	switch s {
	case "any":
		return varve.Any, nil
	case "no-stream":
		return varve.NoStream, nil
	case "stream-exists":
		return varve.StreamExists, nil
	}
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, badRequest(`expected_version %q: want "any", "no-stream", "stream-exists" or a version number`, s)
	}
	return varve.Exact(n), nil
}

// intParam parses the integer query parameter name in [lo, hi], def when
// absent.
func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("parameter %s=%q: want an integer from %d to %d", name, s, lo, hi)
	}
	return n, nil
}

// positionParam parses a position parameter: a position's text form,
// "start" (or empty: def) or "end" (the last position of $all, from last).
func positionParam(q url.Values, name string, def varve.Position, last func() (varve.Position, error)) (varve.Position, error) {
	s := q.Get(name)
	switch s {
	case "":
		return def, nil
	case "start":
		return varve.Start, nil
	case "end":
		return last()
	}
	p, err := varve.ParsePosition(s)
	if err != nil {
		return p, badRequest(`parameter %s=%q: want a position ("12" or "7:3"), "start" or "end"`, name, s)
	}
	return p, nil
}

func boolParam(q url.Values, name string) (bool, error) {
	s := q.Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, badRequest("parameter %s=%q: want true or false", name, s)
	}
	return b, nil
}
