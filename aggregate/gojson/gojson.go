// Package gojson is an [schema.Codec] on github.com/goccy/go-json: the
// same JSON on the wire as the default [schema.JSON] (encoding/json), so
// a store written with one is read with the other, decoded several times
// faster. It is opt-in so that the aggregate package keeps the standard
// library's codec and its dependency set.
//
// Differences from encoding/json that a user may meet: none in what is
// written for the struct, map, slice and scalar types events usually hold;
// error texts differ (errors are still returned, never swallowed).
package gojson

import (
	json "github.com/goccy/go-json"

	"github.com/varve-go/varve/schema"
)

// Codec encodes with github.com/goccy/go-json. The zero value is ready to
// use and safe for concurrent use.
type Codec struct{}

var _ schema.Codec = Codec{}

// Marshal implements [schema.Codec].
func (Codec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements [schema.Codec].
func (Codec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
