// Command scaleprobe measures the per-node figures behind docs/scale.md on
// one PostgreSQL or NATS server: append throughput of 8 writers, bytes
// stored (and, on PostgreSQL, WAL written) per event, $all read throughput
// with several readers, and the rate of tail reads (a caught-up reader's
// read after the head, which every subscription makes at each wake-up).
// It writes into a schema or stream of its own and drops it afterwards.
//
//	go run ./scripts/scaleprobe -backend postgres -url 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' -size 100
//	go run ./scripts/scaleprobe -backend nats -url nats://127.0.0.1:4222 -size 1024 -batch 1
//
// The WAL figure is the server's whole WAL over the run: other work on the
// server inflates it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats"
	"github.com/varve-go/varve/backend/postgres"
)

func main() {
	kind := flag.String("backend", "postgres", "postgres or nats")
	url := flag.String("url", "", "server url")
	n := flag.Int("n", 100000, "events")
	size := flag.Int("size", 100, "event data bytes")
	name := flag.String("name", fmt.Sprintf("scaleprobe_%d", time.Now().UnixNano()%1e6), "schema / stream")
	batchF := flag.Int("batch", 10, "events per append")
	readers := flag.String("readers", "1,4,16", "concurrent $all readers")
	flag.Parse()
	ctx := context.Background()

	var b varve.Backend
	var sizeOf func() (int64, int64) // bytes on disk, WAL bytes so far
	var drop func()
	switch *kind {
	case "postgres":
		pb, err := postgres.New(ctx, postgres.Config{ConnString: *url, Schema: *name, MaxConns: 16})
		if err != nil {
			log.Fatal(err)
		}
		pool, err := pgxpool.New(ctx, *url)
		if err != nil {
			log.Fatal(err)
		}
		sizeOf = func() (int64, int64) {
			var rel, wal int64
			if err := pool.QueryRow(ctx, `SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, *name).Scan(&rel); err != nil {
				log.Fatal(err)
			}
			if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&wal); err != nil {
				log.Fatal(err)
			}
			return rel, wal
		}
		drop = func() { _ = pb.Drop(ctx); pool.Close() }
		b = pb
	case "nats":
		cfg := nats.Config{URL: *url, Stream: strings.ToUpper(*name), Prefix: *name}
		nb, err := nats.New(ctx, cfg)
		if err != nil {
			log.Fatal(err)
		}
		nc, err := natsgo.Connect(*url)
		if err != nil {
			log.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		sizeOf = func() (int64, int64) {
			s, err := js.Stream(ctx, cfg.Stream)
			if err != nil {
				log.Fatal(err)
			}
			return int64(s.CachedInfo().State.Bytes), 0
		}
		drop = func() {
			_ = js.DeleteStream(ctx, cfg.Stream)
			_ = js.DeleteStream(ctx, "KV_"+cfg.Stream+"_snapshots")
			_ = js.DeleteStream(ctx, "KV_"+cfg.Stream+"_checkpoints")
			nc.Close()
		}
		b = nb
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer drop()

	data := []byte(`{"order":"` + strings.Repeat("x", max(*size-12, 0)) + `"}`)[:*size]
	rel0, wal0 := sizeOf()
	const writers = 8
	batch := *batchF
	t0 := time.Now()
	var wg sync.WaitGroup
	per := *n / writers / batch
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				evs := make([]varve.Event, batch)
				for j := range evs {
					evs[j] = varve.Event{Type: "OrderPlaced", Data: data}
				}
				if _, err := s.Append(ctx, fmt.Sprintf("order-%d", (w*per+i)%1000), varve.Any, evs...); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(t0)
	total := writers * per * batch
	rel1, wal1 := sizeOf()
	fmt.Printf("%s size=%d: %d events appended by %d writers in batches of %d in %v (%.0f events/s)\n", *kind, *size, total, writers, batch, took.Round(time.Millisecond), float64(total)/took.Seconds())
	fmt.Printf("  on disk %d bytes = %.0f bytes/event; WAL %d bytes = %.0f bytes/event\n", rel1-rel0, float64(rel1-rel0)/float64(total), wal1-wal0, float64(wal1-wal0)/float64(total))

	last, err := s.LastPosition(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range strings.Split(*readers, ",") {
		k, err := strconv.Atoi(r)
		if err != nil || k < 1 {
			log.Fatalf("-readers: %q is not a count", r)
		}
		var read atomic.Int64
		t0 := time.Now()
		var wg sync.WaitGroup
		for range k {
			wg.Go(func() {
				var after varve.Position
				buf := make([]varve.RecordedEvent, 0, 512)
				for {
					p, err := s.ReadAllPage(ctx, after, buf[:0], varve.Limit(512))
					if err != nil {
						log.Fatal(err)
					}
					if len(p.Events) == 0 {
						return
					}
					read.Add(int64(len(p.Events)))
					after = p.Through
				}
			})
		}
		wg.Wait()
		took := time.Since(t0)
		fmt.Printf("  $all, %d readers each reading all %d events in pages of 512: %.0f events/s in all\n", k, total, float64(read.Load())/took.Seconds())
	}
	// Tail reads: a caught-up reader's read after the last position (what
	// each subscription does at every wake-up).
	for _, k := range []int{1, 8} {
		var ops atomic.Int64
		t0 := time.Now()
		var wg sync.WaitGroup
		for range k {
			wg.Go(func() {
				buf := make([]varve.RecordedEvent, 0, 512)
				for time.Since(t0) < 3*time.Second {
					if _, err := s.ReadAllPage(ctx, last, buf[:0], varve.Limit(512)); err != nil {
						log.Fatal(err)
					}
					ops.Add(1)
				}
			})
		}
		wg.Wait()
		fmt.Printf("  tail reads (empty page after the head), %d goroutines: %.0f reads/s\n", k, float64(ops.Load())/time.Since(t0).Seconds())
	}
}
