package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/varve-go/varve/internal/backoff"
)

// watchFile is the goroutine of a file-backed backend, started by New and
// stopped by Close, that wakes the waiters on Watch for commits made through
// other connections to the file: other processes, other Backends of this
// process. While somebody waits it reads PRAGMA data_version on a read-only
// connection of its own, at most once per WatchInterval, and notifies when
// the value has changed; while nobody waits it sleeps on the Broadcast.
//
// The value changes when any other connection, this backend's writer
// included, has committed since the last read, so the backend's own commits
// wake the waiters twice (a spurious wake-up, which Watch allows). A WAL
// reset or checkpoint may change it too. A failed read closes the
// connection, wakes the waiters (they cannot be told there was no commit, so
// they re-read: they poll at the back-off's pace) and is retried after a
// back-off from WatchInterval to a second; the next successful read, on a
// new connection, wakes them once more, since its value cannot be compared
// with the old connection's.
func (b *Backend) watchFile() {
	defer close(b.watchStopped)
	p := poller{path: b.path}
	defer p.close()
	retry := backoff.Exponential{Initial: b.cfg.WatchInterval, Max: max(b.cfg.WatchInterval, time.Second), Jitter: 0.5}
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last time.Time // of the last read
	failures := 0
	for {
		select {
		case <-b.watch.Armed():
		case <-b.closing:
			return
		}
		pause := b.cfg.WatchInterval
		if failures > 0 {
			pause = retry.Delay(failures)
		}
		if wait := pause - time.Since(last); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-b.closing:
				return
			}
		}
		changed, err := p.poll()
		last = time.Now()
		b.polls.Add(1)
		if err != nil {
			b.pollErrors.Add(1)
			failures++
			b.watch.Notify()
			continue
		}
		failures = 0
		if changed {
			b.watch.Notify()
		}
	}
}

// poller reads PRAGMA data_version on its own connection, which it opens
// on demand.
type poller struct {
	path    string
	c       *conn
	version int64 // the last value read on c
	known   bool  // version holds a value read on c
}

// poll reports whether a commit may have happened since the last poll:
// the value has changed, or this is the first value of a new connection.
func (p *poller) poll() (changed bool, err error) {
	if p.c == nil {
		// No busy timeout: a busy file is a failed poll, retried after a
		// back-off, which must not hold Close up.
		if p.c, err = openConn(p.path, "mode=ro"); err != nil {
			return false, fmt.Errorf("sqlite: watch %s: open a connection: %w", p.path, explain(err))
		}
		p.known = false
	}
	var v int64
	ok, err := p.c.queryRow(context.Background(), "PRAGMA data_version", func(row []driver.Value) { v = asInt(row[0]) })
	if err == nil && !ok {
		err = errors.New("no row")
	}
	if err != nil {
		p.close()
		return false, fmt.Errorf("sqlite: watch %s: read PRAGMA data_version: %w", p.path, explain(err))
	}
	changed = !p.known || v != p.version
	p.version, p.known = v, true
	return changed, nil
}

func (p *poller) close() {
	if p.c != nil {
		_ = p.c.close()
		p.c = nil
	}
}
