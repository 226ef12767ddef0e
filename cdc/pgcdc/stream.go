package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/varve-go/varve/internal/backoff"
)

// Config configures a [Stream]. The zero value of every field but
// ConnString is usable.
type Config struct {
	// ConnString is the connection string of the database to capture (an
	// ordinary one: the stream adds replication=database itself).
	ConnString string
	// Slot and Publication name the replication slot and the publication;
	// both default to "varve_cdc" and are created when missing.
	Slot, Publication string
	// Tables are the tables of a publication that Start creates (none:
	// FOR ALL TABLES). An existing publication is used as it is.
	Tables []string
	// StatusInterval is how often the stream reports its confirmed flush
	// LSN to the server, and the longest an acknowledgement waits to reach
	// it (default 1s). Keep it well below the server's wal_sender_timeout.
	StatusInterval time.Duration
	// Buffer is how many decoded transactions may wait for Next
	// (default 64).
	Buffer int
	// Binary asks pgoutput for values in binary form (PostgreSQL 14 and
	// later); the default is text.
	Binary bool
	// UnknownTypesAsText makes a value of a type pgx's map does not know
	// (an enum, a domain over one, an extension's type) its text instead
	// of a DecodeError.
	UnknownTypesAsText bool
	// MaxReconnectDelay caps the back-off between reconnections after
	// the replication connection dropped (default 5s).
	MaxReconnectDelay time.Duration
	// WarnRetainedBytes, when above 0, makes the stream check the slot
	// every LagInterval (default 30s) on an ordinary connection and log a
	// warning while the slot retains more WAL than this on the server: a
	// consumer that stopped acknowledging, or one that fell behind, will
	// fill the server's disk.
	WarnRetainedBytes int64
	LagInterval       time.Duration
	// SlotWait is how long Start waits for a slot that another stream
	// still holds, such as one that just ended (default 10s).
	SlotWait time.Duration
	// Logger receives a warning per reconnection (default: slog.Default()).
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.ConnString == "" {
		return c, errors.New("pgcdc: Config.ConnString is required")
	}
	if c.Slot == "" {
		c.Slot = "varve_cdc"
	}
	if c.Publication == "" {
		c.Publication = "varve_cdc"
	}
	if c.StatusInterval <= 0 {
		c.StatusInterval = time.Second
	}
	if c.Buffer <= 0 {
		c.Buffer = 64
	}
	if c.MaxReconnectDelay <= 0 {
		c.MaxReconnectDelay = 5 * time.Second
	}
	if c.LagInterval <= 0 {
		c.LagInterval = 30 * time.Second
	}
	if c.SlotWait <= 0 {
		c.SlotWait = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("pgcdc: stream closed")

// Stream is one logical replication stream from one slot. See the package
// documentation for its concurrency model.
type Stream struct {
	cfg     Config
	out     chan *Transaction
	done    chan struct{}
	err     error // why run ended; read after done is closed
	cancel  context.CancelFunc
	lagDone chan struct{}

	mu      sync.Mutex
	pending []pendingTx // handed over, not all acknowledged, in order
	flushed LSN         // end of the acknowledged prefix
	handed  LSN         // end of the last transaction handed over

	reconnects, transactions, lagWarnings atomic.Int64
	closeOnce                             sync.Once
}

type pendingTx struct {
	end    LSN
	commit time.Time
	acked  bool
}

// Start checks the server, creates the publication and the slot if they
// do not exist, and starts streaming from the slot's confirmed flush LSN.
func Start(ctx context.Context, cfg Config) (*Stream, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start, err := prepare(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &Stream{cfg: cfg, out: make(chan *Transaction, cfg.Buffer), done: make(chan struct{}), lagDone: make(chan struct{}), flushed: start, handed: start}
	conn, err := s.connect(ctx, start)
	// A slot stays active for a moment after its last stream ended (the
	// server process exits after the client went away): wait for it.
	for wait := time.Now().Add(cfg.SlotWait); err != nil && slotActive(err) && time.Now().Before(wait); {
		if err := backoff.Sleep(ctx, 20*time.Millisecond); err != nil {
			return nil, err
		}
		conn, err = s.connect(ctx, start)
	}
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(rctx, conn)
	if cfg.WarnRetainedBytes > 0 {
		go s.watchLag(rctx)
	} else {
		close(s.lagDone)
	}
	return s, nil
}

// Lag describes the stream's slot: its lag and retained WAL in bytes (see
// [SlotInfo]), read on an ordinary connection.
func (s *Stream) Lag(ctx context.Context) (SlotInfo, error) {
	conn, err := pgx.Connect(ctx, s.cfg.ConnString)
	if err != nil {
		return SlotInfo{}, fmt.Errorf("pgcdc: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return Inspect(ctx, conn, s.cfg.Slot)
}

// watchLag warns while the slot retains more WAL than the configured
// bound.
func (s *Stream) watchLag(ctx context.Context) {
	defer close(s.lagDone)
	t := time.NewTicker(s.cfg.LagInterval)
	defer t.Stop()
	for {
		info, err := s.Lag(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.cfg.Logger.Warn("pgcdc: cannot read the slot's lag", "slot", s.cfg.Slot, "err", err)
		case info.RetainedBytes > s.cfg.WarnRetainedBytes:
			s.lagWarnings.Add(1)
			s.cfg.Logger.Warn("pgcdc: the slot retains more WAL than the bound; acknowledge transactions, or drop the slot if it is abandoned",
				"slot", s.cfg.Slot, "retained_bytes", info.RetainedBytes, "bound", s.cfg.WarnRetainedBytes,
				"lag_bytes", info.LagBytes, "wal_status", info.WALStatus)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func prepare(ctx context.Context, cfg Config) (LSN, error) {
	conn, err := pgx.Connect(ctx, cfg.ConnString)
	if err != nil {
		return 0, fmt.Errorf("pgcdc: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := CheckWALLevel(ctx, conn); err != nil {
		return 0, err
	}
	if _, err := EnsurePublication(ctx, conn, cfg.Publication, cfg.Tables); err != nil {
		return 0, err
	}
	if _, err := EnsureSlot(ctx, conn, cfg.Slot); err != nil {
		return 0, err
	}
	info, err := Inspect(ctx, conn, cfg.Slot)
	if err != nil {
		return 0, err
	}
	return info.ConfirmedFlushLSN, nil
}

// connect opens a replication connection and starts streaming after from.
func (s *Stream) connect(ctx context.Context, from LSN) (*pgconn.PgConn, error) {
	pc, err := pgconn.ParseConfig(s.cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: parse connection string: %w", err)
	}
	pc.RuntimeParams["replication"] = "database"
	// Text values are decoded by pgx, which reads ISO dates.
	pc.RuntimeParams["DateStyle"] = "ISO, MDY"
	pc.RuntimeParams["IntervalStyle"] = "postgres"
	pc.RuntimeParams["extra_float_digits"] = "3"
	if pc.RuntimeParams["application_name"] == "" {
		pc.RuntimeParams["application_name"] = "varve-pgcdc"
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: replication connect: %w", err)
	}
	args := []string{"proto_version '1'", "publication_names " + quoteLiteral(pgx.Identifier{s.cfg.Publication}.Sanitize())}
	if s.cfg.Binary {
		args = append(args, "binary 'true'")
	}
	if err := pglogrepl.StartReplication(ctx, conn, pgx.Identifier{s.cfg.Slot}.Sanitize(), from,
		pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: args}); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("pgcdc: start replication from slot %q at %s: %w", s.cfg.Slot, from, err)
	}
	return conn, nil
}

func quoteLiteral(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

// Next returns the next committed transaction. After a permanent failure
// (an undecodable value, a dropped slot) it returns that error, after
// Close ErrClosed.
func (s *Stream) Next(ctx context.Context) (*Transaction, error) {
	select {
	case tx := <-s.out:
		return tx, nil
	default:
	}
	select {
	case tx := <-s.out:
		return tx, nil
	case <-s.done:
		select {
		case tx := <-s.out:
			return tx, nil
		default:
		}
		return nil, s.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Ack acknowledges tx: its changes are done with. The slot's confirmed flush
// LSN moves to the end of the longest prefix of acknowledged transactions
// at the next status update.
func (s *Stream) Ack(tx *Transaction) error {
	if tx == nil {
		return errors.New("pgcdc: ack of a nil transaction")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.pending), func(i int) bool { return s.pending[i].end >= tx.EndLSN })
	if i == len(s.pending) || s.pending[i].end != tx.EndLSN || s.pending[i].acked {
		return fmt.Errorf("pgcdc: ack of transaction %d ending at %s: not awaiting acknowledgement", tx.Xid, tx.EndLSN)
	}
	s.pending[i].acked = true
	n := 0
	for n < len(s.pending) && s.pending[n].acked {
		n++
	}
	if n > 0 {
		s.flushed = s.pending[n-1].end
		s.pending = s.pending[n:]
	}
	return nil
}

// Flushed returns the end of the acknowledged prefix: what the stream
// confirms (or will confirm at its next status update) to the slot.
func (s *Stream) Flushed() LSN {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushed
}

// Stats counts what the stream did.
type Stats struct {
	// Transactions handed over and reconnections after a dropped
	// replication connection.
	Transactions, Reconnects int64
	// LagWarnings counts the checks that found the slot retaining more
	// WAL than Config.WarnRetainedBytes.
	LagWarnings int64
	// Pending is the number of transactions handed over and not yet in the
	// acknowledged prefix; Flushed is the end of that prefix.
	Pending int
	Flushed LSN
	// OldestPending is the commit time of the oldest transaction handed
	// over and not acknowledged (zero when none is): time.Since of it is
	// how far the consumer is behind in time. Lag in bytes is in
	// [Stream.Lag].
	OldestPending time.Time
}

// Stats returns the stream's counters.
func (s *Stream) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Transactions: s.transactions.Load(), Reconnects: s.reconnects.Load(), LagWarnings: s.lagWarnings.Load(), Pending: len(s.pending), Flushed: s.flushed}
	for _, p := range s.pending {
		if !p.acked {
			st.OldestPending = p.commit
			break
		}
	}
	return st
}

// Close stops the stream: it sends the last status update, so the slot
// keeps the acknowledged prefix, ends the replication (the slot is free for
// another stream when Close returns, unless the server did not answer
// within 5s) and closes the connection. It is idempotent.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() { s.cancel() })
	<-s.done
	<-s.lagDone
	if errors.Is(s.err, ErrClosed) {
		return nil
	}
	return s.err
}

// gone reports an error of a slot or publication that does not exist: no
// reconnection helps.
func gone(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42704" // undefined_object
}

func slotActive(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006" // object_in_use
}

// permanentError ends the stream instead of a reconnection.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

func (s *Stream) run(ctx context.Context, conn *pgconn.PgConn) {
	defer close(s.done)
	policy := backoff.Exponential{Initial: 50 * time.Millisecond, Max: s.cfg.MaxReconnectDelay, Jitter: 0.5}
	dec := newDecoder(s.cfg.UnknownTypesAsText)
	for attempt := 0; ; {
		if conn != nil {
			err := s.session(ctx, conn, dec)
			conn = nil
			if ctx.Err() != nil {
				s.err = ErrClosed
				return
			}
			var perm permanentError
			if errors.As(err, &perm) {
				s.err = perm.error
				return
			}
			if gone(err) {
				s.err = fmt.Errorf("pgcdc: slot %q: %w", s.cfg.Slot, err)
				return
			}
			s.cfg.Logger.Warn("pgcdc: replication connection lost; reconnecting", "slot", s.cfg.Slot, "err", err)
			dec.reset()
		}
		attempt++
		if backoff.Sleep(ctx, policy.Delay(attempt)) != nil {
			s.err = ErrClosed
			return
		}
		s.mu.Lock()
		from := max(s.handed, s.flushed)
		s.mu.Unlock()
		c, err := s.connect(ctx, from)
		if err != nil {
			if ctx.Err() != nil {
				s.err = ErrClosed
				return
			}
			if gone(err) {
				s.err = err
				return
			}
			s.cfg.Logger.Warn("pgcdc: reconnect failed", "slot", s.cfg.Slot, "attempt", attempt, "err", err)
			continue
		}
		s.reconnects.Add(1)
		conn, attempt = c, 0
	}
}

// session streams from conn until it fails or ctx ends, and closes it.
func (s *Stream) session(ctx context.Context, conn *pgconn.PgConn, dec *decoder) error {
	netConn := conn.Conn()
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = netConn.SetReadDeadline(time.Now())
		close(fired)
	})
	defer func() {
		if !stop() && ctx.Err() != nil {
			<-fired // its deadline must not cut the clean end short
		}
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if ctx.Err() != nil {
			// A clean end: the last status, then the end of the copy, which
			// the server answers once it processed the status and let go
			// of the slot.
			_ = netConn.SetDeadline(time.Now().Add(5 * time.Second))
			if s.sendStatus(conn) == nil {
				_, _ = pglogrepl.SendStandbyCopyDone(cctx, conn)
			}
		}
		_ = conn.Close(cctx)
	}()
	// The read deadline is the next status update: one deadline per
	// interval, not one per message.
	statusDue := true
	for {
		if statusDue {
			if err := s.sendStatus(conn); err != nil {
				return err
			}
			if err := netConn.SetReadDeadline(time.Now().Add(s.cfg.StatusInterval)); err != nil {
				return err
			}
			statusDue = false
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		msg, err := conn.ReceiveMessage(context.Background())
		if err != nil {
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() && !conn.IsClosed() {
				statusDue = true
				continue
			}
			return err
		}
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return permanentError{fmt.Errorf("pgcdc: %w", err)}
				}
				if dec.tx == nil {
					s.idle(ka.ServerWALEnd)
				}
				if ka.ReplyRequested {
					statusDue = true
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return permanentError{fmt.Errorf("pgcdc: %w", err)}
				}
				tx, err := dec.decode(xld.WALData, xld.WALStart)
				if err != nil {
					return permanentError{err}
				}
				if tx != nil {
					if err := s.hand(ctx, conn, tx); err != nil {
						return err
					}
				}
			}
		case *pgproto3.ErrorResponse:
			return pgconn.ErrorResponseToPgError(msg)
		case *pgproto3.CopyDone:
			return errors.New("pgcdc: the server ended the replication stream")
		}
	}
}

// idle moves the flush position to the server's WAL end when every
// transaction handed over is acknowledged and none is being read, so that
// a slot on a quiet publication does not hold back WAL written elsewhere.
func (s *Stream) idle(walEnd LSN) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 && len(s.out) == 0 && walEnd > s.flushed && walEnd >= s.handed {
		s.flushed = walEnd
	}
}

// hand registers tx as pending and passes it to Next, sending status
// updates while the consumer keeps it waiting.
func (s *Stream) hand(ctx context.Context, conn *pgconn.PgConn, tx *Transaction) error {
	s.mu.Lock()
	s.pending = append(s.pending, pendingTx{end: tx.EndLSN, commit: tx.CommitTime})
	s.handed = tx.EndLSN
	s.mu.Unlock()
	s.transactions.Add(1)
	select {
	case s.out <- tx:
		return nil
	default:
	}
	t := time.NewTicker(s.cfg.StatusInterval)
	defer t.Stop()
	for {
		select {
		case s.out <- tx:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if err := s.sendStatus(conn); err != nil {
				return err
			}
		}
	}
}

func (s *Stream) sendStatus(conn *pgconn.PgConn) error {
	s.mu.Lock()
	pos := s.flushed
	s.mu.Unlock()
	if pos == 0 {
		return nil
	}
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos})
	if err != nil {
		return fmt.Errorf("pgcdc: send status update: %w", err)
	}
	return nil
}
