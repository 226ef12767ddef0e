package gojson_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/aggregate/gojson"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/schema"
)

// The loadtest's events (seed 001's user whose email changes).
type userRegistered struct {
	Email string `json:"email"`
}

type emailChanged struct {
	Email string `json:"email"`
}

type user struct {
	Email   string `json:"email"`
	Changes int    `json:"changes"`
}

var codecs = []struct {
	name  string
	codec schema.Codec
}{{"json", schema.JSON{}}, {"gojson", gojson.Codec{}}}

// BenchmarkDecode decodes one stored event through the registry, as a
// load does. Compare: go test -bench Decode -count 6 ./aggregate/gojson/
func BenchmarkDecode(b *testing.B) {
	events := schema.NewRegistry()
	schema.Register[emailChanged](events, "EmailChanged")
	data := []byte(`{"email":"user-1234-changed-17@example.com"}`)
	for _, c := range codecs {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := events.Decode(c.codec, "EmailChanged", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoad loads a user from a snapshot and the 10 events after it,
// from the memory backend, without the cache: what the loadtest's
// snapshots-no-cache cycle spends decoding.
func BenchmarkLoad(b *testing.B) {
	for _, c := range codecs {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			store, err := varve.New(memory.New(), varve.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			events := schema.NewRegistry()
			schema.Register[userRegistered](events, "UserRegistered")
			schema.Register[emailChanged](events, "EmailChanged")
			users, err := aggregate.New(store, aggregate.Definition[user]{
				Category: "user", Events: events, Codec: c.codec,
				Apply: func(u user, e any) user {
					switch e := e.(type) {
					case userRegistered:
						u.Email = e.Email
					case emailChanged:
						u.Email = e.Email
						u.Changes++
					}
					return u
				},
			}, aggregate.Config{SnapshotEvery: 100})
			if err != nil {
				b.Fatal(err)
			}
			for n := range 110 {
				if _, err := users.Execute(ctx, "u-1", func(a *aggregate.Aggregate[user]) error {
					if a.Version() == 0 {
						return a.Raise(userRegistered{Email: "u-1@example.com"})
					}
					return a.Raise(emailChanged{Email: fmt.Sprintf("u-1-%d@example.com", n)})
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				u, err := users.Load(ctx, "u-1")
				if err != nil || u.State().Changes != 109 {
					b.Fatalf("%+v %v", u.State(), err)
				}
			}
		})
	}
}
