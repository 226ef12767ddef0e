package open_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/shred"
)

// TestMasterKeyFromEnv: with a master key in the environment a store
// opens sealed events; without one it has no Shredder; a malformed key
// fails the opening without showing the key.
func TestMasterKeyFromEnv(t *testing.T) {
	ctx := context.Background()
	t.Setenv(open.MasterKeyEnv, "")
	s, err := open.Store(ctx, "memory:", varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.Shredder(s); !errors.Is(err, varve.ErrNotSupported) || !strings.Contains(err.Error(), open.MasterKeyEnv) {
		t.Fatalf("a store without a master key: %v", err)
	}
	s.Close()

	text, _ := shred.NewMasterKeyText("k1")
	t.Setenv(open.MasterKeyEnv, text)
	s, err = open.Store(ctx, "memory:", varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sh, err := open.Shredder(s)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := sh.Seal(ctx, "u1", varve.NewEvent("T", []byte("plain")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "s-1", varve.NoStream, ev); err != nil {
		t.Fatal(err)
	}
	for e, err := range s.ReadStream(ctx, "s-1") {
		if err != nil || string(e.Data) != "plain" {
			t.Fatalf("read: %q %v", e.Data, err)
		}
	}

	t.Setenv(open.MasterKeyEnv, "k1:not-a-key-secret-bits")
	_, err = open.Store(ctx, "memory:", varve.Config{})
	if !errors.Is(err, shred.ErrMasterKey) || strings.Contains(err.Error(), "secret-bits") {
		t.Fatalf("a malformed key: %v", err)
	}
}
