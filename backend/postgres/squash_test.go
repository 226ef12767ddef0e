package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/internal/migrate"
)

// historyVersion is the version the migrations of the squashed history
// (testdata/migrations-v13) end at, that of the baseline.
const historyVersion = 13

// catalogSQL lists what a schema holds, one object or column per row:
// relations, columns with their types and defaults, indexes, constraints,
// sequences, triggers, views, functions with their definitions, types and
// comments. $1 is the schema's name.
const catalogSQL = `WITH ns AS (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1)
SELECT 'relation ' || c.relname || ' kind=' || c.relkind::text || ' persistence=' || c.relpersistence::text
       || ' options=' || coalesce(array_to_string(c.reloptions, ','), '')
  FROM pg_catalog.pg_class c WHERE c.relnamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'column ' || c.relname || '.' || a.attnum || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
       || ' identity=' || a.attidentity::text || ' generated=' || a.attgenerated::text
       || ' collation=' || coalesce((SELECT collname FROM pg_catalog.pg_collation WHERE oid = a.attcollation), '')
       || ' dropped=' || a.attisdropped || ' missing=' || a.atthasmissing
  FROM pg_catalog.pg_attribute a
  JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
  LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE c.relnamespace = (SELECT oid FROM ns) AND a.attnum > 0
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
 WHERE c.relnamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'constraint ' || coalesce(c.relname, '-') || ' ' || con.conname || ' ' || con.contype::text || ' '
       || pg_get_constraintdef(con.oid) || ' deferrable=' || con.condeferrable || ' validated=' || con.convalidated
  FROM pg_catalog.pg_constraint con LEFT JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
 WHERE con.connamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'sequence ' || c.relname || ' ' || format_type(s.seqtypid, NULL) || ' start=' || s.seqstart
       || ' increment=' || s.seqincrement || ' min=' || s.seqmin || ' max=' || s.seqmax
       || ' cache=' || s.seqcache || ' cycle=' || s.seqcycle
       || ' owned=' || coalesce((SELECT t.relname || '.' || d.refobjsubid FROM pg_catalog.pg_depend d
            JOIN pg_catalog.pg_class t ON t.oid = d.refobjid
           WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')
             AND d.refclassid = 'pg_class'::regclass), '')
  FROM pg_catalog.pg_sequence s JOIN pg_catalog.pg_class c ON c.oid = s.seqrelid
 WHERE c.relnamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'default-depends ' || c.relname || '.' || a.attname || ' on ' || r.relname
  FROM pg_catalog.pg_attrdef d
  JOIN pg_catalog.pg_class c ON c.oid = d.adrelid
  JOIN pg_catalog.pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
  JOIN pg_catalog.pg_depend p ON p.classid = 'pg_attrdef'::regclass AND p.objid = d.oid AND p.refclassid = 'pg_class'::regclass
  JOIN pg_catalog.pg_class r ON r.oid = p.refobjid
 WHERE c.relnamespace = (SELECT oid FROM ns) AND r.relkind = 'S'
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
  FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = (SELECT oid FROM ns) AND NOT t.tgisinternal
UNION ALL
SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid)
  FROM pg_catalog.pg_class c WHERE c.relnamespace = (SELECT oid FROM ns) AND c.relkind IN ('v', 'm')
UNION ALL
SELECT 'function ' || pg_get_functiondef(p.oid) || ' acl=' || coalesce(p.proacl::text, '')
  FROM pg_catalog.pg_proc p WHERE p.pronamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'type ' || t.typname || ' ' || t.typtype::text
  FROM pg_catalog.pg_type t WHERE t.typnamespace = (SELECT oid FROM ns)
UNION ALL
SELECT 'comment ' || d.classoid::regclass::text || ' ' || d.objsubid || ' ' || d.description
  FROM pg_catalog.pg_description d
 WHERE d.objoid IN (SELECT oid FROM pg_catalog.pg_class WHERE relnamespace = (SELECT oid FROM ns)
                    UNION ALL SELECT oid FROM pg_catalog.pg_proc WHERE pronamespace = (SELECT oid FROM ns))
ORDER BY 1`

// catalog returns the catalog of the schema, its name and its advisory
// lock seed written as placeholders, so that two schemas compare.
func catalog(t *testing.T, conn *pgx.Conn, schema string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), catalogSQL, schema)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer(pgx.Identifier{schema}.Sanitize(), "__SCHEMA__", schema, "__SCHEMA__",
		strconv.FormatInt(postgres.SeedOf(schema), 10), "__SEED__")
	for i := range lines {
		lines[i] = r.Replace(lines[i])
	}
	slices.Sort(lines)
	return lines
}

