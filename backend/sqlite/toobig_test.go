package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/varve-go/varve"
)

// TestTooBigIsInvalidArgument: a value over SQLite's length limit, which
// the Store's limits keep appends far from, is refused as the request's
// fault (ErrInvalidArgument), as on PostgreSQL.
func TestTooBigIsInvalidArgument(t *testing.T) {
	b, err := New(context.Background(), Config{Path: Memory})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.wconn.queryRow(context.Background(), "SELECT zeroblob(2000000000)", func([]driver.Value) {})
	if code(err) != sqliteTooBig {
		t.Fatalf("zeroblob over the limit: %v (code %d), want SQLITE_TOOBIG", err, code(err))
	}
	if err := explain(err); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("explain: %v, want ErrInvalidArgument", err)
	}
}
