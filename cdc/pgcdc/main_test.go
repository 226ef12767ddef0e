package pgcdc_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/varve-go/varve/cdc/pgcdc"
	"github.com/varve-go/varve/internal/pgcluster"
	"go.uber.org/goleak"
)

var cluster pgcluster.Shared

func TestMain(m *testing.M) {
	os.Exit(pgcluster.Main(m, &cluster, pgcluster.Logical(), func() error { return goleak.Find() }))
}

var seq atomic.Int64

// fixture is one test's publication, slot and tables on the private cluster.
type fixture struct {
	t    *testing.T
	url  string
	conn *pgx.Conn
	name string // slot and publication
}

func newFixture(t *testing.T, tables ...string) *fixture {
	t.Helper()
	url := cluster.URL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(t.Name()))
	f := &fixture{t: t, url: url, conn: conn, name: fmt.Sprintf("cdc_%.40s_%d", name, seq.Add(1))}
	// Each fixture's tables live in a schema of its own.
	f.exec("CREATE SCHEMA " + f.name)
	f.conn.Close(ctx)
	f.url += "&search_path=" + f.name
	if f.conn, err = pgx.Connect(ctx, f.url); err != nil {
		t.Fatalf("connect: %v", err)
	}
	for _, ddl := range tables {
		f.exec(ddl)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn := f.conn // a server restart replaces it
		if err := pgcdc.DropSlot(ctx, conn, f.name); err != nil {
			t.Errorf("drop slot: %v", err)
		}
		if err := pgcdc.DropPublication(ctx, conn, f.name); err != nil {
			t.Errorf("drop publication: %v", err)
		}
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+f.name+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
		conn.Close(ctx)
	})
	return f
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.conn.Exec(context.Background(), sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

func (f *fixture) config(tables ...string) pgcdc.Config {
	for i, t := range tables {
		tables[i] = f.name + "." + t
	}
	return pgcdc.Config{ConnString: f.url, Slot: f.name, Publication: f.name, Tables: tables, StatusInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{f.t}, nil))}
}

// testWriter writes a stream's log lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (f *fixture) start(cfg pgcdc.Config) *pgcdc.Stream {
	f.t.Helper()
	s, err := pgcdc.Start(context.Background(), cfg)
	if err != nil {
		f.t.Fatalf("start: %v", err)
	}
	f.t.Cleanup(func() { _ = s.Close() })
	return s
}

// next returns the next transaction, failing the test after a minute.
func next(t *testing.T, s *pgcdc.Stream) *pgcdc.Transaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return tx
}
