package schema_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/schema"
)

// OrderPlaced is at schema version 3: version 1 had "amount" in cents as a
// number, version 2 renamed it "cents", version 3 holds "total" as a
// string. It was stored as "PlaceOrder" before it was renamed.
type OrderPlaced struct {
	Total string `json:"total"`
}

type Cancelled struct{}

// rename returns an upcaster that renames a field of a JSON object.
func rename(from, to string) schema.Upcaster {
	return func(data []byte) ([]byte, error) {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, err
		}
		m[to] = m[from]
		delete(m, from)
		return json.Marshal(m)
	}
}

func registry() *schema.Registry {
	r := schema.NewRegistry()
	schema.RegisterVersion[OrderPlaced](r, "OrderPlaced", 3)
	schema.Register[Cancelled](r, "Cancelled")
	r.Alias("PlaceOrder", "OrderPlaced")
	r.Upcast("OrderPlaced", 1, rename("amount", "cents"))
	r.Upcast("OrderPlaced", 2, func(data []byte) ([]byte, error) {
		var v struct{ Cents json.Number }
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]string{"total": v.Cents.String() + "c"})
	})
	return r
}

func meta(v int) []byte { return []byte(`{"schema_version":` + string(rune('0'+v)) + `}`) }

func TestDecodeEvent(t *testing.T) {
	r := registry()
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		e    varve.RecordedEvent
		want any
		err  error
	}{
		{"version 1, no metadata", varve.RecordedEvent{Type: "OrderPlaced", Data: []byte(`{"amount":250}`)}, OrderPlaced{Total: "250c"}, nil},
		{"version 1 under the old name", varve.RecordedEvent{Type: "PlaceOrder", Data: []byte(`{"amount":7}`)}, OrderPlaced{Total: "7c"}, nil},
		{"version 2", varve.RecordedEvent{Type: "OrderPlaced", Data: []byte(`{"cents":30}`), Metadata: meta(2)}, OrderPlaced{Total: "30c"}, nil},
		{"version 3: no upcasting", varve.RecordedEvent{Type: "OrderPlaced", Data: []byte(`{"total":"1 EUR"}`), Metadata: meta(3)}, OrderPlaced{Total: "1 EUR"}, nil},
		{"metadata of another kind", varve.RecordedEvent{Type: "OrderPlaced", Data: []byte(`{"amount":1}`), Metadata: []byte(`not json`)}, OrderPlaced{Total: "1c"}, nil},
		{"a version 1 type ignores metadata", varve.RecordedEvent{Type: "Cancelled", Data: []byte(`{}`), Metadata: meta(9)}, Cancelled{}, nil},
		{"newer than the code", varve.RecordedEvent{Type: "OrderPlaced", Data: []byte(`{}`), Metadata: meta(4)}, nil, schema.ErrSchemaVersion},
		{"unknown type", varve.RecordedEvent{Type: "Refunded", Data: []byte(`{}`)}, nil, schema.ErrUnknownEventType},
		{"an upcaster fails", varve.RecordedEvent{Type: "OrderPlaced", Data: []byte(`[1]`)}, nil, errAny},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.DecodeEvent(schema.JSON{}, tc.e)
			switch {
			case tc.err == nil && err != nil:
				t.Fatal(err)
			case tc.err == errAny && err == nil, tc.err != nil && tc.err != errAny && !errors.Is(err, tc.err):
				t.Fatalf("error %v, want %v", err, tc.err)
			case !reflect.DeepEqual(got, tc.want):
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	_, err := r.DecodeEvent(schema.JSON{}, varve.RecordedEvent{Type: "Refunded"})
	var unknown *schema.UnknownTypeError
	if !errors.As(err, &unknown) || unknown.Type != "Refunded" || !strings.Contains(err.Error(), `"Refunded"`) {
		t.Fatalf("unknown type: %v", err)
	}
}

var errAny = errors.New("any error")

func TestValidate(t *testing.T) {
	up := func(data []byte) ([]byte, error) { return data, nil }
	cases := []struct {
		name  string
		build func(r *schema.Registry)
		want  []string // in the error; none: valid
	}{
		{"valid", func(*schema.Registry) {}, nil},
		{"alias of an unregistered type", func(r *schema.Registry) { r.Alias("Old", "Missing") }, []string{`alias "Old": "Missing" is not registered`}},
		{"alias that is a type", func(r *schema.Registry) { r.Alias("Cancelled", "OrderPlaced") }, []string{`alias "Cancelled" is also a registered type`}},
		{"upcaster of an unregistered type", func(r *schema.Registry) { r.Upcast("Missing", 1, up) }, []string{`upcasters of "Missing"`}},
		{"upcaster past the version", func(r *schema.Registry) { r.Upcast("OrderPlaced", 3, up) }, []string{`from version 3: the type is registered at version 3`}},
		{"upcaster of a version 1 type", func(r *schema.Registry) { r.Upcast("Cancelled", 1, up) }, []string{`"Cancelled" from version 1`}},
		{"two problems", func(r *schema.Registry) {
			r.Alias("Old", "Missing")
			r.Upcast("Missing", 2, up)
		}, []string{`alias "Old"`, `upcasters of "Missing"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := registry()
			tc.build(r)
			err := r.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, varve.ErrInvalidArgument) {
				t.Fatalf("error %v, want ErrInvalidArgument", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// A gap in a chain.
	r := schema.NewRegistry()
	schema.RegisterVersion[OrderPlaced](r, "OrderPlaced", 3)
	r.Upcast("OrderPlaced", 1, up)
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "none from version 2 to 3") {
		t.Fatalf("a gap: %v", err)
	}
}

func TestEncode(t *testing.T) {
	r := registry()
	cases := []struct {
		name string
		e    any
		typ  string
		meta []byte
	}{
		{"version 3", OrderPlaced{Total: "2 EUR"}, "OrderPlaced", []byte(`{"schema_version":3}`)},
		{"a pointer", &OrderPlaced{Total: "3 EUR"}, "OrderPlaced", []byte(`{"schema_version":3}`)},
		{"version 1: no metadata", Cancelled{}, "Cancelled", nil},
	}
	for _, tc := range cases {
		ev, v, err := r.Encode(schema.JSON{}, tc.e)
		if err != nil || ev.Type != tc.typ || !bytes.Equal(ev.Metadata, tc.meta) {
			t.Fatalf("%s: %+v %v", tc.name, ev, err)
		}
		back, err := r.DecodeEvent(schema.JSON{}, varve.RecordedEvent{Type: ev.Type, Data: ev.Data, Metadata: ev.Metadata})
		if err != nil || !reflect.DeepEqual(back, v) {
			t.Fatalf("%s: round trip %#v %v, want %#v", tc.name, back, err, v)
		}
	}
	if _, _, err := r.Encode(schema.JSON{}, 42); !errors.Is(err, schema.ErrUnknownEventType) {
		t.Fatalf("an unregistered Go type: %v", err)
	}
}
