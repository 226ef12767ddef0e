package aggregate

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
)

// ErrUnknownEventType: an event's Go type or stored type name is not in the
// aggregate's [Registry].
var ErrUnknownEventType = errors.New("aggregate: unknown event type")

// Codec encodes event payloads and snapshot states.
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

// Registry maps event type names, as stored, to Go types and back. Register
// every event type before the registry is used; lookups are lock-free.
type Registry struct {
	mu    sync.Mutex // serializes Register
	types atomic.Pointer[registryTypes]
}

type registryTypes struct {
	byName map[string]*eventType
	byType map[reflect.Type]*eventType
}

type eventType struct {
	name   string
	decode func(c Codec, data []byte) (any, error)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	r := &Registry{}
	r.types.Store(&registryTypes{byName: map[string]*eventType{}, byType: map[reflect.Type]*eventType{}})
	return r
}

// Register adds event type E under name. Events of type E (or *E) can then
// be raised, and stored events called name are decoded into an E and handed
// to the apply function as an E. Register panics if name is empty, if E is a
// pointer or interface type, or if name or E is already registered: those
// are programming errors, as with http.ServeMux.
func Register[E any](r *Registry, name string) {
	t := reflect.TypeFor[E]()
	if name == "" {
		panic("aggregate: Register: empty event type name")
	}
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface {
		panic(fmt.Sprintf("aggregate: Register(%q): register the value type, not %v", name, t))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.types.Load()
	if _, dup := old.byName[name]; dup {
		panic(fmt.Sprintf("aggregate: Register: event type name %q registered twice", name))
	}
	if prev, dup := old.byType[t]; dup {
		panic(fmt.Sprintf("aggregate: Register(%q): %v is already registered as %q", name, t, prev.name))
	}
	et := &eventType{name: name, decode: func(c Codec, data []byte) (any, error) {
		var e E
		if err := c.Unmarshal(data, &e); err != nil {
			return nil, err
		}
		return e, nil
	}}
	next := &registryTypes{byName: make(map[string]*eventType, len(old.byName)+1), byType: make(map[reflect.Type]*eventType, len(old.byType)+1)}
	for k, v := range old.byName {
		next.byName[k] = v
	}
	for k, v := range old.byType {
		next.byType[k] = v
	}
	next.byName[name] = et
	next.byType[t] = et
	r.types.Store(next)
}

// Name returns the registered name of event e, which may be an E or a *E.
func (r *Registry) Name(e any) (string, error) {
	name, _, err := r.lookup(e)
	return name, err
}

func (r *Registry) lookup(e any) (string, any, error) {
	t := reflect.TypeOf(e)
	if t == nil {
		return "", nil, fmt.Errorf("%w: nil event", ErrUnknownEventType)
	}
	types := r.types.Load()
	if et, ok := types.byType[t]; ok {
		return et.name, e, nil
	}
	if t.Kind() == reflect.Pointer {
		if et, ok := types.byType[t.Elem()]; ok {
			v := reflect.ValueOf(e)
			if v.IsNil() {
				return "", nil, fmt.Errorf("%w: nil %v", ErrUnknownEventType, t)
			}
			return et.name, v.Elem().Interface(), nil
		}
	}
	return "", nil, fmt.Errorf("%w: Go type %v is not registered", ErrUnknownEventType, t)
}

// Decode decodes the payload of a stored event called name.
func (r *Registry) Decode(c Codec, name string, data []byte) (any, error) {
	et, ok := r.types.Load().byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not registered", ErrUnknownEventType, name)
	}
	e, err := et.decode(c, data)
	if err != nil {
		return nil, fmt.Errorf("decode %q: %w", name, err)
	}
	return e, nil
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	types := r.types.Load()
	out := make([]string, 0, len(types.byName))
	for n := range types.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
