package lab

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cdc/pgcdc"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/subscription"
)

// cdcSource is deliver-bench's postgres-cdc source: a table of Streams rows
// on a PostgreSQL server with wal_level=logical, and a slot created before
// Transactions commits of EventsPerTx updates of random rows. A run's
// figures include the capture: the server's logical decoding and the
// client's, and on the store route the appends.
//
//   - The direct route (directRun) streams a copy of the slot made for the
//     run (pg_copy_logical_replication_slot) through a pgcdc.Source into the
//     dispatcher, which acknowledges to the copy for real; the copy is
//     dropped after the run.
//   - The store route (capture) streams the slot from its start into a
//     fresh memory store while the dispatcher delivers from it; it
//     acknowledges nothing, so the next run reads the same changes.
type cdcSource struct {
	url, name string
	conn      *pgx.Conn
	runs      int
}

func newCDCSource(ctx context.Context, cfg DeliverConfig) (*cdcSource, error) {
	conn, err := pgx.Connect(ctx, cfg.CDCURL)
	if err != nil {
		return nil, fmt.Errorf("lab: deliver-bench: postgres-cdc: connect: %w", err)
	}
	src := &cdcSource{url: cfg.CDCURL, name: fmt.Sprintf("varve_deliver_%d", rand.Uint32()), conn: conn}
	if err := pgcdc.CheckWALLevel(ctx, conn); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("lab: deliver-bench: postgres-cdc: %w", err)
	}
	if err := src.fill(ctx, cfg); err != nil {
		src.drop()
		return nil, fmt.Errorf("lab: deliver-bench: postgres-cdc: %w", err)
	}
	return src, nil
}

func (s *cdcSource) fill(ctx context.Context, cfg DeliverConfig) error {
	table := s.name + ".accounts"
	for _, sql := range []string{
		"CREATE SCHEMA " + s.name,
		"CREATE TABLE " + table + " (id int PRIMARY KEY, balance bigint NOT NULL)",
		fmt.Sprintf("INSERT INTO %s SELECT i, 0 FROM generate_series(0, %d) AS i", table, cfg.Streams-1),
	} {
		if _, err := s.conn.Exec(ctx, sql); err != nil {
			return err
		}
	}
	// The slot starts after the rows exist: the runs deliver the updates.
	if _, err := pgcdc.EnsurePublication(ctx, s.conn, s.name, []string{table}); err != nil {
		return err
	}
	if _, err := pgcdc.EnsureSlot(ctx, s.conn, s.name); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 2))
	for range cfg.Transactions {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		for range cfg.EventsPerTx {
			b.Queue("UPDATE "+table+" SET balance = balance + 40 WHERE id = $1", rng.IntN(cfg.Streams))
		}
		b.Queue("COMMIT")
		if err := s.conn.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	return nil
}

// capture streams the slot into store until events changes arrived and
// returns the position of the last one.
func (s *cdcSource) capture(ctx context.Context, store *varve.Store, events int) (varve.Position, error) {
	stream, err := s.start(ctx, s.name)
	if err != nil {
		return varve.Position{}, err
	}
	defer stream.Close()
	scfg := pgcdc.StoreConfig{Layout: pgcdc.PerRow, Namespace: s.name}
	for n := 0; n < events; {
		tx, err := stream.Next(ctx)
		if err != nil {
			return varve.Position{}, err
		}
		if err := pgcdc.AppendToStore(ctx, store, tx, scfg); err != nil {
			return varve.Position{}, err
		}
		n += len(tx.Changes)
	}
	return store.LastPosition(ctx)
}

// start streams slot's changes of the bench's publication.
func (s *cdcSource) start(ctx context.Context, slot string) (*pgcdc.Stream, error) {
	return pgcdc.Start(ctx, pgcdc.Config{ConnString: s.url, Slot: slot, Publication: s.name, Logger: slog.New(slog.DiscardHandler)})
}

// drop removes the slot, the publication and the table.
func (s *cdcSource) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = pgcdc.DropSlot(ctx, s.conn, s.name)
	_ = pgcdc.DropPublication(ctx, s.conn, s.name)
	_, _ = s.conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+s.name+" CASCADE")
	_ = s.conn.Close(ctx)
}

// directRun is one run of the direct route: a pgcdc.Source on a copy of the
// bench's slot, and a memory store for parked events. As a delivery.Source
// it numbers each row's changes (Version 1, 2, ... in the order read), so
// that the endpoint checks per-row order as it does on the store route, and
// it reports the position of the events-th change.
type directRun struct {
	src    *pgcdc.Source
	stream *pgcdc.Stream
	parked *delivery.Parked
	store  *varve.Store
	cdc    *cdcSource
	slot   string

	events, read int
	versions     map[string]varve.Version
	end          chan varve.Position
	failed       chan error
}

func (s *cdcSource) direct(ctx context.Context, name string, events int) (*directRun, error) {
	s.runs++
	slot := fmt.Sprintf("%s_r%d", s.name, s.runs)
	if _, err := s.conn.Exec(ctx, "SELECT pg_copy_logical_replication_slot($1, $2)", s.name, slot); err != nil {
		return nil, fmt.Errorf("lab: deliver-bench: copy slot %s: %w", s.name, err)
	}
	r := &directRun{cdc: s, slot: slot, events: events, versions: map[string]varve.Version{},
		end: make(chan varve.Position, 1), failed: make(chan error, 1)}
	var err error
	if r.store, err = Open(ctx, "memory:"); err != nil {
		r.close()
		return nil, err
	}
	r.parked = delivery.NewParked(r.store, name)
	if r.stream, err = s.start(ctx, slot); err != nil {
		r.close()
		return nil, err
	}
	if r.src, err = pgcdc.NewSource(r.stream, pgcdc.SourceConfig{Name: name, Namespace: s.name}); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *directRun) Name() string             { return r.src.Name() }
func (r *directRun) Position() varve.Position { return r.src.Position() }

func (r *directRun) Next(ctx context.Context) (subscription.Batch, error) {
	b, err := r.src.Next(ctx)
	if err != nil {
		if ctx.Err() == nil {
			select {
			case r.failed <- err:
			default:
			}
		}
		return b, err
	}
	for i := range b.Events {
		e := &b.Events[i]
		r.versions[e.Stream]++
		e.Version = r.versions[e.Stream]
	}
	before := r.read
	r.read += len(b.Events)
	if before < r.events && r.read >= r.events {
		r.end <- b.Through
	}
	return b, nil
}

func (r *directRun) SaveCheckpoint(ctx context.Context, pos varve.Position) error {
	return r.src.SaveCheckpoint(ctx, pos)
}

// wait returns the position of the events-th change once the source read
// it.
func (r *directRun) wait(ctx context.Context) (varve.Position, error) {
	select {
	case end := <-r.end:
		return end, nil
	case err := <-r.failed:
		return varve.Position{}, err
	case <-ctx.Done():
		return varve.Position{}, ctx.Err()
	}
}

// close stops the stream and drops the slot's copy; like drop, it leaves
// what fails to the cleanup of the server (the test checks none is left).
func (r *directRun) close() {
	if r.stream != nil {
		_ = r.stream.Close()
	}
	if r.store != nil {
		_ = r.store.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = pgcdc.DropSlot(ctx, r.cdc.conn, r.slot)
}
