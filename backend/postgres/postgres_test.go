package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/internal/testenv"
)

// testSchema is the schema of this test run; TestMain drops it.
var (
	testSchema = func() string {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return "varve_test_" + hex.EncodeToString(b[:])
	}()
	schemaMu   sync.Mutex
	schemaURLs = map[string]string{} // schema -> connection string, to drop
)

func TestMain(m *testing.M) {
	code := m.Run()
	schemaMu.Lock()
	for schema, url := range schemaURLs {
		if err := dropSchema(url, schema); err != nil {
			fmt.Fprintf(os.Stderr, "drop test schema %s: %v\n", schema, err)
		}
	}
	schemaMu.Unlock()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func dropSchema(url, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// pgxpool's parser knows the pool_* parameters a test URL may carry.
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, pc.ConnConfig)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}

// testConn is a connection of its own to the server of connString, closed
// when the test ends.
func testConn(t testing.TB, connString string) *pgx.Conn {
	t.Helper()
	pc, err := pgxpool.ParseConfig(connString) // knows the pool_* parameters
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(context.Background(), pc.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// config returns a Config for the test server in the given schema, dropped
// when the tests end.
func config(t testing.TB, schema string) postgres.Config {
	t.Helper()
	raw := testenv.PostgresURL(t)
	cfg, err := postgres.ParseURL(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	cfg.Schema = schema
	schemaMu.Lock()
	schemaURLs[schema] = cfg.ConnString
	schemaMu.Unlock()
	return cfg
}

func open(t testing.TB, cfg postgres.Config) *postgres.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := postgres.New(ctx, cfg)
	if err != nil {
		t.Fatalf("open backend: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Factory{
		New: func(t testing.TB) varve.Backend { return open(t, config(t, testSchema)) },
		Capabilities: varve.Capabilities{Watch: true, Filter: true, Tags: true, PositionNumbers: true, MultiAppend: true, Snapshots: true,
			Checkpoints: true, ListCheckpoints: true, ListStreams: true, Leases: true, Keys: true, Durable: true},
	})
}
