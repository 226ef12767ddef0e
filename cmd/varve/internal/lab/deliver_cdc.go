package lab

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cdc/pgcdc"
)

// cdcSource is deliver-bench's postgres-cdc source: a table of Streams rows
// on a PostgreSQL server with wal_level=logical, and a slot created before
// Transactions commits of EventsPerTx updates of random rows. Every run
// streams the slot from its start into a fresh memory store (it
// acknowledges nothing, so the next run reads the same changes) while the
// dispatcher delivers, so a run's figures include the capture: the server's
// logical decoding, the client's decoding and the appends.
type cdcSource struct {
	url, name string
	conn      *pgx.Conn
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
	stream, err := pgcdc.Start(ctx, pgcdc.Config{ConnString: s.url, Slot: s.name, Publication: s.name,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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

// drop removes the slot, the publication and the table.
func (s *cdcSource) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = pgcdc.DropSlot(ctx, s.conn, s.name)
	_ = pgcdc.DropPublication(ctx, s.conn, s.name)
	_, _ = s.conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+s.name+" CASCADE")
	_ = s.conn.Close(ctx)
}