// sameLines fails the test with the lines that only one of two listings
// has.
func sameLines(t *testing.T, what, nameA, nameB string, a, b []string) {
	t.Helper()
	var onlyA, onlyB []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			onlyA = append(onlyA, l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			onlyB = append(onlyB, l)
		}
	}
	if len(onlyA) > 0 || len(onlyB) > 0 || len(a) != len(b) {
		t.Fatalf("%s differ (%d and %d lines)\nonly in %s:\n%s\nonly in %s:\n%s", what, len(a), len(b),
			nameA, strings.Join(onlyA, "\n"), nameB, strings.Join(onlyB, "\n"))
	}
}

// TestBaselineMatchesHistory: a schema made by the baseline and the code
// has exactly the catalog of one made by the thirteen migrations before
// the squash (columns, types, defaults, indexes, constraints, sequences,
// triggers, functions with their bodies); opened with this package, both
// get the migrations after the baseline and nothing else, and have the
// catalog of a new schema.
func TestBaselineMatchesHistory(t *testing.T) {
	ctx := context.Background()
	sfx := "_" + randomSuffix()
	oldCfg := config(t, "varve_history"+sfx)
	baseCfg := config(t, "varve_baseline"+sfx)
	newCfg := config(t, "varve_new"+sfx)
	conn := testConn(t, oldCfg.ConnString)
	if err := postgres.CreateHistorySchema(ctx, conn, oldCfg.Schema, historyVersion); err != nil {
		t.Fatal(err)
	}
	if err := postgres.CreateBaselineSchema(ctx, conn, baseCfg.Schema); err != nil {
		t.Fatal(err)
	}
	history := catalog(t, conn, oldCfg.Schema)
	baseline := catalog(t, conn, baseCfg.Schema)
	if len(baseline) < 100 || !slices.ContainsFunc(baseline, func(l string) bool { return strings.HasPrefix(l, "function ") }) {
		t.Fatalf("a catalog of %d lines: %v", len(baseline), baseline)
	}
	sameLines(t, "the catalogs of the history and of the baseline", "the history", "the baseline", history, baseline)

	open(t, newCfg)
	latest := catalog(t, conn, newCfg.Schema)
	if !slices.ContainsFunc(latest, func(l string) bool { return strings.HasPrefix(l, "relation keys ") }) {
		t.Fatalf("a new schema without the keys table: %v", latest)
	}
	for _, cfg := range []postgres.Config{oldCfg, baseCfg} {
		open(t, cfg)
		sameLines(t, "the catalogs", "a new schema", cfg.Schema+" opened", latest, catalog(t, conn, cfg.Schema))
	}
	for _, tc := range []struct {
		schema string
		want   string
	}{
		{oldCfg.Schema, "1-16"},
		{baseCfg.Schema, "13-16"},
		{newCfg.Schema, "13-16"},
	} {
		var got string
		err := conn.QueryRow(ctx, "SELECT min(version) || '-' || max(version) || ' ' || count(*) FILTER (WHERE version > 13) FROM "+pgx.Identifier{tc.schema}.Sanitize()+".schema_migrations").Scan(&got)
		if err != nil || got != tc.want+" 3" {
			t.Errorf("schema %s has migrations %s (%v), want %s and three after the baseline", tc.schema, got, err, tc.want)
		}
	}
}

// TestBeforeBaseline: a schema made by part of the squashed history is
// refused, migrating or not, and left as it was.
func TestBeforeBaseline(t *testing.T) {
	ctx := context.Background()
	for _, version := range []int64{1, 5, 12} {
		t.Run(fmt.Sprint(version), func(t *testing.T) {
			cfg := config(t, fmt.Sprintf("varve_old%d_%s", version, randomSuffix()))
			conn := testConn(t, cfg.ConnString)
			if err := postgres.CreateHistorySchema(ctx, conn, cfg.Schema, version); err != nil {
				t.Fatal(err)
			}
			before := catalog(t, conn, cfg.Schema)
			for _, noMigrate := range []bool{false, true} {
				c := cfg
				c.NoMigrate = noMigrate
				b, err := postgres.New(ctx, c)
				if err == nil {
					_ = b.Close()
				}
				if !errors.Is(err, migrate.ErrBeforeBaseline) || !strings.Contains(err.Error(), "drop it") {
					t.Fatalf("NoMigrate %v: New: %v, want ErrBeforeBaseline", noMigrate, err)
				}
			}
			sameLines(t, "the catalogs", "before", "after", before, catalog(t, conn, cfg.Schema))
		})
	}
}

