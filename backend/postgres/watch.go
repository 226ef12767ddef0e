package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/varve-go/varve/internal/backoff"
	"github.com/varve-go/varve/internal/notify"
)

// watchState is the wake-up signal of the watchers and the state of the
// listener goroutine that the first Watch starts.
type watchState struct {
	signal    notify.Broadcast
	mu        sync.Mutex // guards the two below
	listening bool
	stopped   bool // Close has begun: no listener starts any more
}

// channel is the LISTEN/NOTIFY channel of the backend's schema.
func (b *Backend) channel() string { return pgx.Identifier{"varve." + b.cfg.Schema}.Sanitize() }

// Watch returns a channel closed at the next commit of this backend, the
// next NOTIFY from another process's backend on the same schema, or after
// Config.WatchPoll without either. The first call starts a goroutine that
// holds a LISTEN connection until Close (on a standby, which refuses
// LISTEN, one that wakes the watchers every WatchPoll).
func (b *Backend) Watch() <-chan struct{} {
	ch := b.watch.signal.Wait()
	b.watch.mu.Lock()
	defer b.watch.mu.Unlock()
	if !b.watch.listening && !b.watch.stopped {
		b.watch.listening = true
		b.wg.Add(1)
		go b.listener()
	}
	return ch
}

// committed wakes this process's watchers and asks the notifier to tell
// the others.
func (b *Backend) committed() {
	b.watch.signal.Notify()
	if !b.cfg.NoNotify {
		select {
		case b.notify <- struct{}{}:
		default:
		}
	}
}

// notifier sends one NOTIFY for every burst of commits, at most one per
// Config.NotifyInterval. A NOTIFY inside the appending transaction would
// serialize the commits of all appenders on PostgreSQL's notification
// queue lock; this one runs beside them.
func (b *Backend) notifier() {
	defer b.wg.Done()
	ctx := b.life
	// A NOTIFY commits a transaction of its own; nothing is lost if that
	// commit is not flushed, so it does not wait for the WAL flush that
	// the appends beside it are waiting for (one simple-protocol query is
	// one implicit transaction, which SET LOCAL applies to).
	sql := "SET LOCAL synchronous_commit = off; NOTIFY " + b.channel()
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.notify:
		}
		b.requests.Add(1)
		// A failed NOTIFY only delays other processes' watchers until
		// their WatchPoll; there is nobody to report it to.
		if c, err := b.pool.Acquire(ctx); err == nil {
			_, _ = c.Conn().PgConn().Exec(ctx, sql).ReadAll()
			c.Release()
		}
		pause.Reset(b.cfg.NotifyInterval)
		select {
		case <-ctx.Done():
			return
		case <-pause.C:
		}
	}
}

// listenBackoff spaces the listener's reconnections after a failure.
var listenBackoff = backoff.Exponential{Initial: 50 * time.Millisecond, Max: 5 * time.Second}

// closeListenTimeout bounds the goodbye of a listener's connection.
const closeListenTimeout = time.Second

// listener holds a LISTEN connection and wakes the watchers at every
// notification, at every Config.WatchPoll without one, and when the
// connection fails; it reconnects with a growing pause.
func (b *Backend) listener() {
	defer b.wg.Done()
	ctx := b.life
	if b.standby {
		// A standby refuses LISTEN, and the primary's NOTIFYs do not
		// reach it: its watchers are woken every WatchPoll.
		poll := time.NewTicker(b.cfg.WatchPoll)
		defer poll.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-poll.C:
				b.watch.signal.Notify()
			}
		}
	}
	failures := 0
	for {
		listened := b.listen(ctx)
		b.watch.signal.Notify()
		if listened {
			failures = 0
		}
		failures++
		if backoff.Sleep(ctx, listenBackoff.Delay(failures)) != nil {
			return
		}
	}
}

// listen runs one LISTEN connection until it fails or ctx ends; it reports
// whether LISTEN succeeded.
func (b *Backend) listen(ctx context.Context) bool {
	cc := b.pool.Config().ConnConfig.Copy()
	// Waits end at every WatchPoll; they need no cancel request, and the
	// connection stays usable after a deadline.
	cc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return false
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeListenTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+b.channel()); err != nil {
		return false
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, b.cfg.WatchPoll)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		b.watch.signal.Notify()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return true
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
		default:
			return true
		}
	}
}
