package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/internal/migrate"
)

// historyVersion is the version the migrations of the squashed history
// (testdata/migrations-v4) end at, that of the baseline.
const historyVersion = 4

// historyFile makes a database at path with the migrations of the
// squashed history up to version upto, as upgrade did before the squash,
// and runs the statements after them.
func historyFile(t testing.TB, path string, upto int64, stmts ...string) {
	t.Helper()
	ms, err := migrate.Load(os.DirFS("testdata"), "migrations-v4")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != historyVersion {
		t.Fatalf("%d migrations in the history", len(ms))
	}
	c, err := openConn(path, "mode=rwc")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ctx := context.Background()
	q := []string{"BEGIN IMMEDIATE"}
	for _, m := range ms {
		if m.Version <= upto {
			q = append(q, m.SQL, fmt.Sprintf("PRAGMA user_version = %d", m.Version))
		}
	}
	for _, s := range append(append(q, "COMMIT"), stmts...) {
		if _, err := c.exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// catalogSQL lists what a database holds, one object, column, index
// column or foreign key per row: its identity pragmas, the statements of
// sqlite_schema, every table's pragma_table_list, pragma_table_xinfo,
// pragma_index_list and pragma_foreign_key_list, every index's
// pragma_index_xinfo, and the row of log.
const catalogSQL = `SELECT 'application_id ' || application_id FROM pragma_application_id
UNION ALL SELECT 'user_version ' || user_version FROM pragma_user_version
UNION ALL SELECT 'schema ' || type || ' ' || name || ' on ' || tbl_name || ': ' || ifnull(sql, '') FROM sqlite_schema
UNION ALL SELECT 'table ' || l.name || ' type=' || l.type || ' ncol=' || l.ncol || ' without_rowid=' || l.wr || ' strict=' || l.strict
  FROM sqlite_schema s, pragma_table_list(s.name) l WHERE s.type = 'table' AND l.schema = 'main'
UNION ALL SELECT 'column ' || s.name || '.' || c.cid || ' ' || c.name || ' ' || c.type || ' notnull=' || c."notnull"
       || ' default=' || ifnull(c.dflt_value, 'NULL') || ' pk=' || c.pk || ' hidden=' || c.hidden
  FROM sqlite_schema s, pragma_table_xinfo(s.name) c WHERE s.type = 'table'
UNION ALL SELECT 'index ' || s.name || ' ' || i.name || ' unique=' || i."unique" || ' origin=' || i.origin || ' partial=' || i.partial
  FROM sqlite_schema s, pragma_index_list(s.name) i WHERE s.type = 'table'
UNION ALL SELECT 'index-column ' || s.name || '.' || x.seqno || ' ' || ifnull(x.name, '') || ' cid=' || x.cid
       || ' desc=' || x."desc" || ' coll=' || ifnull(x.coll, '') || ' key=' || x."key"
  FROM sqlite_schema s, pragma_index_xinfo(s.name) x WHERE s.type = 'index'
UNION ALL SELECT 'foreign-key ' || s.name || ' ' || f.id || '.' || f.seq || ' ' || f."table" || '(' || ifnull(f."to", '') || ') from ' || f."from"
       || ' on_update=' || f.on_update || ' on_delete=' || f.on_delete || ' match=' || f."match"
  FROM sqlite_schema s, pragma_foreign_key_list(s.name) f WHERE s.type = 'table'
UNION ALL SELECT 'log ' || id || ' ' || last_position FROM log
ORDER BY 1`

// catalogOf returns the catalog of the database at path.
func catalogOf(t testing.TB, path string) []string {
	t.Helper()
	return linesOf(t, path, catalogSQL)
}

// linesOf returns the rows of a query of one text column on the database
// at path, opened read-only.
func linesOf(t testing.TB, path, q string) []string {
	t.Helper()
	c, err := openConn(path, "mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var out []string
	err = c.query(context.Background(), q, func(v []driver.Value) error {
		out = append(out, asString(v[0]))
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// dataSQL lists the rows of every table.
const dataSQL = `SELECT 'streams ' || json_array(id, name, state, version, last_position, created_at, updated_at) FROM streams
UNION ALL SELECT 'events ' || json_array(position, stream_id, version, hex(event_id), type, hex(data), hex(metadata), recorded_at, category, tags) FROM events
UNION ALL SELECT 'event_tags ' || json_array(tag, position) FROM event_tags
UNION ALL SELECT 'log ' || json_array(id, last_position) FROM log
UNION ALL SELECT 'snapshots ' || json_array(stream, version, schema_version, hex(data), taken_at) FROM snapshots
UNION ALL SELECT 'checkpoints ' || json_array(name, commit_id, seq) FROM checkpoints
UNION ALL SELECT 'leases ' || json_array(name, holder, token, expires) FROM leases
ORDER BY 1`

func sameLines(t *testing.T, what string, a, b []string) {
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
		t.Fatalf("%s differ (%d and %d lines)\nonly in the first:\n%s\nonly in the second:\n%s", what, len(a), len(b),
			strings.Join(onlyA, "\n"), strings.Join(onlyB, "\n"))
	}
}

func openBackend(t testing.TB, cfg Config) *Backend {
	t.Helper()
	b, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open %s: %v", cfg.Path, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// baselineFile makes a database at path with the embedded baseline alone
// and the code, as upgrade writes them.
func baselineFile(t testing.TB, path string) {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	code, err := loadCode()
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Version != historyVersion {
		t.Fatalf("the baseline is version %d", ms[0].Version)
	}
	c, err := openConn(path, "mode=rwc")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	q := []string{"BEGIN IMMEDIATE", ms[0].SQL, fmt.Sprintf("PRAGMA user_version = %d", ms[0].Version)}
	for _, o := range code {
		q = append(q, o.sql)
	}
	for _, s := range append(q, "COMMIT") {
		if _, err := c.exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestBaselineMatchesHistory: a file made by the baseline and the code has
// exactly the catalog of one made by the four migrations before the
// squash, statements in sqlite_schema included; opened, both get the
// migrations after the baseline and have the catalog of a new file, which
// opening again leaves as it was.
func TestBaselineMatchesHistory(t *testing.T) {
	dir := t.TempDir()
	history, baseline, fresh := filepath.Join(dir, "history.db"), filepath.Join(dir, "baseline.db"), filepath.Join(dir, "fresh.db")
	historyFile(t, history, historyVersion)
	baselineFile(t, baseline)
	want := catalogOf(t, history)
	got := catalogOf(t, baseline)
	if len(got) < 50 || !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, "schema trigger events_drop_tags") }) {
		t.Fatalf("a catalog of %d lines: %v", len(got), got)
	}
	sameLines(t, "the catalogs of the history and of the baseline", want, got)

	_ = openBackend(t, Config{Path: fresh}).Close()
	want = catalogOf(t, fresh)
	if !slices.ContainsFunc(want, func(l string) bool { return strings.HasPrefix(l, "table keys ") }) {
		t.Fatalf("a new file without the keys table: %v", want)
	}
	for _, path := range []string{history, baseline, fresh} {
		_ = openBackend(t, Config{Path: path}).Close()
		sameLines(t, "the catalogs of a new file and of "+filepath.Base(path)+" opened", want, catalogOf(t, path))
	}
}

// TestBeforeBaseline: a file made by part of the squashed history is
// refused and left as it was.
func TestBeforeBaseline(t *testing.T) {
	for version := int64(1); version < historyVersion; version++ {
		t.Run(fmt.Sprint(version), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			historyFile(t, path, version)
			before := catalogOf(t, path)
			b, err := New(context.Background(), Config{Path: path})
			if err == nil {
				_ = b.Close()
			}
			if !errors.Is(err, migrate.ErrBeforeBaseline) || !strings.Contains(err.Error(), "make a new one") {
				t.Fatalf("New: %v, want ErrBeforeBaseline", err)
			}
			sameLines(t, "the catalogs", before, catalogOf(t, path))
		})
	}
}

// TestCodeKept: opening a file restores code that differs from code/ or
// is missing; a file whose code is current opens without the write lock,
// while another connection holds it.
func TestCodeKept(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change string
	}{
		{"current", ""},
		{"changed", `DROP TRIGGER events_drop_tags; CREATE TRIGGER events_drop_tags AFTER DELETE ON events BEGIN SELECT 1; END`},
		{"missing", `DROP TRIGGER events_drop_tags`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v.db")
			_ = openBackend(t, Config{Path: path}).Close()
			want := catalogOf(t, path)
			c, err := openConn(path, "mode=rw")
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()
			if tc.change != "" {
				if _, err := c.exec(ctx, tc.change); err != nil {
					t.Fatal(err)
				}
				_ = openBackend(t, Config{Path: path}).Close()
			} else {
				if _, err := c.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
					t.Fatal(err)
				}
				_ = openBackend(t, Config{Path: path, BusyTimeout: time.Millisecond}).Close()
				if _, err := c.exec(ctx, "ROLLBACK"); err != nil {
					t.Fatal(err)
				}
			}
			sameLines(t, "the catalogs", want, catalogOf(t, path))
		})
	}
}

// historyRows are rows as the code before the squash wrote them: streams
// (one deleted, whose events went), events with categories and tags, their
// event_tags entries, the log's last position, a snapshot, a checkpoint and
// a lease.
var historyRows = []string{
	`INSERT INTO streams (id, name, state, version, last_position, created_at, updated_at) VALUES
		(1, 'order-1', 0, 0, 0, 1000, 1000), (2, 'cart-1', 1, 0, 3, 1000, 2000), (3, 'course-1', 0, 0, 0, 1000, 1000)`,
	`INSERT INTO events (position, stream_id, version, event_id, type, data, metadata, recorded_at, category, tags) VALUES
		(1, 1, 1, x'00000000000000000000000000000001', 'Placed', x'7b7d', NULL, 1000, 'order', NULL),
		(2, 1, 2, x'00000000000000000000000000000002', 'Paid', NULL, x'6d', 1001, 'order', NULL),
		(4, 3, 1, x'00000000000000000000000000000004', 'Opened', NULL, NULL, 1003, 'course', '["course:1"]'),
		(5, 3, 2, x'00000000000000000000000000000005', 'Joined', NULL, NULL, 1004, 'course', '["course:1","student:7"]')`,
	`INSERT INTO event_tags (tag, position) VALUES ('course:1', 4), ('course:1', 5), ('student:7', 5)`,
	`UPDATE log SET last_position = 5`,
	`INSERT INTO snapshots (stream, version, schema_version, data, taken_at) VALUES ('course-1', 2, 1, x'02', 1005)`,
	`INSERT INTO checkpoints (name, commit_id, seq) VALUES ('old-projection', 0, 4)`,
	fmt.Sprintf(`INSERT INTO leases (name, holder, token, expires) VALUES ('old-lease', 'old-holder', 7, %d)`, time.Now().Add(time.Hour).UnixNano()),
}

// TestUpgradeFromHistory: a file made by the four migrations before the
// squash and written as the code before it wrote, opened by this package,
// keeps every row, reads back every event with its category and tags,
// takes new writes, and passes the conformance suite (each of whose
// backends is such a file).
func TestUpgradeFromHistory(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	historyFile(t, path, historyVersion, historyRows...)
	before := linesOf(t, path, dataSQL)
	b := openBackend(t, Config{Path: path})
	sameLines(t, "the rows before and after opening", before, linesOf(t, path, dataSQL))
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for e, err := range s.ReadAll(ctx, varve.Start) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, fmt.Sprintf("%d:%s@%d:%s%v", e.Position.Seq, e.Stream, e.Version, e.Type, e.Tags))
	}
	if want := "[1:order-1@1:Placed[] 2:order-1@2:Paid[] 4:course-1@1:Opened[course:1] 5:course-1@2:Joined[course:1 student:7]]"; fmt.Sprint(all) != want {
		t.Errorf("$all: %v, want %s", all, want)
	}
	var got []uint64
	for e, err := range s.ReadAll(ctx, varve.Start, varve.Filter{Categories: []string{"course"}}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Position.Seq)
	}
	if !slices.Equal(got, []uint64{4, 5}) {
		t.Errorf("category course: %v", got)
	}
	got = got[:0]
	for e, err := range s.ReadQuery(ctx, varve.Query{Items: []varve.QueryItem{{Tags: []string{"student:7"}}}}, varve.Start) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Position.Seq)
	}
	if !slices.Equal(got, []uint64{5}) {
		t.Errorf("tag student:7: %v", got)
	}
	if info, err := s.StreamInfo(ctx, "cart-1"); err != nil || !info.Deleted {
		t.Errorf("the deleted cart-1: %+v %v", info, err)
	}
	if snap, ok, err := s.Snapshots().Load(ctx, "course-1"); err != nil || !ok || snap.Version != 2 {
		t.Errorf("snapshot: %+v %v %v", snap, ok, err)
	}
	if pos, ok, err := s.Checkpoints().Load(ctx, "old-projection"); err != nil || !ok || pos.Seq != 4 {
		t.Errorf("checkpoint: %v %v %v", pos, ok, err)
	}
	var held *varve.LeaseHeldError
	if _, err := s.Leases().Acquire(ctx, "old-lease", "new-holder", time.Minute); !errors.As(err, &held) || held.Holder != "old-holder" {
		t.Errorf("the old lease: %v", err)
	}

	// New writes: positions go on after the log's last one, tags are
	// indexed, and a truncation removes their entries.
	res, err := s.Append(ctx, "cart-1", varve.Any, varve.NewEvent("Added", nil))
	if err != nil || res.Position.Seq != 6 || res.LastVersion != 1 {
		t.Fatalf("append to the deleted cart-1: %+v %v", res, err)
	}
	e := varve.NewEvent("Left", nil)
	e.Tags = []string{"course:1"}
	if _, err := s.AppendIf(ctx, "course-1", varve.Exact(2), varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Tags: []string{"student:9"}}}}}, e); err != nil {
		t.Fatal(err)
	}
	if err := s.Truncate(ctx, "course-1", 3); err != nil {
		t.Fatal(err)
	}
	if n := linesOf(t, path, `SELECT tag || ' ' || position FROM event_tags ORDER BY 1`); fmt.Sprint(n) != "[course:1 7]" {
		t.Errorf("event_tags after the truncation: %v", n)
	}
	_ = s.Close()

	t.Run("Conformance", func(t *testing.T) {
		var paths sync.Map // *Backend -> its file
		backendtest.Run(t, backendtest.Factory{
			New: func(t testing.TB) varve.Backend {
				path := filepath.Join(t.TempDir(), "history.db")
				historyFile(t, path, historyVersion, historyRows...)
				b := openBackend(t, Config{Path: path, BusyTimeout: time.Minute})
				paths.Store(b, path)
				return b
			},
			Reopen: func(t testing.TB, b varve.Backend) varve.Backend {
				path, _ := paths.Load(b)
				return openBackend(t, Config{Path: path.(string), BusyTimeout: time.Minute})
			},
			Capabilities: varve.Capabilities{Watch: true, Filter: true, Tags: true, PositionNumbers: true, MultiAppend: true, Snapshots: true,
				Checkpoints: true, ListCheckpoints: true, ListStreams: true, Leases: true, Keys: true, Durable: true},
		})
	})
}
