package open_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
)

func TestBackend(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct {
		url  string
		name string // the backend's name, or "" for an error
	}{
		{"memory:", "memory"},
		{"sqlite://" + filepath.ToSlash(filepath.Join(dir, "a.db")), "sqlite"},
		{"sqlite::memory:", "sqlite"},
		{"memory:?x=1", ""},
		{"memory://host", ""},
		{"nope://x", ""},
		{"no-scheme", ""},
		{"sqlite://" + filepath.ToSlash(filepath.Join(dir, "b.db")) + "?unknown=1", ""},
		{"sqlite://u:s3cretpw@/x.db", ""},
		{"postgres://u:s3cretpw@127.0.0.1:5432/test?varve_schema=bad;drop", ""},
		{"nats://s3cretpw@127.0.0.1:4222?nope=1", ""},
	} {
		t.Run(tc.url, func(t *testing.T) {
			b, err := open.Backend(ctx, tc.url)
			if tc.name == "" {
				if !errors.Is(err, varve.ErrInvalidArgument) {
					t.Fatalf("got %v, want ErrInvalidArgument", err)
				}
				if strings.Contains(err.Error(), "s3cretpw") {
					t.Fatalf("error shows the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if got := b.Features().Name; got != tc.name {
				t.Fatalf("opened %q, want %q", got, tc.name)
			}
		})
	}
}

func ExampleStore() {
	store, err := open.Store(context.Background(), "memory:", varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	res, err := store.Append(context.Background(), "order-1", varve.NoStream, varve.NewEvent("OrderPlaced", []byte(`{}`)))
	if err != nil {
		panic(err)
	}
	fmt.Println("order-1 at version", res.LastVersion)
	// Output: order-1 at version 1
}
