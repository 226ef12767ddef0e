// Package schema maps the event types of a store to Go types, and keeps
// old events readable as the types evolve: the read path of aggregates
// (package aggregate uses this [Registry]) and of projections.
//
// A [Registry] knows each event type by the name it is stored under, at a
// schema version ([RegisterVersion]; [Register] is version 1). When a type's
// payload changes shape, raise its version and register an [Upcaster] from
// each older version to the next ([Registry.Upcast]): an event stored at
// version 1 of a type now at version 3 is read through the upcasters 1→2 and
// 2→3, on its raw payload, before it is decoded into the Go type. When a type
// is renamed, register the old name as an alias of the new one
// ([Registry.Alias]). [Registry.Validate] checks at start-up that aliases
// point at registered types and that every chain of upcasters is complete.
//
// An event records its schema version in its metadata, as the JSON object
// {"schema_version": N}, written by [Registry.Encode] for versions above 1;
// an event without it is at version 1. Metadata is read only for types
// above version 1.
//
// A stored name that is neither registered nor an alias fails with an
// [*UnknownTypeError] naming it (errors.Is [ErrUnknownEventType]).
//
// Register everything before the registry is used: registration is
// serialised, lookups are lock-free and safe for concurrent use.
package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/varve-go/varve"
)

// ErrUnknownEventType: an event's Go type or stored type name is not in the
// [Registry].
var ErrUnknownEventType = errors.New("schema: unknown event type")

// UnknownTypeError is the error of a stored type name that the registry
// does not know.
type UnknownTypeError struct {
	// Type is the stored name.
	Type string
}

func (e *UnknownTypeError) Error() string {
	return fmt.Sprintf("schema: unknown event type %q (register it, or alias it to its new name)", e.Type)
}

// Is makes errors.Is(err, ErrUnknownEventType) hold.
func (e *UnknownTypeError) Is(target error) bool { return target == ErrUnknownEventType }

// ErrSchemaVersion: an event's schema version cannot be read into its Go
// type: it is newer than the registered version, or no upcaster leads from
// it.
var ErrSchemaVersion = errors.New("event schema version not readable")

// Codec encodes event payloads.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSON is the default [Codec]: encoding/json.
type JSON struct{}

// Marshal implements Codec.
func (JSON) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements Codec.
func (JSON) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Upcaster turns the payload of an event at one schema version into the
// payload at the next version. It must not keep data.
type Upcaster func(data []byte) ([]byte, error)

// Registry maps stored event type names to Go types and back, with their
// schema versions, aliases and upcasters.
type Registry struct {
	mu    sync.Mutex // serializes changes
	types atomic.Pointer[registryTypes]
}

type registryTypes struct {
	byName  map[string]*eventType
	byType  map[reflect.Type]*eventType
	aliases map[string]string
	// upcasters[name][v] upcasts name's payloads from version v to v+1.
	upcasters map[string]map[int]Upcaster
}

func (t *registryTypes) clone() *registryTypes {
	next := &registryTypes{byName: make(map[string]*eventType, len(t.byName)+1), byType: make(map[reflect.Type]*eventType, len(t.byType)+1),
		aliases: make(map[string]string, len(t.aliases)+1), upcasters: make(map[string]map[int]Upcaster, len(t.upcasters)+1)}
	for k, v := range t.byName {
		next.byName[k] = v
	}
	for k, v := range t.byType {
		next.byType[k] = v
	}
	for k, v := range t.aliases {
		next.aliases[k] = v
	}
	for k, v := range t.upcasters {
		m := make(map[int]Upcaster, len(v)+1)
		for from, u := range v {
			m[from] = u
		}
		next.upcasters[k] = m
	}
	return next
}

type eventType struct {
	name    string
	version int
	decode  func(c Codec, data []byte) (any, error)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	r := &Registry{}
	r.types.Store((&registryTypes{}).clone())
	return r
}

func (r *Registry) change(f func(t *registryTypes)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.types.Load().clone()
	f(next)
	r.types.Store(next)
}

// Register adds event type E under name at schema version 1. Events of type
// E (or *E) can then be encoded, and stored events called name are decoded
// into an E. Register panics if name is empty, if E is a pointer or
// interface type, or if name or E is already registered: those are
// programming errors, as with http.ServeMux.
func Register[E any](r *Registry, name string) { RegisterVersion[E](r, name, 1) }

