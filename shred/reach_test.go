package shred_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsserver "github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	natsbackend "github.com/varve-go/varve/backend/nats"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/internal/filescan"
	"github.com/varve-go/varve/internal/pgcluster"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/projection/pgprojection"
	"github.com/varve-go/varve/projection/sqliteprojection"
	"github.com/varve-go/varve/schema"
	"github.com/varve-go/varve/shred"
	"github.com/varve-go/varve/subscription"
)

// The reach of an erasure, on the backends whose files a test can read: a
// known plaintext is planted in a sealed event, in an aggregate's sealed
// snapshot, in a parked record (a dispatcher's sink refuses the event)
// and in a projection's row; the subject is erased; the backend is forced
// to disk; and every byte of its files is scanned for the plaintext and
// for the subject's data key. Before the erasure the scan finds the
// projection's row (so it can fail); after it, nothing.

type person struct {
	Name string `json:"name"`
}

type renamed struct {
	Name string `json:"name"`
}

var personEvents = func() *schema.Registry {
	r := schema.NewRegistry()
	schema.Register[renamed](r, "Renamed")
	return r
}()

// scan returns the files under dir that hold pattern, and how often.
func scan(t *testing.T, dir string, pattern []byte) map[string]int {
	t.Helper()
	found, err := filescan.Count(dir, pattern)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// reach plants plain for subject in s through every path, erases the
// subject and returns the data key it had. proj gives the projection its
// handler (nil: none); beforeErase runs once all is planted.
func reach(t *testing.T, s *varve.Store, sh *shred.Shredder, plain string, proj func(p projection.Projection) projection.Projection, beforeErase func()) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const subject = "person-1"
	// A sealed event, and an aggregate with a sealed snapshot.
	ev, err := sh.SealFields(ctx, subject, varve.NewEvent("Registered", []byte(`{"id":1,"name":"`+plain+`-event"}`)), "name")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "person-1", varve.NoStream, ev); err != nil {
		t.Fatal(err)
	}
	repo, err := aggregate.New(s, aggregate.Definition[person]{Category: "persona", Events: personEvents, SchemaVersion: 1,
		Apply: func(p person, e any) person {
			if e, ok := e.(renamed); ok {
				p.Name = e.Name
			}
			return p
		}}, aggregate.Config{SnapshotEvery: 1, Sealer: sh, Subject: func(string) string { return subject }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Execute(ctx, "1", func(a *aggregate.Aggregate[person]) error { return a.Raise(renamed{Name: plain + "-snapshot"}) }); err != nil {
		t.Fatal(err)
	}
	// The snapshot, in the bucket or (NATS) in the stream's last commit.
	if snap, ok, _, err := s.Snapshots().Read(ctx, repo.Stream("1")); err != nil || !ok || !shred.IsSealed(snap.Data) {
		t.Fatalf("the snapshot: %v %v", ok, err)
	}
	// A parked record: the sink refuses the event.
	sub, err := subscription.Open(ctx, s, subscription.Config{Name: "refuser", Sealed: true, Filter: varve.Filter{Categories: []string{"person"}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := delivery.New(sub, delivery.SinkFunc(func(context.Context, delivery.Delivery) error {
		return &delivery.PermanentError{Err: errors.New("refused")}
	}), delivery.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(dctx) }()
	for {
		parked, err := d.Parked().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(parked) == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	// A projection's row, removed by DeleteErased after the erasure.
	var runner *projection.Runner
	if proj != nil {
		p := proj(projection.Projection{Name: "people", Version: 1, Filter: varve.Filter{Categories: []string{"person"}}, Erasures: true})
		if runner, err = projection.NewRunner(s, p, projection.Config{MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(pos varve.Position) {
		t.Helper()
		if runner == nil {
			return
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- runner.Run(rctx); stop() }()
		werr := runner.WaitFor(rctx, pos)
		stop()
		if err := <-done; err != nil {
			t.Fatalf("projection: %v", err)
		}
		if werr != nil {
			t.Fatal(werr)
		}
	}
	last, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(last)
	if beforeErase != nil {
		beforeErase()
	}
	key, err := shred.DataKey(ctx, sh, subject)
	if err != nil || len(key) != 32 {
		t.Fatalf("the data key: %v", err)
	}
	rep, err := sh.Erase(ctx, s, subject, shred.EraseOptions{Count: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != 2 || rep.Snapshots != 1 || len(rep.Streams) != 2 {
		t.Fatalf("the report: %+v, want 2 events in 2 streams and 1 snapshot", rep)
	}
	waitFor(rep.Position)
	for e, err := range s.ReadStream(ctx, "person-1") {
		if _, ok := shred.Erased(e.Data); err != nil || !ok {
			t.Fatalf("the event after the erasure: %s %v", e.Data, err)
		}
	}
	a, err := repo.Load(ctx, "1", aggregate.FromStore())
	if err != nil || a.State().Name != "" {
		t.Fatalf("the aggregate after the erasure: %+v %v", a, err)
	}
	return key
}

func TestErasureReachSQLite(t *testing.T) {
	dir := t.TempDir()
	b, err := sqlite.New(context.Background(), sqlite.Config{Path: filepath.Join(dir, "varve.db")})
	if err != nil {
		t.Fatal(err)
	}
	s, sh := open(t, b, shredConfig(t))
	plain := "PLANTED-" + randHex()
	key := reach(t, s, sh, plain, func(p projection.Projection) projection.Projection {
		p, err := sqliteprojection.Projection(s, p, func(ctx context.Context, tx *sql.Tx, b projection.Batch) error {
			if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS people (subject TEXT PRIMARY KEY, name TEXT)`); err != nil {
				return err
			}
			for _, e := range b.Events {
				var v struct{ Name string }
				if e.Type != "Registered" || json.Unmarshal(e.Data, &v) != nil {
					continue
				}
				if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO people VALUES (?, ?)`, e.Stream, v.Name); err != nil {
					return err
				}
			}
			_, err := sqliteprojection.DeleteErased(ctx, tx, b, "people", "subject")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}, func() {
		if h := scan(t, dir, []byte(plain)); len(h) == 0 {
			t.Fatal("the projection's row is in no file: the scan cannot fail")
		}
	})
	if err := s.Close(); err != nil { // the last connection checkpoints the WAL
		t.Fatal(err)
	}
	for what, p := range map[string][]byte{"plaintext": []byte(plain), "data key": key} {
		if h := scan(t, dir, p); len(h) > 0 {
			t.Errorf("the %s is in %v after the erasure", what, h)
		}
	}
}

func TestErasureReachPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Config{Settings: map[string]string{
		"wal_recycle": "off", "min_wal_size": "32MB", "max_wal_size": "32MB", "autovacuum": "off",
	}})
	if err != nil {
		pgcluster.Unavailable(t, "private PostgreSQL", err, "Install PostgreSQL's server binaries (initdb) or set VARVE_PG_BINDIR.")
	}
	t.Cleanup(func() { _ = c.Stop() })
	b, err := postgres.New(ctx, postgres.Config{ConnString: c.URL(), Schema: "reach"})
	if err != nil {
		t.Fatal(err)
	}
	s, sh := open(t, b, shredConfig(t))
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	run := func(qs ...string) {
		t.Helper()
		for _, q := range qs {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	run(`CREATE TABLE people (subject text PRIMARY KEY, name text)`)
	plain := "PLANTED-" + randHex()
	key := reach(t, s, sh, plain, func(p projection.Projection) projection.Projection {
		p, err := pgprojection.Projection(s, p, func(ctx context.Context, tx pgx.Tx, b projection.Batch) error {
			for _, e := range b.Events {
				var v struct{ Name string }
				if e.Type != "Registered" || json.Unmarshal(e.Data, &v) != nil {
					continue
				}
				if _, err := tx.Exec(ctx, `INSERT INTO people VALUES ($1, $2) ON CONFLICT (subject) DO UPDATE SET name = EXCLUDED.name`, e.Stream, v.Name); err != nil {
					return err
				}
			}
			_, err := pgprojection.DeleteErased(ctx, tx, b, "people", "subject")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}, func() {
		run("CHECKPOINT")
		if h := scan(t, c.DataDir(), []byte(plain)); len(h) == 0 {
			t.Fatal("the projection's row is in no file: the scan cannot fail")
		}
	})
	// What docs/privacy.md tells an operator to run after an erasure on
	// PostgreSQL: rewrite the tables that held the deleted rows, and let
	// the WAL that held them go.
	run("VACUUM FULL people", "VACUUM FULL reach.keys", "CHECKPOINT", "SELECT pg_switch_wal()", "CHECKPOINT", "SELECT pg_switch_wal()", "CHECKPOINT")
	for what, p := range map[string][]byte{"plaintext": []byte(plain), "data key": key} {
		if h := scan(t, c.DataDir(), p); len(h) > 0 {
			t.Errorf("the %s is in %v after the erasure", what, h)
		}
	}
}

func randHex() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestErasureReachNATS: the same on an in-process nats-server whose store
// directory the test owns, with writes synced as they are made
// (SyncAlways). The projection keeps its rows in a key-value bucket of the
// same server, as a NATS deployment would, and erases a subject's row with
// the server's secure delete, which overwrites the message's bytes.
func TestErasureReachNATS(t *testing.T) {
	dir := t.TempDir()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir,
		NoSigs: true, NoLog: true, SyncAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	shutdown := func() { ns.Shutdown(); ns.WaitForShutdown() }
	t.Cleanup(shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := natsbackend.New(ctx, natsbackend.Config{URL: ns.ClientURL(), Stream: "REACH"})
	if err != nil {
		t.Fatal(err)
	}
	s, sh := open(t, b, shredConfig(t))
	nc, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A bucket of history 1 made as nats.go makes one, but with message
	// deletes allowed (which a bucket refuses by default, for good).
	people, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KV_people", Subjects: []string{"$KV.people.>"},
		MaxMsgsPerSubject: 1, AllowRollup: true, AllowDirect: true, Discard: jetstream.DiscardNew, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "people")
	if err != nil {
		t.Fatal(err)
	}
	plain := "PLANTED-" + randHex()
	key := reach(t, s, sh, plain, func(p projection.Projection) projection.Projection {
		p.Handle = func(ctx context.Context, batch projection.Batch) error {
			for _, e := range batch.Events {
				var v struct{ Name string }
				if e.Type != "Registered" || json.Unmarshal(e.Data, &v) != nil {
					continue
				}
				if _, err := kv.Put(ctx, "people."+e.Stream, []byte(v.Name)); err != nil {
					return err
				}
			}
			for _, r := range batch.Erasures() {
				entry, err := kv.Get(ctx, "people."+r.Subject)
				if errors.Is(err, jetstream.ErrKeyNotFound) {
					batch.Erased(r, 0)
					continue
				}
				if err != nil {
					return err
				}
				if err := people.SecureDeleteMsg(ctx, entry.Revision()); err != nil {
					return err
				}
				batch.Erased(r, 1)
			}
			return nil
		}
		return p
	}, func() {
		if h := scan(t, dir, []byte(plain)); len(h) == 0 {
			t.Fatal("the projection's row is in no file: the scan cannot fail")
		}
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	shutdown() // the server writes what it holds and closes its files
	for what, p := range map[string][]byte{"plaintext": []byte(plain), "data key": key} {
		if h := scan(t, dir, p); len(h) > 0 {
			t.Errorf("the %s is in %v after the erasure", what, h)
		}
	}
}
