// Command bytesprofile shows where the bytes of an event go on PostgreSQL
// and SQLite: it appends -n events of 100 bytes of data (-batch an append,
// over 100 streams that exist before it sizes the store), settles the store
// (VACUUM (ANALYZE) of the schema's tables; a WAL checkpoint that truncates
// the log) and prints, per table and index, the bytes it grew by and their
// share of an event. PostgreSQL: pg_relation_size of each relation's main,
// free space map and visibility map forks (TOAST counted with its table).
// SQLite: the dbstat virtual table's pages per btree, with the bytes of
// payload in them and unused.
//
//	go run ./scripts/bytesprofile -backend postgres -url 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./scripts/bytesprofile -backend sqlite -n 20000 -batch 10
//
// It writes into a schema or a temporary file of its own and removes it
// afterwards. The streams are named as varve bench names them, unless
// -prefix says otherwise.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/internal/workload"
)

// relation is one table or index and its bytes.
type relation struct {
	name, kind          string
	bytes               int64
	payload, unused, pg int64 // SQLite: payload and unused bytes, pages
}

func main() {
	kind := flag.String("backend", "postgres", "postgres or sqlite")
	url := flag.String("url", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL server")
	n := flag.Int("n", 20000, "events to append after the first round")
	batch := flag.Int("batch", 1, "events per append")
	prefix := flag.String("prefix", "bench-1a2b3c4d-storage-single-", "start of the stream names (default: as long as varve bench's)")
	flag.Parse()
	ctx := context.Background()

	var (
		b       varve.Backend
		profile func() map[string]relation
		cleanup func()
	)
	switch *kind {
	case "postgres":
		schema := "bytesprofile_" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
		pb, err := postgres.New(ctx, postgres.Config{ConnString: *url, Schema: schema})
		if err != nil {
			log.Fatal(err)
		}
		pool, err := pgxpool.New(ctx, *url)
		if err != nil {
			log.Fatal(err)
		}
		profile = func() map[string]relation { return pgProfile(ctx, pool, schema) }
		cleanup = func() { _ = pb.Drop(ctx); pool.Close() }
		b = pb
	case "sqlite":
		dir, err := os.MkdirTemp("", "bytesprofile-")
		if err != nil {
			log.Fatal(err)
		}
		path := filepath.Join(dir, "varve.db")
		sb, err := sqlite.New(ctx, sqlite.Config{Path: path})
		if err != nil {
			log.Fatal(err)
		}
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
		if err != nil {
			log.Fatal(err)
		}
		profile = func() map[string]relation { return sqliteProfile(ctx, db) }
		cleanup = func() { _ = db.Close(); _ = os.RemoveAll(dir) }
		b = sb
	default:
		log.Fatalf("-backend %q: postgres or sqlite", *kind)
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	defer cleanup() // first: Drop needs the backend open

	w := workload.Storage()[0]
	if *batch == 10 {
		w = workload.Storage()[1]
	} else if *batch != 1 {
		log.Fatalf("-batch %d: 1 or 10", *batch)
	}
	prep, err := w.Setup(ctx, s, workload.Params{Prefix: *prefix})
	if err != nil {
		log.Fatal(err)
	}
	op := prep.NewOp(0)
	for range workload.StorageStreams {
		if _, err := op(ctx); err != nil {
			log.Fatal(err)
		}
	}
	before := profile()
	done := 0
	for done < *n {
		k, err := op(ctx)
		if err != nil {
			log.Fatal(err)
		}
		done += k
	}
	after := profile()

	var names []string
	for name := range after {
		names = append(names, name)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Printf("%s: %d events of 100 bytes, %d an append, over %d streams named %sw0-s<i>\n", *kind, done, *batch, workload.StorageStreams, *prefix)
	fmt.Fprintln(tw, "RELATION\tKIND\tBYTES\tB/EVENT\tPAYLOAD B/EVENT\tUNUSED B/EVENT\t")
	var total int64
	for _, name := range names {
		a, o := after[name], before[name]
		d := a.bytes - o.bytes
		if d == 0 {
			continue
		}
		total += d
		pl, un := "-", "-"
		if *kind == "sqlite" {
			pl = fmt.Sprintf("%.1f", float64(a.payload-o.payload)/float64(done))
			un = fmt.Sprintf("%.1f", float64(a.unused-o.unused)/float64(done))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%s\t%s\t\n", name, a.kind, d, float64(d)/float64(done), pl, un)
	}
	fmt.Fprintf(tw, "total\t\t%d\t%.1f\t\t\t\n", total, float64(total)/float64(done))
	_ = tw.Flush()
}

// pgProfile vacuums the schema's tables and sizes every relation of it:
// main fork, free space and visibility maps; a table's TOAST table and its
// index count with the table.
func pgProfile(ctx context.Context, pool *pgxpool.Pool, schema string) map[string]relation {
	if _, err := pool.Exec(ctx, fmt.Sprintf(`DO $$ DECLARE r record; BEGIN
FOR r IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r' LOOP
  EXECUTE format('ANALYZE %%I.%%I', %s, r.relname);
END LOOP; END $$`, quote(schema), quote(schema))); err != nil {
		log.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, schema)
	if err != nil {
		log.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			log.Fatal(err)
		}
		tables = append(tables, t)
	}
	if rows.Err() != nil {
		log.Fatal(rows.Err())
	}
	for _, t := range tables {
		if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+t); err != nil {
			log.Fatal(err)
		}
	}
	rows, err = pool.Query(ctx, `SELECT c.relname, CASE c.relkind WHEN 'i' THEN 'index' ELSE 'table' END,
  pg_relation_size(c.oid) + pg_relation_size(c.oid, 'fsm') + pg_relation_size(c.oid, 'vm')
  + CASE WHEN c.reltoastrelid <> 0 THEN pg_total_relation_size(c.reltoastrelid) ELSE 0 END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'i')`, schema)
	if err != nil {
		log.Fatal(err)
	}
	out := map[string]relation{}
	for rows.Next() {
		var r relation
		if err := rows.Scan(&r.name, &r.kind, &r.bytes); err != nil {
			log.Fatal(err)
		}
		out[r.name] = r
	}
	if rows.Err() != nil {
		log.Fatal(rows.Err())
	}
	return out
}

// sqliteProfile checkpoints the file and sizes every btree with dbstat.
func sqliteProfile(ctx context.Context, db *sql.DB) map[string]relation {
	var busy, logged, done int64
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &done); err != nil || busy != 0 {
		log.Fatalf("checkpoint: busy %d, %v", busy, err)
	}
	rows, err := db.QueryContext(ctx, `SELECT d.name, coalesce(m.type, 'table'), sum(d.pgsize), sum(d.payload), sum(d.unused), count(*)
FROM dbstat d LEFT JOIN sqlite_schema m ON m.name = d.name GROUP BY d.name`)
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	out := map[string]relation{}
	for rows.Next() {
		var r relation
		if err := rows.Scan(&r.name, &r.kind, &r.bytes, &r.payload, &r.unused, &r.pg); err != nil {
			log.Fatal(err)
		}
		out[r.name] = r
	}
	if rows.Err() != nil {
		log.Fatal(rows.Err())
	}
	return out
}

func quote(s string) string { return "'" + s + "'" }
