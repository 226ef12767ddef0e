package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
)

// pageSize is SQLite's default page size, which the backend keeps.
const pageSize = 4096

// pragmas reads auto_vacuum, page_count and freelist_count, and checks
// the page size.
func pragmas(t *testing.T, b *sqlite.Backend) (mode, pages, free int64) {
	t.Helper()
	var size int64
	err := b.ReadTx(context.Background(), func(tx *sql.Tx) error {
		return tx.QueryRow("SELECT a.auto_vacuum, p.page_count, f.freelist_count, s.page_size FROM pragma_auto_vacuum() a, pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s").
			Scan(&mode, &pages, &free, &size)
	})
	if err == nil && size != pageSize {
		t.Fatalf("page size %d, want %d", size, pageSize)
	}
	if err != nil {
		t.Fatal(err)
	}
	return mode, pages, free
}

// appendBytes appends n events of size bytes to stream.
func appendBytes(t *testing.T, b *sqlite.Backend, stream string, n, size int) {
	t.Helper()
	for i := 0; i < n; i += 100 {
		evs := make([]varve.Event, min(100, n-i))
		for j := range evs {
			evs[j] = varve.Event{ID: varve.NewEventID(), Type: "E", Data: make([]byte, size)}
		}
		if _, err := b.Append(context.Background(), varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestReclaimSpace: a new database uses incremental auto-vacuum; the pages
// a truncation frees stay in the file until ReclaimSpace gives them back,
// and the file shrinks by them once closed (its last checkpoint).
func TestReclaimSpace(t *testing.T) {
	ctx := context.Background()
	for _, path := range []string{"file", sqlite.Memory} {
		t.Run(path, func(t *testing.T) {
			if path == "file" {
				path = tempDB(t)
			}
			b, err := sqlite.New(ctx, sqlite.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if mode, _, _ := pragmas(t, b); mode != 2 {
				t.Fatalf("a new database has auto_vacuum %d, want 2 (incremental)", mode)
			}
			appendBytes(t, b, "big", 2000, 2000)
			appendBytes(t, b, "small", 10, 10)
			_, full, _ := pragmas(t, b)
			if err := b.Truncate(ctx, "big", 2001); err != nil {
				t.Fatal(err)
			}
			_, pages, free := pragmas(t, b)
			if pages != full || free < full/2 {
				t.Fatalf("after the truncation: %d pages, %d free, of %d", pages, free, full)
			}
			got, err := b.ReclaimSpace(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, after, left := pragmas(t, b)
			if left != 0 || after > pages-free || got != free*pageSize { // the pointer-map pages of freed pages go too
				t.Fatalf("ReclaimSpace said %d bytes; %d pages (%d free) before, %d (%d free) after", got, pages, free, after, left)
			}
			if again, err := b.ReclaimSpace(ctx); err != nil || again != 0 {
				t.Fatalf("a second ReclaimSpace: %d, %v", again, err)
			}
			if n := len(readStream(t, b, "small")); n != 10 {
				t.Fatalf("small has %d events after the vacuum, want 10", n)
			}
			if path == sqlite.Memory {
				return
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if size := fileSize(t, path); size > after*pageSize || size > full*pageSize/4 {
				t.Fatalf("the closed file has %d bytes; %d pages were full, %d are left", size, full, after)
			}
		})
	}
}

// TestReclaimSpaceOldFile: a database without incremental auto-vacuum (as
// files made before it) keeps its free pages: ReclaimSpace gives nothing
// back and the pages are reused by the next appends.
func TestReclaimSpaceOldFile(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	b, err := sqlite.New(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"PRAGMA auto_vacuum = NONE", "VACUUM"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b = open(t, sqlite.Config{Path: path})
	if mode, _, _ := pragmas(t, b); mode != 0 {
		t.Fatalf("the converted file has auto_vacuum %d, want 0", mode)
	}
	appendBytes(t, b, "big", 1000, 2000)
	_, full, _ := pragmas(t, b)
	if err := b.Truncate(ctx, "big", 1001); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ReclaimSpace(ctx); err != nil || got != 0 {
		t.Fatalf("ReclaimSpace on a file without incremental auto-vacuum: %d, %v", got, err)
	}
	_, _, free := pragmas(t, b)
	appendBytes(t, b, "again", 1000, 2000)
	_, pages, left := pragmas(t, b)
	if free < full/2 || pages > full+full/10 || left > free/10 {
		t.Fatalf("%d pages full, %d free after the truncation; %d pages (%d free) after as much again", full, free, pages, left)
	}
}

func readStream(t *testing.T, b *sqlite.Backend, stream string) []varve.RecordedEvent {
	t.Helper()
	evs, err := b.ReadStream(context.Background(), varve.StreamQuery{Stream: stream, Limit: 1000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}
