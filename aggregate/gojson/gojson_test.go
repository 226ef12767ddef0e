package gojson_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/aggregate/gojson"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/schema"
)

type line struct {
	SKU   string   `json:"sku"`
	Qty   int      `json:"qty"`
	Price float64  `json:"price"`
	Tags  []string `json:"tags,omitempty"`
}

type order struct {
	ID        string            `json:"id"`
	Placed    time.Time         `json:"placed"`
	Lines     []line            `json:"lines"`
	Note      *string           `json:"note"`
	Blob      []byte            `json:"blob,omitempty"`
	Attrs     map[string]string `json:"attrs,omitempty"`
	Raw       json.RawMessage   `json:"raw,omitempty"`
	Big       int64             `json:"big"`
	Unsigned  uint64            `json:"unsigned"`
	Flag      bool              `json:"flag"`
	private   int
	Untagged  string
	Skipped   string `json:"-"`
	Quoted    int    `json:"quoted,string"`
	Interface any    `json:"interface"`
}

// TestSameJSON: what gojson writes, encoding/json writes too, byte for
// byte, and each reads the other's output into the same value.
func TestSameJSON(t *testing.T) {
	note := "gift <wrap> & \"bow\" é ☃ \u2028"
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"struct", order{
			ID: "o-1", Placed: time.Date(2026, 11, 23, 23, 48, 19, 123456789, time.FixedZone("x", 3600)),
			Lines: []line{{"A-1", 2, 10.5, []string{"x"}}, {"B-2", 1, 1e21, nil}}, Note: &note,
			Blob: []byte{0, 1, 2, 255}, Attrs: map[string]string{"b": "2", "a": "1"}, Raw: json.RawMessage(`{"k":[1,2]}`),
			Big: -1 << 62, Unsigned: 1<<64 - 1, Flag: true, private: 7, Untagged: "u", Skipped: "s", Quoted: 42,
			Interface: map[string]any{"n": 1.5},
		}},
		{"zero struct", order{}},
		{"empty lines", order{Lines: []line{}}},
		{"map", map[string]int{"z": 1, "a": 2}},
		{"slice", []string{"a", "", "\x00"}},
		{"string", "line\nbreak\ttab"},
		{"float", 0.1},
		{"nil", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gojson.Codec{}.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("gojson wrote\n%s\nencoding/json\n%s", got, want)
			}
			if tc.v == nil {
				return
			}
			typ := reflect.TypeOf(tc.v)
			a, b := reflect.New(typ), reflect.New(typ)
			if err := json.Unmarshal(got, a.Interface()); err != nil {
				t.Fatal(err)
			}
			if err := (gojson.Codec{}).Unmarshal(want, b.Interface()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a.Interface(), b.Interface()) {
				t.Fatalf("decoded differently:\nencoding/json %+v\ngojson        %+v", a.Elem(), b.Elem())
			}
		})
	}
}

// TestBadInput: what encoding/json refuses, gojson refuses too.
func TestBadInput(t *testing.T) {
	for _, in := range []string{``, `{`, `{"id":}`, `{"qty":"two"}`, `[1,2]`, `{"sku":"a"} x`, `nul`, `{"qty":1e400}`} {
		var std, fast line
		stdErr := json.Unmarshal([]byte(in), &std)
		fastErr := gojson.Codec{}.Unmarshal([]byte(in), &fast)
		if stdErr == nil {
			t.Fatalf("encoding/json accepted %q: the case is wrong", in)
		}
		if fastErr == nil {
			t.Errorf("gojson accepted %q (encoding/json: %v)", in, stdErr)
		}
	}
	if _, err := (gojson.Codec{}).Marshal(make(chan int)); err == nil {
		t.Error("gojson marshalled a channel")
	}
}

type account struct {
	Owner   string `json:"owner"`
	Balance int64  `json:"balance"`
}

type opened struct {
	Owner string `json:"owner"`
}

type deposited struct {
	Amount int64 `json:"amount"`
}

func accounts(t *testing.T, store *varve.Store, codec schema.Codec) *aggregate.Repository[account] {
	t.Helper()
	events := schema.NewRegistry()
	schema.Register[opened](events, "Opened")
	schema.Register[deposited](events, "Deposited")
	repo, err := aggregate.New(store, aggregate.Definition[account]{
		Category: "account", Events: events, Codec: codec,
		Apply: func(a account, e any) account {
			switch e := e.(type) {
			case opened:
				a.Owner = e.Owner
			case deposited:
				a.Balance += e.Amount
			}
			return a
		},
	}, aggregate.Config{SnapshotEvery: 7})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// TestStoresInterchange: events and snapshots written through one codec
// load through the other, on every backend.
func TestStoresInterchange(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		store := k.Open(t, varve.Config{})
		ctx := context.Background()
		codecs := []schema.Codec{schema.JSON{}, gojson.Codec{}}
		for i, w := range codecs {
			r := codecs[1-i]
			id := fmt.Sprintf("acc-%d", i)
			writer := accounts(t, store, w)
			var want int64
			for n := range 20 {
				if _, err := writer.Execute(ctx, id, func(a *aggregate.Aggregate[account]) error {
					if a.Version() == 0 {
						return a.Raise(opened{Owner: "ann"})
					}
					want += int64(n)
					return a.Raise(deposited{Amount: int64(n)})
				}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := accounts(t, store, r).Load(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if s := got.State(); s.Owner != "ann" || s.Balance != want || got.Version() != 20 {
				t.Fatalf("written with %T, read with %T: %+v at version %d, want ann %d at 20", w, r, s, got.Version(), want)
			}
		}
	})
}
