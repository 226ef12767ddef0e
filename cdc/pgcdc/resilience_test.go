package pgcdc_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/varve-go/varve/cdc/pgcdc"
)

// writer commits txs transactions (0: until ctx ends), each inserting the
// next seq of keys keys (k, seq) into table, pausing pace between them; a
// commit that fails with the connection is retried on a new one (ON
// CONFLICT makes the retry of a commit that went through harmless). The
// rows in the table at the end are what was committed.
func writer(ctx context.Context, url, table string, txs, keys int, pace time.Duration) error {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for i := 1; txs == 0 || i <= txs; {
		if txs == 0 && ctx.Err() != nil {
			return nil
		}
		if conn == nil {
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			conn = c
		}
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		for k := range keys {
			b.Queue("INSERT INTO "+table+" (k, seq) VALUES ($1, $2) ON CONFLICT DO NOTHING", k, i)
		}
		b.Queue("COMMIT")
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			conn.Close(context.Background())
			conn = nil
			continue
		}
		i++
		if pace > 0 {
			time.Sleep(pace)
		}
	}
	return nil
}

// seen records what a consumer received, per key, in order.
type seen struct {
	mu     sync.Mutex
	perKey map[int32][]int32
	total  int
	signal chan struct{}
}

func newSeen() *seen { return &seen{perKey: map[int32][]int32{}, signal: make(chan struct{}, 1)} }

func (s *seen) add(tx *pgcdc.Transaction) {
	s.mu.Lock()
	for _, c := range tx.Changes {
		if c.Op != pgcdc.Insert {
			continue
		}
		k, seq := c.New[0].Value.(int32), c.New[1].Value.(int32)
		s.perKey[k] = append(s.perKey[k], seq)
		s.total++
	}
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// waitFor waits until n changes were seen, or fails after five minutes.
func (s *seen) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(5 * time.Minute)
	for s.count() < n {
		select {
		case <-s.signal:
		case <-deadline:
			t.Fatalf("saw %d changes in five minutes, want %d", s.count(), n)
		}
	}
}

// check compares what was seen with the committed rows: every row at least
// once, first sightings per key in seq order (no gap, no reordering). It
// returns the number of duplicates.
func (s *seen) check(t *testing.T, committed map[int32]int32) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	dups := 0
	for k, max := range committed {
		next := int32(1)
		for _, seq := range s.perKey[k] {
			switch {
			case seq == next:
				next++
			case seq < next:
				dups++
			default:
				t.Errorf("key %d: seq %d arrived before %d (sequence %v)", k, seq, next, s.perKey[k])
				return dups
			}
		}
		if next-1 != max {
			t.Errorf("key %d: saw up to %d, committed up to %d", k, next-1, max)
		}
	}
	return dups
}

func committed(t *testing.T, f *fixture, table string) map[int32]int32 {
	t.Helper()
	rows, err := f.conn.Query(context.Background(), "SELECT k, max(seq) FROM "+table+" GROUP BY k")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int32{}
	for rows.Next() {
		var k, m int32
		if err := rows.Scan(&k, &m); err != nil {
			t.Fatal(err)
		}
		out[k] = m
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// consume reads s into seen and acknowledges every transaction until ctx
// ends.
func consume(ctx context.Context, s *pgcdc.Stream, got *seen) error {
	for {
		tx, err := s.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		got.add(tx)
		if err := s.Ack(tx); err != nil {
			return err
		}
	}
}

func TestSurvivesFailures(t *testing.T) {
	const txs, keys = 300, 8
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, f *fixture)
	}{
		{"walsender terminated", func(t *testing.T, f *fixture) {
			var n int
			err := f.conn.QueryRow(context.Background(), "SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", f.name).Scan(&n)
			if err != nil {
				t.Errorf("terminate walsender: %v", err)
			}
		}},
		{"server restart", func(t *testing.T, f *fixture) {
			if cluster.Cluster == nil {
				t.Skip("VARVE_PG_LOGICAL_URL names an outside server: it is not restarted")
			}
			mode := "fast"
			if seq.Add(1)%2 == 0 {
				mode = "immediate"
			}
			if err := cluster.Cluster.Restart(context.Background(), mode); err != nil {
				t.Fatalf("restart (%s): %v", mode, err)
			}
			// The fixture's connection went with the server.
			conn, err := pgx.Connect(context.Background(), f.url)
			if err != nil {
				t.Fatal(err)
			}
			old := f.conn
			f.conn = conn
			old.Close(context.Background())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "CREATE TABLE events (k int, seq int, PRIMARY KEY (k, seq))")
			cfg := f.config("events")
			cfg.MaxReconnectDelay = 200 * time.Millisecond
			s := f.start(cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := newSeen()
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			wg.Add(2)
			go func() {
				defer wg.Done()
				errs <- writer(ctx, f.url, "events", txs, keys, 0)
			}()
			go func() {
				defer wg.Done()
				errs <- consume(ctx, s, got)
			}()
			// Four faults, each once the consumer has made progress.
			for i := 1; i <= 4; i++ {
				got.waitFor(t, i*txs*keys/5)
				tc.fault(t, f)
			}
			got.waitFor(t, txs*keys)
			cancel()
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("writer or consumer: %v", err)
				}
			}
			want := committed(t, f, "events")
			if len(want) != keys {
				t.Fatalf("committed rows for %d keys, want %d", len(want), keys)
			}
			dups := got.check(t, want)
			st := s.Stats()
			t.Logf("%d changes in %d transactions, %d reconnections, %d duplicates", got.count(), st.Transactions, st.Reconnects, dups)
			if st.Reconnects < 1 {
				t.Errorf("no reconnection after the faults: the test proved nothing")
			}
		})
	}
}

