package delivery_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
)

// FuzzAppendPayload: the hand-written encoder gives valid JSON that decodes
// to what encoding/json's encoding of the same payload decodes to.
func FuzzAppendPayload(f *testing.F) {
	f.Add("order-1", "OrderPaid", "sub", []byte(`{"a": [1, 2]}`), []byte{0xff, 0})
	f.Add("we\"ird\\\n\t<&>\u2028\xff", "t\x01", "s\u2029", []byte(`"x"`), []byte(` 12 `))
	f.Add("", "", "", []byte(nil), []byte(`{}`))
	f.Fuzz(func(t *testing.T, stream, typ, sub string, data, meta []byte) {
		d := delivery.Delivery{
			Subscription: sub, Attempt: 1, Key: delivery.Key(sub, varve.Position{Commit: 3, Seq: 9}),
			Event: varve.RecordedEvent{
				ID: uuid.New(), Stream: stream, Type: typ, Data: data, Metadata: meta, Version: 7,
				Position: varve.Position{Commit: 3, Seq: 9}, RecordedAt: time.Unix(1700000000, 123456789).UTC(),
			},
		}
		got := delivery.AppendPayload(nil, d)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %s", got)
		}
		want, err := json.Marshal(delivery.NewPayload(d))
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}
