package nats

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/filescan"
)

// hits counts the occurrences of pattern in the files under dir, by path
// relative to dir.
func hits(t *testing.T, dir string, pattern []byte) map[string]int {
	t.Helper()
	found, err := filescan.Count(dir, pattern)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestDeletedKeyLeavesTheFiles: on an in-process server with a store
// directory of its own, stopped after each step so that its files are
// written out, the bytes of a deleted key are in none of the files once
// DeleteKey has returned, while a key left in place still is. The bytes a
// rewrap replaced are not overwritten: the server dropped their message by
// the bucket's history limit, which leaves them in the key stream's block
// file.
func TestDeletedKeyLeavesTheFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	name := uniqueName("keys")
	step := func(f func(s *varve.Store)) {
		t.Helper()
		srv, err := startServer(dir, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.WaitForShutdown()
		defer srv.Shutdown()
		s, err := varve.New(open(t, testConfig(srv.ClientURL(), name)), varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		f(s)
	}
	kept, before, wrapped := make([]byte, 64), make([]byte, 64), make([]byte, 64)
	for _, p := range [][]byte{kept, before, wrapped} {
		_, _ = rand.Read(p)
	}
	var id uuid.UUID
	step(func(s *varve.Store) {
		if _, err := s.Keys().Put(ctx, varve.WrappedKey{Subject: "kept", ID: uuid.New(), Master: "m1", Wrapped: kept}); err != nil {
			t.Fatal(err)
		}
		k, err := s.Keys().Put(ctx, varve.WrappedKey{Subject: "erased", ID: uuid.New(), Master: "m1", Wrapped: before})
		if err != nil {
			t.Fatal(err)
		}
		id = k.ID
		k.Master, k.Wrapped = "m2", wrapped
		if ok, err := s.Keys().Rewrap(ctx, k, "m1"); !ok || err != nil {
			t.Fatalf("rewrap: %v %v", ok, err)
		}
	})
	blocks := "jetstream/$G/streams/KV_" + name + "_keys/msgs/"
	onlyBlocks := func(h map[string]int) bool {
		for path := range h {
			if !strings.HasPrefix(path, blocks) || !strings.HasSuffix(path, ".blk") {
				return false
			}
		}
		return true
	}
	if h := hits(t, dir, wrapped); len(h) == 0 || !onlyBlocks(h) {
		t.Fatalf("the key is in %v, want the key stream's blocks: the scan cannot fail", h)
	}
	step(func(s *varve.Store) {
		if ok, err := s.Keys().Delete(ctx, "erased", id); !ok || err != nil {
			t.Fatalf("delete: %v %v", ok, err)
		}
		if _, err := s.Keys().Get(ctx, "erased"); !errors.Is(err, varve.ErrKeyNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
	})
	if h := hits(t, dir, wrapped); len(h) > 0 {
		t.Fatalf("the deleted key is in %v", h)
	}
	if h := hits(t, dir, kept); len(h) == 0 {
		t.Fatal("the key left in place is in no file")
	}
	h := hits(t, dir, before)
	if !onlyBlocks(h) {
		t.Fatalf("the bytes the rewrap replaced are in %v, want the key stream's blocks at most", h)
	}
	t.Logf("the bytes the rewrap replaced are in %v", h)
}
