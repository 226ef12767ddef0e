// Package teststore opens fresh, isolated stores on every backend for the
// tests of packages above the store (aggregate, subscription, delivery): a
// new memory backend, a SQLite file in the test's temporary directory, a
// PostgreSQL schema or a NATS stream of its own that is dropped when the test
// ends. [PostgresSchemaURL] and [NATSStreamURL] name such a schema or stream
// for a test that opens one store more than once, or in a child process. Server
// backends find their server through internal/testenv, so a missing server
// skips the test, or fails it with CI=true.
package teststore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	varvenats "github.com/varve-go/varve/backend/nats"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/internal/testenv"
	"github.com/varve-go/varve/shred"
)

// Kind is a backend tests can run on.
type Kind struct {
	Name string
	// Backend opens a new, empty backend of this kind; the caller closes it
	// (the test's cleanup also does, and drops what the backend created).
	Backend func(t testing.TB) varve.Backend
}

// Kinds are every backend the upper packages' tests run on.
var Kinds = []Kind{
	{"memory", func(testing.TB) varve.Backend { return memory.New() }},
	{"sqlite", SQLite},
	{"postgres", Postgres},
	{"nats", NATS},
}

// Open opens a store of the kind with cfg, closed when the test ends.
func (k Kind) Open(t testing.TB, cfg varve.Config) *varve.Store {
	t.Helper()
	s, err := varve.New(k.Backend(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// SQLite opens a SQLite backend on a new file in the test's temporary
// directory.
func SQLite(t testing.TB) varve.Backend {
	t.Helper()
	b, err := sqlite.New(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "varve.db")})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// Postgres opens a PostgreSQL backend in a schema of its own, dropped when
// the test ends.
func Postgres(t testing.TB) varve.Backend {
	t.Helper()
	cfg, err := postgres.ParseURL(PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := postgres.New(ctx, cfg)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// PostgresSchemaURL returns the URL of a new schema on the test PostgreSQL
// server (varve_schema set), for a test that opens the same store more than
// once, in other processes too. The first backend opened with it creates the
// schema; the schema is dropped when the test ends, after the cleanups
// registered later, so the caller closes its backends in a cleanup or
// before the end.
func PostgresSchemaURL(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatalf("parse postgres url: %v", err)
	}
	q := u.Query()
	q.Set("varve_schema", "varve_t_"+randomHex())
	u.RawQuery = q.Encode()
	raw := u.String()
	cfg, err := postgres.ParseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	// A backend of its own drops the schema: the test's are closed by now.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfg.NoMigrate = true
		if d, err := postgres.New(ctx, cfg); err == nil {
			if err := d.Drop(ctx); err != nil {
				t.Errorf("drop test schema %s: %v", cfg.Schema, err)
			}
			_ = d.Close()
		}
	})
	return raw
}

// NATS opens a NATS backend on a JetStream stream, subject prefix and
// buckets of its own, deleted when the test ends.
func NATS(t testing.TB) varve.Backend {
	t.Helper()
	cfg, err := varvenats.ParseURL(NATSStreamURL(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := varvenats.New(ctx, cfg)
	if err != nil {
		t.Fatalf("open nats: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// NATSStreamURL returns the URL of a new JetStream stream, subject prefix and
// buckets on the test NATS server (stream and prefix set), for a test that
// opens the same store more than once, in other processes too. The first
// backend opened with it creates them; they are deleted when the test ends,
// after the cleanups registered later, so the caller closes its backends in
// a cleanup or before the end.
func NATSStreamURL(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(testenv.NATSURL(t))
	if err != nil {
		t.Fatalf("parse nats url: %v", err)
	}
	id := randomHex()
	name := "VARVE_T_" + id
	q := u.Query()
	q.Set("stream", name)
	q.Set("prefix", "vt"+id)
	u.RawQuery = q.Encode()
	raw := u.String()
	cfg, err := varvenats.ParseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc, err := natsgo.Connect(cfg.URL)
		if err != nil {
			t.Errorf("delete test stream %s: %v", name, err)
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Errorf("delete test stream %s: %v", name, err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, s := range []string{name, "KV_" + name + "_snapshots", "KV_" + name + "_checkpoints", "KV_" + name + "_keys"} {
			if err := js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("delete test stream %s: %v", s, err)
			}
		}
	})
	return raw
}

func randomHex() string {
	var id [4]byte
	_, _ = rand.Read(id[:])
	return hex.EncodeToString(id[:])
}

// Each runs f as a parallel subtest per kind, named after it.
func Each(t *testing.T, f func(t *testing.T, k Kind)) {
	t.Helper()
	for _, k := range Kinds {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			f(t, k)
		})
	}
}

// OpenShredded opens a store of the kind whose Opener is a Shredder with a
// fixed test master key, both closed when the test ends; it skips the test
// on a backend that keeps no keys.
func (k Kind) OpenShredded(t testing.TB, cfg varve.Config) (*varve.Store, *shred.Shredder) {
	t.Helper()
	b := k.Backend(t)
	if _, ok := varve.As[varve.KeyStore](b); !ok {
		_ = b.Close()
		t.Skipf("%s keeps no keys", k.Name)
	}
	m, err := shred.NewMasterKey("test-master", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	sh, err := shred.New(b, shred.Config{Master: m})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Opener = sh
	s, err := varve.New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, sh
}
