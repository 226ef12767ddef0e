// Package gomink times PostgreSQL point reads of varve against go-mink's
// PostgreSQL adapter and the raw medium (one pgx query of the same rows),
// the three alternating in one loop on the same server. See README.md.
package gomink

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
	"go-mink.dev/adapters"
	mpg "go-mink.dev/adapters/postgres"
)

func serverURL() string {
	if u := os.Getenv("VARVE_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// The schemas of the two stores; streams of each run get names of their own.
const (
	minkSchema  = "peer_gomink"
	varveSchema = "peer_gomink_varve"
)

func BenchmarkPointReads(b *testing.B) {
	ctx := context.Background()
	url := serverURL()
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	ma, err := mpg.NewAdapter(url, mpg.WithSchema(minkSchema))
	if err != nil {
		b.Fatal(err)
	}
	defer ma.Close()
	if err := ma.Initialize(ctx); err != nil {
		b.Fatal(err)
	}
	cfg, err := postgres.ParseURL(url + "&varve_schema=" + varveSchema)
	if err != nil {
		b.Fatal(err)
	}
	vb, err := postgres.New(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	s, err := varve.New(vb, varve.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pool, err := pgxpool.New(ctx, url+"&pool_max_conns=8")
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()

	const shorts = 50
	data := []byte(`{"amount":12345,"currency":"EUR","note":"a hundred-byte payload for the point-read benchmark ....."}`)
	id := func(i int) string { return fmt.Sprintf("short%s-%d", run, i%shorts) }
	for i := range shorts {
		var mr []adapters.EventRecord
		var vr []varve.Event
		for range 10 {
			mr = append(mr, adapters.EventRecord{Type: "Deposited", Data: data})
			vr = append(vr, varve.Event{Type: "Deposited", Data: data})
		}
		if _, err := ma.Append(ctx, id(i), mr, adapters.NoStream); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Append(ctx, id(i), varve.NoStream, vr...); err != nil {
			b.Fatal(err)
		}
	}
	raw := func(sql string, args ...any) int {
		rows, err := pool.Query(ctx, sql, args...)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			if _, err := rows.Values(); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		return n
	}
	want := func(what string, got, n int, err error) {
		if err != nil || got != n {
			b.Fatalf("%s: %d rows (want %d), %v", what, got, n, err)
		}
	}
	cases := []struct {
		name             string
		mink, varve, raw func(i int)
	}{
		{"stream-of-10",
			func(i int) { evs, err := ma.Load(ctx, id(i), 0); want("go-mink", len(evs), 10, err) },
			func(i int) {
				n := 0
				for _, err := range s.ReadStream(ctx, id(i)) {
					want("varve", 0, 0, err)
					n++
				}
				want("varve", n, 10, nil)
			},
			func(i int) {
				n := raw(`SELECT tx, seq, stream, version, id, type, data, metadata, recorded_at FROM `+varveSchema+`.events WHERE stream = $1 ORDER BY version`, id(i))
				want("raw", n, 10, nil)
			}},
		{"stream-info",
			func(i int) { _, err := ma.GetStreamInfo(ctx, id(i)); want("go-mink", 0, 0, err) },
			func(i int) { _, err := s.StreamInfo(ctx, id(i)); want("varve", 0, 0, err) },
			func(i int) {
				want("raw", raw(`SELECT version, last_tx, last_seq, deleted, tombstoned, created_at, updated_at FROM `+varveSchema+`.streams WHERE stream = $1`, id(i)), 1, nil)
			}},
		{"last-position",
			func(i int) { _, err := ma.GetLastPosition(ctx); want("go-mink", 0, 0, err) },
			func(i int) { _, err := s.LastPosition(ctx); want("varve", 0, 0, err) },
			func(i int) {
				want("raw", raw(`SELECT tx, seq FROM `+varveSchema+`.events ORDER BY tx DESC, seq DESC LIMIT 1`), 1, nil)
			}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var mink, vv, rw time.Duration
			i := 0
			for b.Loop() {
				t := time.Now()
				c.mink(i)
				mink += time.Since(t)
				t = time.Now()
				c.varve(i)
				vv += time.Since(t)
				t = time.Now()
				c.raw(i)
				rw += time.Since(t)
				i++
			}
			n := float64(b.N)
			b.ReportMetric(float64(mink.Microseconds())/n, "mink-us/op")
			b.ReportMetric(float64(vv.Microseconds())/n, "varve-us/op")
			b.ReportMetric(float64(rw.Microseconds())/n, "raw-us/op")
			b.ReportMetric(float64(mink)/float64(vv), "varve-speed/mink")
			b.ReportMetric(float64(mink)/float64(rw), "raw-speed/mink")
		})
	}
}