// TestCodeEveryStart: New replaces the functions of a schema at its
// version, whatever they were, and restores a missing trigger; a schema
// newer than this package keeps its own.
func TestCodeEveryStart(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		newer    bool
		replaced bool
	}{
		{"at the package's version", false, true},
		{"newer than the package", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(t, "varve_code_"+randomSuffix())
			b := open(t, cfg)
			conn := testConn(t, cfg.ConnString)
			s := b.Schema()
			want := catalog(t, conn, cfg.Schema)
			_, err := conn.Exec(ctx, `CREATE OR REPLACE FUNCTION `+s+`.drop_tags() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; /* changed */ END $$;
DROP TRIGGER events_default_category ON `+s+`.events`)
			if err != nil {
				t.Fatal(err)
			}
			if tc.newer {
				if _, err := conn.Exec(ctx, "INSERT INTO "+s+".schema_migrations (version, name) VALUES (99, '0099_later.sql')"); err != nil {
					t.Fatal(err)
				}
			}
			changed := catalog(t, conn, cfg.Schema)
			b2 := open(t, cfg)
			got := catalog(t, conn, cfg.Schema)
			if tc.replaced {
				sameLines(t, "the catalogs", "the package's", "reopened", want, got)
			} else {
				sameLines(t, "the catalogs", "changed", "reopened", changed, got)
			}
			if _, err := b2.Append(ctx, varve.AppendRequest{Stream: "s", Expected: varve.NoStream, Category: "s",
				Events: []varve.Event{{ID: varve.NewEventID(), Type: "E"}}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// dataOf returns the rows of every table of the schema and its sequence's
// state, as text.
func dataOf(t *testing.T, conn *pgx.Conn, schema string) []string {
	t.Helper()
	var out []string
	s := pgx.Identifier{schema}.Sanitize()
	for _, table := range []string{"schema_migrations", "streams", "events", "event_tags", "snapshots", "checkpoints", "leases"} {
		rows, err := conn.Query(context.Background(), "SELECT '"+table+" ' || row_to_json(x)::text FROM "+s+"."+table+" x ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lines...)
	}
	var last int64
	var called bool
	if err := conn.QueryRow(context.Background(), "SELECT last_value, is_called FROM "+s+".event_seq").Scan(&last, &called); err != nil {
		t.Fatal(err)
	}
	return append(out, fmt.Sprintf("event_seq %d %v", last, called))
}

// TestUpgradeFromHistory: a schema made by the thirteen migrations before
// the squash, written by their functions and by this package over the
// schema as they left it (NoMigrate), opens with this package with every
// row as it was, reads back every event with its category and tags, takes
// new appends, and passes the conformance suite.
func TestUpgradeFromHistory(t *testing.T) {
	ctx := context.Background()
	cfg := config(t, "varve_upgrade_"+randomSuffix())
	conn := testConn(t, cfg.ConnString)
	if err := postgres.CreateHistorySchema(ctx, conn, cfg.Schema, historyVersion); err != nil {
		t.Fatal(err)
	}
	s := pgx.Identifier{cfg.Schema}.Sanitize()
	ids := func(n int) [][16]byte {
		out := make([][16]byte, n)
		for i := range out {
			out[i] = varve.NewEventID()
		}
		return out
	}
	live := map[[16]byte]string{} // event id -> stream, of the events that stay
	keep := func(stream string, evs [][16]byte) {
		for _, id := range evs {
			live[id] = stream
		}
	}

	// The functions of the history, called as the code before the squash
	// called them, and rows written by hand.
	order1, cart1, course1, student7, multi := ids(2), ids(1), ids(2), ids(1), ids(2)
	legacy := ids(1)
	steps := []struct {
		sql  string
		args []any
	}{
		{`SELECT * FROM ` + s + `.append($1, -1, $2, '{Placed,Paid}', '{"\\x7b7d",NULL}', '{NULL,"\\x6d"}', 'order')`, []any{"order-1", order1}},
		{`SELECT * FROM ` + s + `.append($1, -1, $2, '{Added}', '{NULL}', '{NULL}')`, []any{"cart-1", cart1}},
		{`SELECT * FROM ` + s + `.append($1, -1, $2, '{Opened,Joined}', '{NULL,NULL}', '{NULL,NULL}', 'course', '[["course:1"],["course:1","student:7"]]')`, []any{"course-1", course1}},
		{`SELECT * FROM ` + s + `.append_tagged($1, -1, $2, '{Enrolled}', '{NULL}', '{NULL}', 'student', '[["student:7"]]', '[{"tags":["course:2"]}]', 0, 0)`, []any{"student-7", student7}},
		{`SELECT * FROM ` + s + `.append_multi('{order-2,cart-2}', '{-1,-1}', '{1,1}', '{order,cart}', $1, '{Placed,Added}', '{NULL,NULL}', '{NULL,NULL}', '{order-1}', '{2}')`, []any{multi}},
		{`WITH st AS (INSERT INTO ` + s + `.streams (stream, version) VALUES ('legacy-1', 1))
		  INSERT INTO ` + s + `.events (tx, stream, version, id, type) VALUES (pg_current_xact_id()::text::bigint, 'legacy-1', 1, $1, 'Old')`, []any{legacy[0]}},
		{`INSERT INTO ` + s + `.snapshots (stream, version, schema_version, data, taken_at) VALUES ('cart-1', 1, 3, '\x01', now()), ('course-1', 2, 1, '\x02', now())`, nil},
		{`SELECT ` + s + `.delete_stream('cart-1', 1, false)`, nil},
		{`SELECT ` + s + `.truncate_stream('order-1', 2)`, nil},
		{`INSERT INTO ` + s + `.checkpoints (name, commit_pos, seq_pos) VALUES ('old-projection', 1, 2)`, nil},
		{`INSERT INTO ` + s + `.leases (name, holder, token, expires) VALUES ('old-lease', 'old-holder', 7, now() + interval '1 hour')`, nil},
	}
	for _, st := range steps {
		if _, err := conn.Exec(ctx, st.sql, st.args...); err != nil {
			t.Fatalf("%s: %v", st.sql, err)
		}
	}
	keep("order-1", order1[1:])
	keep("course-1", course1)
	keep("student-7", student7)
	keep("order-2", multi[:1])
	keep("cart-2", multi[1:])
	keep("legacy-1", legacy)

	// This package's appends over the schema as the history left it.
	oldCfg := cfg
	oldCfg.NoMigrate = true
	old, err := varve.New(open(t, oldCfg), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e1, e2, e3 := varve.NewEvent("Shipped", []byte(`{}`)), varve.NewEvent("Joined", nil), varve.NewEvent("Placed", nil)
	e2.Tags = []string{"course:1", "student:8"}
	if _, err := old.Append(ctx, "order-1", varve.Exact(2), e1); err != nil {
		t.Fatal(err)
	}
	if _, err := old.AppendIf(ctx, "course-1", varve.Exact(2), varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Tags: []string{"student:8"}}}}}, e2); err != nil {
		t.Fatal(err)
	}
	if _, err := old.AppendMulti(ctx, []varve.StreamAppend{{Stream: "order-3", Expected: varve.NoStream, Events: []varve.Event{e3}}}); err != nil {
		t.Fatal(err)
	}
	if err := old.Checkpoints().Save(ctx, "new-projection", varve.Position{Commit: 1, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	keep("order-1", [][16]byte{e1.ID})
	keep("course-1", [][16]byte{e2.ID})
	keep("order-3", [][16]byte{e3.ID})
	_ = old.Close()

	before := dataOf(t, conn, cfg.Schema)
	b := open(t, cfg)
	// The upgrade adds the records of the migrations after the baseline,
	// and changes no other row.
	var added []string
	after := slices.DeleteFunc(dataOf(t, conn, cfg.Schema), func(l string) bool {
		var m struct{ Version int64 }
		rec, ok := strings.CutPrefix(l, "schema_migrations ")
		if ok && json.Unmarshal([]byte(rec), &m) == nil && m.Version > historyVersion {
			added = append(added, fmt.Sprint(m.Version))
			return true
		}
		return false
	})
	if fmt.Sprint(added) != "[14 15 16]" {
		t.Errorf("the upgrade recorded the migrations %v, want [14 15 16]", added)
	}
	sameLines(t, "the rows", "before the upgrade", "after", before, after)
	st, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}

	read := func(f ...varve.AllOption) map[[16]byte]varve.RecordedEvent {
		t.Helper()
		out := map[[16]byte]varve.RecordedEvent{}
		for e, err := range st.ReadAll(ctx, varve.Start, f...) {
			if err != nil {
				t.Fatal(err)
			}
			out[e.ID] = e
		}
		return out
	}
	all := read()
	if len(all) != len(live) {
		t.Errorf("$all holds %d events, want %d", len(all), len(live))
	}
	for id, stream := range live {
		if e, ok := all[id]; !ok || e.Stream != stream {
			t.Errorf("event %x of %s: read %+v, %v", id, stream, e, ok)
		}
	}
	if e := all[legacy[0]]; e.Type != "Old" {
		t.Errorf("the event written by hand: %+v", e)
	}
	if got := read(varve.Filter{Categories: []string{"legacy", "cart"}}); len(got) != 2 || got[legacy[0]].ID != legacy[0] || got[multi[1]].ID != multi[1] {
		t.Errorf("categories legacy and cart: %v", got)
	}
	var tagged []string
	for e, err := range st.ReadQuery(ctx, varve.Query{Items: []varve.QueryItem{{Tags: []string{"course:1"}}}}, varve.Start) {
		if err != nil {
			t.Fatal(err)
		}
		tagged = append(tagged, fmt.Sprintf("%s@%d%v", e.Stream, e.Version, e.Tags))
	}
	if want := "[course-1@1[course:1] course-1@2[course:1 student:7] course-1@3[course:1 student:8]]"; fmt.Sprint(tagged) != want {
		t.Errorf("query course:1: %v, want %s", tagged, want)
	}
	if info, err := st.StreamInfo(ctx, "order-1"); err != nil || info.Version != 3 {
		t.Errorf("order-1: %+v %v", info, err)
	}
	if info, err := st.StreamInfo(ctx, "cart-1"); err != nil || !info.Deleted {
		t.Errorf("the deleted cart-1: %+v %v", info, err)
	}
	if snap, ok, err := st.Snapshots().Load(ctx, "course-1"); err != nil || !ok || snap.Version != 2 || string(snap.Data) != "\x02" {
		t.Errorf("snapshot of course-1: %+v %v %v", snap, ok, err)
	}
	if _, ok, err := st.Snapshots().Load(ctx, "cart-1"); err != nil || ok {
		t.Errorf("the snapshot of the deleted cart-1: %v %v", ok, err)
	}
	for name, want := range map[string]varve.Position{"old-projection": {Commit: 1, Seq: 2}, "new-projection": {Commit: 1, Seq: 1}} {
		if pos, ok, err := st.Checkpoints().Load(ctx, name); err != nil || !ok || pos != want {
			t.Errorf("checkpoint %s: %v %v %v", name, pos, ok, err)
		}
	}
	var held *varve.LeaseHeldError
	if _, err := st.Leases().Acquire(ctx, "old-lease", "new-holder", time.Minute); !errors.As(err, &held) || held.Holder != "old-holder" {
		t.Errorf("the old lease: %v", err)
	}
	if l, err := st.Leases().Acquire(ctx, "old-lease", "old-holder", time.Minute); err != nil || l.Token != 7 {
		t.Errorf("the old lease renewed: %+v %v", l, err)
	}

	// New writes on the upgraded schema, by every path.
	if _, err := st.Append(ctx, "order-1", varve.Exact(3), varve.NewEvent("Closed", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, "cart-1", varve.Any, varve.NewEvent("Added", nil)); err != nil { // a deleted stream: the append function
		t.Fatal(err)
	}
	e4 := varve.NewEvent("Left", nil)
	e4.Tags = []string{"course:1", "student:7"}
	cond := varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Tags: []string{"student:9"}}}}}
	if _, err := st.AppendIf(ctx, "course-1", varve.Exact(3), cond, e4); err != nil {
		t.Fatal(err)
	}
	var ce *varve.AppendConditionError
	if _, err := st.AppendIf(ctx, "course-1", varve.Any, varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Types: []string{"Left"}}}}}, varve.NewEvent("Again", nil)); !errors.As(err, &ce) {
		t.Fatalf("an append on a failing condition: %v", err)
	}
	if _, err := st.AppendMulti(ctx, []varve.StreamAppend{{Stream: "order-2", Expected: varve.Exact(1), Events: []varve.Event{varve.NewEvent("Paid", nil)}},
		{Stream: "order-4", Expected: varve.NoStream, Events: []varve.Event{varve.NewEvent("Placed", nil)}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Truncate(ctx, "course-1", 4); err != nil {
		t.Fatal(err)
	}
	var entries int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+s+".event_tags WHERE tag = 'course:1'").Scan(&entries); err != nil || entries != 1 {
		t.Errorf("course:1 has %d event_tags entries after the truncation (%v), want 1", entries, err)
	}

	t.Run("Conformance", func(t *testing.T) {
		backendtest.Run(t, backendtest.Factory{
			New: func(t testing.TB) varve.Backend { return open(t, cfg) },
			Capabilities: varve.Capabilities{Watch: true, Filter: true, Tags: true, PositionNumbers: true, MultiAppend: true, Snapshots: true,
				Checkpoints: true, ListCheckpoints: true, ListStreams: true, Leases: true, Keys: true, Durable: true},
		})
	})
}

// TestEventIndexes: on a new schema and on one the baseline made, the
// indexes that grow at their right edge fill their pages (migration 15),
// the two in stream order keep the default, since their inserts split
// pages in the middle, and events_stream_id is keyed on the id and a hash
// of the stream (migration 16). The lookup of an event of a stream by id,
// which an append's retry makes, is a scan of that index, before and
// after ANALYZE, and the index refuses a second event of an id in a
// stream, not the same id in another.
func TestEventIndexes(t *testing.T) {
	ctx := context.Background()
	sfx := "_" + randomSuffix()
	baseCfg := config(t, "varve_ix_baseline"+sfx)
	newCfg := config(t, "varve_ix_new"+sfx)
	conn := testConn(t, newCfg.ConnString)
	if err := postgres.CreateBaselineSchema(ctx, conn, baseCfg.Schema); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"events_pkey":           "USING btree (tx, seq) WITH (fillfactor='100')",
		"events_type":           "USING btree (type, tx, seq) WITH (fillfactor='100')",
		"events_category":       "USING btree (category, tx, seq) WITH (fillfactor='100')",
		"events_stream_version": "USING btree (stream, version)",
		"events_stream_id":      "USING btree (id, hashtextextended(stream, (0)::bigint))",
	}
	for _, cfg := range []postgres.Config{newCfg, baseCfg} {
		open(t, cfg)
		for index, def := range want {
			var got string
			err := conn.QueryRow(ctx, `SELECT substring(pg_get_indexdef(c.oid) from 'USING .*$')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind = 'i'`,
				cfg.Schema, index).Scan(&got)
			if err != nil || got != def {
				t.Errorf("schema %s, index %s: %q (%v), want %q", cfg.Schema, index, got, err, def)
			}
		}
	}

	b := open(t, newCfg)
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	if _, err := s.Append(ctx, "ix-a", varve.NoStream, varve.Event{ID: id, Type: "E"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "ix-b", varve.NoStream, varve.Event{ID: id, Type: "E"}); err != nil {
		t.Fatalf("the same id in another stream: %v", err)
	}
	if _, err := s.Append(ctx, "ix-a", varve.Any, varve.Event{Type: "E"}, varve.Event{ID: id, Type: "E"}); !errors.Is(err, varve.ErrDuplicateEvent) {
		t.Fatalf("an id again in its stream: %v, want ErrDuplicateEvent", err)
	}
	// A store's worth of events, so that ANALYZE finds a scan of the whole
	// table dearer than an index; the lookup is of an event of a stream of
	// 100, where the id is the narrower range.
	batch := make([]varve.Event, 100)
	var first uuid.UUID
	for i := range 20 {
		for k := range batch {
			batch[k] = varve.Event{ID: uuid.New(), Type: "E", Data: []byte("{}")}
		}
		if i == 0 {
			first = batch[0].ID
		}
		if _, err := s.Append(ctx, fmt.Sprintf("ix-%d", i), varve.Any, batch...); err != nil {
			t.Fatal(err)
		}
	}
	lookup := "EXPLAIN SELECT e.version FROM " + pgx.Identifier{newCfg.Schema}.Sanitize() + ".events e WHERE e.stream = 'ix-0' AND e.id = '" + first.String() + "'"
	for _, when := range []string{"before ANALYZE", "after ANALYZE"} {
		if when == "after ANALYZE" {
			if _, err := conn.Exec(ctx, "ANALYZE "+pgx.Identifier{newCfg.Schema, "events"}.Sanitize()); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := conn.Query(ctx, lookup)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(plan, "\n"); !strings.Contains(p, "Index Scan using events_stream_id") && !strings.Contains(p, "Bitmap Index Scan on events_stream_id") {
			t.Errorf("%s, the lookup of an id in a stream:\n%s", when, strings.Join(plan, "\n"))
		}
	}
}
