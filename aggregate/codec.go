package aggregate

import (
	"github.com/varve-go/varve/schema"
)

// ErrUnknownEventType: an event's Go type or stored type name is not in the
// aggregate's [Registry]. A stored name fails with a
// [*schema.UnknownTypeError] that names it.
var ErrUnknownEventType = schema.ErrUnknownEventType

// Codec encodes event payloads and snapshot states.
type Codec = schema.Codec

// JSON is the default [Codec]: encoding/json.
type JSON = schema.JSON

// Registry maps event type names, as stored, to Go types and back: the
// registry of package schema, with its schema versions, aliases for
// renamed types and upcasters, which projections use too. Register every
// event type before the registry is used; lookups are lock-free.
type Registry = schema.Registry

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return schema.NewRegistry() }

// Register adds event type E under name (schema version 1); see
// [schema.Register] and, for later versions, [schema.RegisterVersion]. It
// panics if name is empty, if E is a pointer or interface type, or if name
// or E is already registered.
func Register[E any](r *Registry, name string) { schema.Register[E](r, name) }