// RegisterVersion is [Register] with the schema version of E's encoding;
// stored events of older versions are read through the upcasters
// ([Registry.Upcast]) from their version to this one. It panics, as
// Register does, and when version is below 1.
func RegisterVersion[E any](r *Registry, name string, version int) {
	t := reflect.TypeFor[E]()
	if name == "" {
		panic("schema: Register: empty event type name")
	}
	if version < 1 {
		panic(fmt.Sprintf("schema: Register(%q): schema version %d, must be at least 1", name, version))
	}
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface {
		panic(fmt.Sprintf("schema: Register(%q): register the value type, not %v", name, t))
	}
	r.change(func(types *registryTypes) {
		if _, dup := types.byName[name]; dup {
			panic(fmt.Sprintf("schema: Register: event type name %q registered twice", name))
		}
		if prev, dup := types.byType[t]; dup {
			panic(fmt.Sprintf("schema: Register(%q): %v is already registered as %q", name, t, prev.name))
		}
		et := &eventType{name: name, version: version, decode: func(c Codec, data []byte) (any, error) {
			var e E
			if err := c.Unmarshal(data, &e); err != nil {
				return nil, err
			}
			return e, nil
		}}
		types.byName[name] = et
		types.byType[t] = et
	})
}

// Alias makes stored events called old read as events called current: the
// name a type had before it was renamed. Events are encoded under current.
// [Registry.Validate] checks that current is registered.
func (r *Registry) Alias(old, current string) {
	if old == "" || current == "" || old == current {
		panic(fmt.Sprintf("schema: Alias(%q, %q): two different non-empty names", old, current))
	}
	r.change(func(types *registryTypes) {
		if prev, dup := types.aliases[old]; dup {
			panic(fmt.Sprintf("schema: Alias(%q): already an alias of %q", old, prev))
		}
		types.aliases[old] = current
	})
}

// Upcast registers u to turn payloads of event type name at schema version
// from into payloads at version from+1. [Registry.Validate] checks that the
// upcasters of a type lead from the oldest one to its registered version
// without a gap.
func (r *Registry) Upcast(name string, from int, u Upcaster) {
	if name == "" || from < 1 || u == nil {
		panic(fmt.Sprintf("schema: Upcast(%q, %d): a name, a version from 1 and an upcaster", name, from))
	}
	r.change(func(types *registryTypes) {
		m := types.upcasters[name]
		if m == nil {
			m = map[int]Upcaster{}
			types.upcasters[name] = m
		}
		if _, dup := m[from]; dup {
			panic(fmt.Sprintf("schema: Upcast(%q, %d): registered twice", name, from))
		}
		m[from] = u
	})
}

