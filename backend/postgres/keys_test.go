package postgres_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/internal/filescan"
	"github.com/varve-go/varve/internal/pgcluster"
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

// TestDeletedKeyInTheFiles follows the bytes of a deleted key through a
// private cluster's data directory, with the smallest WAL, WAL segments
// removed rather than recycled (wal_recycle=off), full-page writes on, and
// no autovacuum (the test vacuums). After the deletion, a VACUUM, a
// CHECKPOINT, a switch to a new WAL segment and another CHECKPOINT, the
// WAL and every file but the keys table's hold no copy; the table's page
// may still hold one in its free space, which VACUUM pruned but did not
// overwrite (on PostgreSQL 15 it does: the key was stored after the one
// that stays, below it in the page). After a VACUUM FULL, which rewrites the table,
// and the same CHECKPOINTs, no file holds it.
func TestDeletedKeyInTheFiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Config{Settings: map[string]string{
		"wal_recycle":      "off",
		"min_wal_size":     "32MB",
		"max_wal_size":     "32MB",
		"full_page_writes": "on",
		"autovacuum":       "off",
	}})
	if err != nil {
		pgcluster.Unavailable(t, "private PostgreSQL", err, "Install PostgreSQL's server binaries (initdb) or set VARVE_PG_BINDIR.")
	}
	t.Cleanup(func() { _ = c.Stop() })
	b := open(t, postgres.Config{ConnString: c.URL(), Schema: "shred"})
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn := testConn(t, c.URL())
	run := func(qs ...string) {
		t.Helper()
		for _, q := range qs {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	table := func() string {
		t.Helper()
		var p string
		if err := conn.QueryRow(ctx, "SELECT pg_relation_filepath('shred.keys')").Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keys := s.Keys()
	kept, erased := make([]byte, 64), make([]byte, 64)
	_, _ = rand.Read(kept)
	_, _ = rand.Read(erased)
	if _, err := keys.Put(ctx, varve.WrappedKey{Subject: "kept", ID: uuid.New(), Master: "m1", Wrapped: kept}); err != nil {
		t.Fatal(err)
	}
	k, err := keys.Put(ctx, varve.WrappedKey{Subject: "erased", ID: uuid.New(), Master: "m1", Wrapped: erased})
	if err != nil {
		t.Fatal(err)
	}
	run("CHECKPOINT")
	h := hits(t, c.DataDir(), erased)
	walHits := 0
	for path, n := range h {
		if filepath.Dir(path) == "pg_wal" {
			walHits += n
		}
	}
	if h[table()] == 0 || walHits == 0 {
		t.Fatalf("the key is in %v, want the table's file %s and the WAL: the scan cannot fail", h, table())
	}

	if ok, err := keys.Delete(ctx, "erased", k.ID); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	run("VACUUM shred.keys", "CHECKPOINT", "SELECT pg_switch_wal()", "CHECKPOINT")
	h = hits(t, c.DataDir(), erased)
	inTable := h[table()]
	delete(h, table())
	if len(h) > 0 || inTable > 1 {
		t.Fatalf("after VACUUM and the WAL's removal the deleted key is in %v and %d times in the table's file %s, want at most once in the table's file alone", h, inTable, table())
	}
	t.Logf("after VACUUM and the WAL's removal the deleted key is %d times in the free space of the table's page (%s), nowhere else", inTable, table())

	run("VACUUM FULL shred.keys", "CHECKPOINT", "SELECT pg_switch_wal()", "CHECKPOINT")
	if h := hits(t, c.DataDir(), erased); len(h) > 0 {
		t.Fatalf("after VACUUM FULL the deleted key is in %v", h)
	}
	if h := hits(t, c.DataDir(), kept); h[table()] == 0 {
		t.Fatalf("the key that stays is in %v, not in the table's file %s", h, table())
	}
	if got, err := keys.Get(ctx, "kept"); err != nil || !bytes.Equal(got.Wrapped, kept) {
		t.Fatalf("the key that stays: %+v %v", got, err)
	}
}
