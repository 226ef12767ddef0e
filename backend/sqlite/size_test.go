package sqlite_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
)

// TestSize: the database's pages and its write-ahead log grow by at least
// the bytes appended and count the log's file; an in-memory database has a size too; a closed
// backend says so.
func TestSize(t *testing.T) {
	ctx := context.Background()
	for _, path := range []string{"file", sqlite.Memory} {
		t.Run(path, func(t *testing.T) {
			if path == "file" {
				path = tempDB(t)
			}
			b := open(t, sqlite.Config{Path: path})
			before, err := b.Size(ctx)
			if err != nil || before <= 0 {
				t.Fatalf("an empty store: %d bytes, %v", before, err)
			}
			const data = 1 << 20
			for i := range 4 {
				if _, err := b.Append(ctx, varve.AppendRequest{Stream: "s", Expected: varve.Exact(varve.Version(i)),
					Events: []varve.Event{{ID: varve.NewEventID(), Type: "E", Data: make([]byte, data/4)}}}); err != nil {
					t.Fatal(err)
				}
			}
			after, err := b.Size(ctx)
			if err != nil || after-before < data {
				t.Fatalf("after %d bytes appended: %d bytes, before %d (%v)", data, after, before, err)
			}
			if path != sqlite.Memory {
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				wal, _ := os.Stat(path + "-wal")
				var walSize int64
				if wal != nil {
					walSize = wal.Size()
				}
				// The pages count those still in the log, as a checkpoint
				// leaves the file, which keeps the log's file for reuse.
				if after < fi.Size() || after < walSize+data {
					t.Fatalf("size %d, the file %d bytes and its log %d", after, fi.Size(), walSize)
				}
			}
			_ = b.Close()
			if _, err := b.Size(ctx); !errors.Is(err, varve.ErrClosed) {
				t.Fatalf("closed: %v", err)
			}
		})
	}
}
