package sqlite

import (
	"bytes"
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/filescan"
)

// hits counts the occurrences of pattern in the files under dir.
func hits(t *testing.T, dir string, pattern []byte) map[string]int {
	t.Helper()
	found, err := filescan.Count(dir, pattern)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// checkpoint copies the WAL into the file and truncates it, through a
// connection of its own.
func checkpoint(t *testing.T, path string) {
	t.Helper()
	c, err := openConn(path, "mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if _, err := c.exec(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
}

func pattern(t *testing.T, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	_, _ = rand.Read(p)
	return p
}

// TestDeletedKeyLeavesTheFiles: the wrapped bytes of a deleted key, and
// the bytes it had before a rewrap, are in none of the files of the
// database (file, WAL, shared memory) once DeleteKey returns, while a key
// left in place still is.
func TestDeletedKeyLeavesTheFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.db")
	b := openBackend(t, Config{Path: path})
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys := s.Keys()

	kept, first, second := pattern(t, 64), pattern(t, 64), pattern(t, 80)
	if _, err := keys.Put(ctx, varve.WrappedKey{Subject: "kept", ID: uuid.New(), Master: "m1", Wrapped: kept}); err != nil {
		t.Fatal(err)
	}
	k, err := keys.Put(ctx, varve.WrappedKey{Subject: "erased", ID: uuid.New(), Master: "m1", Wrapped: first})
	if err != nil {
		t.Fatal(err)
	}
	checkpoint(t, path)
	if h := hits(t, dir, first); h["keys.db"] == 0 {
		t.Fatalf("the key's bytes are not in the file after a checkpoint (%v): the scan cannot fail", h)
	}
	k.Master, k.Wrapped = "m2", second
	if ok, err := keys.Rewrap(ctx, k, "m1"); !ok || err != nil {
		t.Fatalf("rewrap: %v %v", ok, err)
	}
	checkpoint(t, path)
	if h := hits(t, dir, second); h["keys.db"] == 0 {
		t.Fatalf("the rewrapped key's bytes are not in the file after a checkpoint (%v)", h)
	}
	if h := hits(t, dir, first); len(h) > 0 {
		t.Fatalf("the bytes of the key before its rewrap are in %v", h)
	}
	if ok, err := keys.Delete(ctx, "erased", k.ID); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	// The backend's own checkpoint, with no reader in its way.
	if st := b.Stats(); st.KeyCheckpointsBusy != 0 {
		t.Fatalf("stats %+v", st)
	}
	for _, p := range [][]byte{first, second} {
		if h := hits(t, dir, p); len(h) > 0 {
			t.Fatalf("the deleted key's bytes are in %v", h)
		}
	}
	if h := hits(t, dir, kept); h["keys.db"] == 0 {
		t.Fatalf("the bytes of the key left in place are gone: %v", h)
	}
	if got, err := keys.Get(ctx, "kept"); err != nil || !bytes.Equal(got.Wrapped, kept) {
		t.Fatalf("the key left in place: %+v %v", got, err)
	}
}

// TestDeletedKeyBehindAReader: a reader of an older snapshot keeps the
// checkpoint after a deletion from truncating the WAL, which still holds
// the key's page; the deletion is done all the same, the miss is counted,
// and the next checkpoint after the reader leaves removes the bytes.
func TestDeletedKeyBehindAReader(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.db")
	b := openBackend(t, Config{Path: path, BusyTimeout: 50 * time.Millisecond})
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wrapped := pattern(t, 64)
	k, err := s.Keys().Put(ctx, varve.WrappedKey{Subject: "erased", ID: uuid.New(), Master: "m1", Wrapped: wrapped})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := openConn(path, "mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer reader.close()
	if _, err := reader.exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.exec(ctx, "SELECT count(*) FROM keys"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Keys().Delete(ctx, "erased", k.ID); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if st := b.Stats(); st.KeyCheckpointsBusy != 1 {
		t.Fatalf("stats %+v, want a busy checkpoint", st)
	}
	if h := hits(t, dir, wrapped); h["keys.db-wal"] == 0 {
		t.Fatalf("the WAL behind a reader does not hold the key (%v): the scan cannot fail", h)
	}
	if _, err := reader.exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	checkpoint(t, path)
	if h := hits(t, dir, wrapped); len(h) > 0 {
		t.Fatalf("the deleted key's bytes are in %v", h)
	}
}
