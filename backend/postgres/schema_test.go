package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// TestSchemaNames: schema names that break out of SQL literals and quotes
// (issue 13's three payloads among them) are each a schema of that exact
// name, whose appends take positions from its own sequence and run nothing
// the name holds. The suffix keeps parallel runs apart and leaves the
// payloads intact.
func TestSchemaNames(t *testing.T) {
	sfx := "_" + randomSuffix()
	// The payload a'||'b once made appends draw from the sequence of the
	// schema "ab": make sure that one exists.
	sibling := open(t, config(t, "ab"+sfx))
	secret, _ := os.ReadFile("/etc/hostname") // what pg_read_file would show
	for _, name := range []string{
		"o'brien",
		"x'||pg_read_file('/etc/hostname')||'",
		"a'||'b",
		"with space",
		"MixedCase",
		`quo"te`,
		"ünïcødé",
		"dollar$$body",
		"$varve0$",
		"new\nline",
		`back\slash`,
		"*/ -- x",
		"semi;colon",
	} {
		t.Run(name, func(t *testing.T) {
			schema := name + sfx
			ctx := context.Background()
			b, err := postgres.New(ctx, config(t, schema))
			if err != nil {
				if errors.Is(err, varve.ErrInvalidArgument) {
					t.Fatalf("schema %q refused: %v", schema, err) // none of these needs to be
				}
				t.Fatalf("open schema %q: %v", schema, err)
			}
			t.Cleanup(func() { _ = b.Close() })
			if b.Schema() != (pgx.Identifier{schema}).Sanitize() {
				t.Fatalf("Schema() = %s", b.Schema())
			}
			var n int
			if err := b.Pool().QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil || n != 1 {
				t.Fatalf("%d schemas named %q (%v)", n, schema, err)
			}
			// The sequence default is nextval of a constant, the schema's
			// own sequence (a default that names it by a constant depends
			// on it).
			var def string
			var deps int
			err = b.Pool().QueryRow(ctx, `SELECT pg_get_expr(d.adbin, d.adrelid),
				(SELECT count(*) FROM pg_depend p WHERE p.classid = 'pg_attrdef'::regclass AND p.objid = d.oid
					AND p.refclassid = 'pg_class'::regclass AND p.refobjid = format('%I.event_seq', $1::text)::regclass)
				FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
				WHERE d.adrelid = format('%I.events', $1::text)::regclass AND a.attname = 'seq'`, schema).Scan(&def, &deps)
			if err != nil || deps != 1 || !strings.HasPrefix(def, "nextval('") || !strings.HasSuffix(def, "'::regclass)") {
				t.Fatalf("default of events.seq is %s, depending %d times on the schema's sequence (%v)", def, deps, err)
			}
			var siblingSeq int64
			if err := b.Pool().QueryRow(ctx, "SELECT last_value FROM "+sibling.Schema()+".event_seq").Scan(&siblingSeq); err != nil {
				t.Fatal(err)
			}
			s, err := varve.New(b, varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			// The fast path, then the append function (a deleted stream).
			var last varve.Position
			for i, exp := range []varve.ExpectedVersion{varve.NoStream, varve.Exact(2), varve.NoStream} {
				if i == 2 {
					if err := s.Delete(ctx, "s", varve.Any); err != nil {
						t.Fatal(err)
					}
				}
				res, err := s.Append(ctx, "s", exp, varve.Event{Type: "E"}, varve.Event{Type: "E"})
				if err != nil {
					if len(secret) > 0 && strings.Contains(err.Error(), strings.TrimSpace(string(secret))) {
						t.Fatalf("an append's error shows the content of /etc/hostname: %v", err)
					}
					t.Fatalf("append %d: %v", i, err)
				}
				last = res.Position
			}
			var own, siblingAfter int64
			if err := b.Pool().QueryRow(ctx, "SELECT last_value FROM "+b.Schema()+".event_seq").Scan(&own); err != nil {
				t.Fatal(err)
			}
			if err := b.Pool().QueryRow(ctx, "SELECT last_value FROM "+sibling.Schema()+".event_seq").Scan(&siblingAfter); err != nil {
				t.Fatal(err)
			}
			if uint64(own) != last.Seq || siblingAfter != siblingSeq {
				t.Fatalf("the last append has seq %d, the schema's sequence is at %d, the sibling's moved from %d to %d",
					last.Seq, own, siblingSeq, siblingAfter)
			}
			waitForPosition(t, b, last)
			var got []string
			for e, err := range s.ReadAll(ctx, varve.Start) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%s@%d", e.Stream, e.Version))
			}
			if fmt.Sprint(got) != "[s@1 s@2]" {
				t.Fatalf("$all of schema %q: %v", schema, got)
			}
			if err := s.Checkpoints().Save(ctx, "c", last); err != nil {
				t.Fatal(err)
			}
			if pos, ok, err := s.Checkpoints().Load(ctx, "c"); err != nil || !ok || pos != last {
				t.Fatalf("checkpoint: %v %v %v", pos, ok, err)
			}
		})
	}
}

// waitForPosition waits until $all of b reaches pos: other sessions on the
// server may hold its horizon back for a while.
func waitForPosition(t testing.TB, b *postgres.Backend, pos varve.Position) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		last, err := b.LastPosition(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !last.Less(pos) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("$all still at %s after 30s, waiting for %s", last, pos)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPlansBeforeAnalyze prepares every statement of the backend in a new
// schema, before anything has analyzed its tables, and checks that the
// generic plan (the one a connection keeps once it prefers it) reads no
// table of the schema whole. Such a plan stays in use as the tables grow,
// until autovacuum analyzes them: a join of event_tags to events planned
// this way made every query read scan all events.
func TestPlansBeforeAnalyze(t *testing.T) {
	cfg := config(t, fmt.Sprintf("%s_plans", testSchema))
	b := open(t, cfg)
	conn := testConn(t, cfg.ConnString)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	stmts := postgres.Statements(b)
	names := slices.Sorted(maps.Keys(stmts))
	for _, name := range names {
		sd, err := conn.Prepare(ctx, name, stmts[name])
		if err != nil {
			t.Errorf("%s: prepare: %v", name, err)
			continue
		}
		args := make([]string, len(sd.ParamOIDs))
		for i := range args {
			args[i] = "NULL"
		}
		call := "EXPLAIN EXECUTE " + pgx.Identifier{name}.Sanitize()
		if len(args) > 0 {
			call += "(" + strings.Join(args, ", ") + ")"
		}
		rows, err := conn.Query(ctx, call)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, line := range plan {
			if strings.Contains(line, "Seq Scan on ") {
				t.Errorf("%s: the generic plan before ANALYZE scans a table whole:\n%s", name, strings.Join(plan, "\n"))
				break
			}
		}
	}
	if len(names) < 20 {
		t.Errorf("%d statements checked, want all of them: %v", len(names), names)
	}
}