// Validate checks the registry as a whole, once everything is registered:
// every alias names a registered type (and is not one itself), every
// upcaster belongs to a registered type and starts below its version, and
// the upcasters of a type form a chain without a gap up to its version. The
// error, which wraps [varve.ErrInvalidArgument], lists every problem.
func (r *Registry) Validate() error {
	types := r.types.Load()
	var errs []error
	for _, old := range sortedKeys(types.aliases) {
		current := types.aliases[old]
		if _, ok := types.byName[old]; ok {
			errs = append(errs, fmt.Errorf("alias %q is also a registered type", old))
		}
		if _, ok := types.byName[current]; !ok {
			errs = append(errs, fmt.Errorf("alias %q: %q is not registered", old, current))
		}
	}
	for _, name := range sortedKeys(types.upcasters) {
		et, ok := types.byName[name]
		if !ok {
			errs = append(errs, fmt.Errorf("upcasters of %q: the type is not registered", name))
			continue
		}
		m := types.upcasters[name]
		lowest := et.version
		for from := range m {
			if from >= et.version {
				errs = append(errs, fmt.Errorf("upcaster of %q from version %d: the type is registered at version %d", name, from, et.version))
			}
			lowest = min(lowest, from)
		}
		for v := lowest; v < et.version; v++ {
			if m[v] == nil {
				errs = append(errs, fmt.Errorf("upcasters of %q: none from version %d to %d", name, v, v+1))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("schema: %w: %w", varve.ErrInvalidArgument, errors.Join(errs...))
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Name returns the registered name of event e, which may be an E or a *E.
func (r *Registry) Name(e any) (string, error) {
	et, _, err := r.Lookup(e)
	if err != nil {
		return "", err
	}
	return et, nil
}

// Lookup returns the registered name of event e (an E or a *E) and e as a
// value.
func (r *Registry) Lookup(e any) (name string, value any, err error) {
	et, v, err := r.lookup(e)
	if err != nil {
		return "", nil, err
	}
	return et.name, v, nil
}

func (r *Registry) lookup(e any) (*eventType, any, error) {
	t := reflect.TypeOf(e)
	if t == nil {
		return nil, nil, fmt.Errorf("%w: nil event", ErrUnknownEventType)
	}
	types := r.types.Load()
	if et, ok := types.byType[t]; ok {
		return et, e, nil
	}
	if t.Kind() == reflect.Pointer {
		if et, ok := types.byType[t.Elem()]; ok {
			v := reflect.ValueOf(e)
			if v.IsNil() {
				return nil, nil, fmt.Errorf("%w: nil %v", ErrUnknownEventType, t)
			}
			return et, v.Elem().Interface(), nil
		}
	}
	return nil, nil, fmt.Errorf("%w: Go type %v is not registered", ErrUnknownEventType, t)
}

type schemaMeta struct {
	SchemaVersion int `json:"schema_version"`
}

// Encode encodes event e (an E or a *E) with c into a [varve.Event] of its
// registered name, with its schema version in the metadata when it is above
// 1; value is e as a value. The event's ID is left to the store.
func (r *Registry) Encode(c Codec, e any) (ev varve.Event, value any, err error) {
	et, v, err := r.lookup(e)
	if err != nil {
		return ev, nil, err
	}
	data, err := c.Marshal(v)
	if err != nil {
		return ev, nil, fmt.Errorf("encode %q: %w", et.name, err)
	}
	ev = varve.Event{Type: et.name, Data: data}
	if et.version > 1 {
		ev.Metadata, _ = json.Marshal(schemaMeta{SchemaVersion: et.version})
	}
	return ev, v, nil
}

// Decode decodes the payload of a stored event called name, at schema
// version 1 when its type is at a later one.
func (r *Registry) Decode(c Codec, name string, data []byte) (any, error) {
	return r.decode(c, name, data, nil)
}

// DecodeEvent decodes a stored event: its type name through the aliases,
// its payload from the schema version in its metadata through the
// upcasters, then into its Go type.
func (r *Registry) DecodeEvent(c Codec, e varve.RecordedEvent) (any, error) {
	return r.decode(c, e.Type, e.Data, e.Metadata)
}

func (r *Registry) decode(c Codec, name string, data, metadata []byte) (any, error) {
	types := r.types.Load()
	et, ok := types.byName[name]
	if !ok {
		if current, alias := types.aliases[name]; alias {
			et, ok = types.byName[current]
		}
		if !ok {
			return nil, &UnknownTypeError{Type: name}
		}
	}
	if et.version > 1 {
		version := 1
		if len(metadata) > 0 {
			var m schemaMeta
			if json.Unmarshal(metadata, &m) == nil && m.SchemaVersion > 0 {
				version = m.SchemaVersion
			}
		}
		if version > et.version {
			return nil, fmt.Errorf("%w: %q at version %d, registered at version %d", ErrSchemaVersion, name, version, et.version)
		}
		for ; version < et.version; version++ {
			u := types.upcasters[et.name][version]
			if u == nil {
				return nil, fmt.Errorf("%w: %q at version %d: no upcaster to version %d", ErrSchemaVersion, name, version, version+1)
			}
			var err error
			if data, err = u(data); err != nil {
				return nil, fmt.Errorf("upcast %q from version %d: %w", name, version, err)
			}
		}
	}
	e, err := et.decode(c, data)
	if err != nil {
		return nil, fmt.Errorf("decode %q: %w", name, err)
	}
	return e, nil
}

// Names returns the registered names, sorted; aliases are not included.
func (r *Registry) Names() []string { return sortedKeys(r.types.Load().byName) }
