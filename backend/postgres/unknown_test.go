package postgres_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/varve-go/varve/backend/postgres"
)

// TestLostInFlight: which failures of a write leave its outcome unknown.
// The fault itself (a primary killed while an append waits for its
// synchronous standby) is made in internal/pgchaos's TestUnknownOutcome.
func TestLostInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection lost mid-statement", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"cannot connect", &pgconn.ConnectError{}, false},
		{"version conflict", &pgconn.PgError{Code: "VV001"}, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"query cancelled", &pgconn.PgError{Code: "57014"}, false},
		{"no rows", pgx.ErrNoRows, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := postgres.LostInFlight(tc.err); got != tc.want {
				t.Fatalf("lostInFlight(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	if postgres.LostInFlight(errors.New("message body too large")) {
		t.Fatal("a refused oversized message is not lost in flight")
	}
}