func TestRestartRedeliversOnlyUnacknowledged(t *testing.T) {
	f := newFixture(t, "CREATE TABLE events (k int, seq int, PRIMARY KEY (k, seq))")
	cfg := f.config("events")
	s := f.start(cfg)
	for i := 1; i <= 8; i++ {
		f.exec("INSERT INTO events VALUES (1, $1), (2, $1)", i)
	}
	var txs []*pgcdc.Transaction
	for range 8 {
		txs = append(txs, next(t, s))
	}
	// Acknowledged out of order: 1, 2, 3 and 5, 6. The prefix ends at 3.
	for _, i := range []int{5, 1, 3, 6, 2} {
		if err := s.Ack(txs[i-1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Ack(txs[0]); err == nil {
		t.Errorf("a second ack of a transaction was accepted")
	}
	if got := s.Flushed(); got != txs[2].EndLSN {
		t.Errorf("flushed %s, want the end of tx 3, %s", got, txs[2].EndLSN)
	}
	if st := s.Stats(); st.Pending != 5 || !st.OldestPending.Equal(txs[3].CommitTime) {
		t.Errorf("stats %+v: want 5 pending, the oldest committed at %v", st, txs[3].CommitTime)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := pgcdc.Inspect(context.Background(), f.conn, f.name)
	if err != nil {
		t.Fatal(err)
	}
	if info.ConfirmedFlushLSN != txs[2].EndLSN || info.Active {
		t.Errorf("slot after close: confirmed %s active %v, want %s, inactive", info.ConfirmedFlushLSN, info.Active, txs[2].EndLSN)
	}
	if info.LagBytes <= 0 {
		t.Errorf("lag %d bytes with five transactions unacknowledged", info.LagBytes)
	}

	s = f.start(cfg)
	for i := 4; i <= 8; i++ {
		tx := next(t, s)
		if tx.CommitLSN != txs[i-1].CommitLSN {
			t.Fatalf("after restart, got the transaction at %s, want tx %d at %s", tx.CommitLSN, i, txs[i-1].CommitLSN)
		}
		if err := s.Ack(tx); err != nil {
			t.Fatal(err)
		}
	}
	f.exec("INSERT INTO events VALUES (3, 1)")
	if tx := next(t, s); len(tx.Changes) != 1 || tx.Changes[0].New[0].Value != int32(3) {
		t.Errorf("then the new transaction, got %+v", tx.Changes)
	}

}

func TestLagIsReportedAndWarnedAbout(t *testing.T) {
	f := newFixture(t, "CREATE TABLE events (k int, seq int, PRIMARY KEY (k, seq))")
	cfg := f.config("events")
	var logs lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.WarnRetainedBytes = 1
	cfg.LagInterval = 20 * time.Millisecond
	s := f.start(cfg)
	f.exec("INSERT INTO events SELECT 1, i FROM generate_series(1, 1000) AS i")
	tx := next(t, s) // never acknowledged
	info, err := s.Lag(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.LagBytes < int64(tx.EndLSN-info.ConfirmedFlushLSN) || info.RetainedBytes <= 0 || !info.Active {
		t.Errorf("lag of a slot with an unacknowledged transaction: %+v (tx ends at %s)", info, tx.EndLSN)
	}
	slots, err := pgcdc.Slots(context.Background(), f.conn)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, si := range slots {
		found = found || si.Name == f.name && si.Plugin == "pgoutput" && si.LagBytes > 0
	}
	if !found {
		t.Errorf("Slots lists %+v, not the stream's slot %s", slots, f.name)
	}
	deadline := time.Now().Add(time.Minute)
	for s.Stats().LagWarnings == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Stats().LagWarnings == 0 || !strings.Contains(logs.String(), "retains more WAL than the bound") {
		t.Errorf("no warning about the retained WAL; log:\n%s", logs.String())
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
