package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/notify"
)

// Backend is the SQLite backend. It implements [varve.Backend] and the
// capabilities [varve.SnapshotStore], [varve.CheckpointStore],
// [varve.Watcher], [varve.StreamLister], [varve.CheckpointLister],
// [varve.FilteredReader], [varve.MultiAppender], [varve.TagStore],
// [varve.LeaseStore] and [varve.KeyStore], and is safe for concurrent use.
type Backend struct {
	cfg    Config
	path   string
	memory bool

	commits     atomic.Uint64 // write transactions committed
	ops         atomic.Uint64 // writes committed in them
	polls       atomic.Uint64 // reads of PRAGMA data_version by watchFile
	pollErrors  atomic.Uint64 // failed ones
	keyCkptBusy atomic.Uint64 // checkpoints after a key's deletion that left the WAL

	wconn *conn // the writer's connection; also the read pool's only one in memory
	reads *pool

	queue   chan *op
	closing chan struct{} // closed by Close
	stopped chan struct{} // closed when the writer has returned
	closed  atomic.Bool
	once    sync.Once

	watch        notify.Broadcast // woken after each commit that wrote events
	watchStopped chan struct{}    // closed when watchFile has returned; nil in memory

	txdb *txDB // WriteTx and ReadTx
}

var (
	_ varve.Backend         = (*Backend)(nil)
	_ varve.SnapshotStore   = (*Backend)(nil)
	_ varve.CheckpointStore = (*Backend)(nil)
	_ varve.Watcher         = (*Backend)(nil)
)

// New opens (or creates) the database, brings its schema up to date and
// starts the writer goroutine and, for a file, the goroutine that looks for
// other connections' commits while somebody waits on Watch; Close stops
// both.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:     cfg,
		path:    cfg.Path,
		memory:  cfg.Path == Memory,
		queue:   make(chan *op, cfg.MaxBatchOps),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
	}
	if !b.memory {
		if b.path, err = filepath.Abs(cfg.Path); err != nil {
			return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
		}
	}
	if err := b.open(ctx); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", b.path, err)
	}
	b.txdb = newTxDB(b)
	go b.run()
	if !b.memory {
		b.watchStopped = make(chan struct{})
		go b.watchFile()
	}
	return b, nil
}

func (b *Backend) open(ctx context.Context) (err error) {
	b.wconn, err = openConn(b.path, "mode=rwc")
	if err != nil {
		return explain(err)
	}
	defer func() {
		if err != nil {
			_ = b.wconn.close()
		}
	}()
	if err := configure(ctx, b.wconn, b.cfg, b.memory); err != nil {
		return explain(err)
	}
	if err := upgrade(ctx, b.wconn); err != nil {
		return explain(err)
	}
	if b.cfg.QuickCheck {
		if err := quickCheck(ctx, b.wconn); err != nil {
			return explain(err)
		}
	}
	if b.memory {
		// An in-memory database belongs to its connection: the writer and
		// the readers take turns on it.
		b.reads = newPool(1, func() (*conn, error) { return nil, errors.New("in-memory connection lost") })
		b.reads.idle = []*conn{b.wconn}
		return nil
	}
	busy := fmt.Sprintf("PRAGMA busy_timeout = %d", b.cfg.BusyTimeout.Milliseconds())
	b.reads = newPool(b.cfg.ReadConns, func() (*conn, error) {
		c, err := openConn(b.path, "mode=ro")
		if err != nil {
			return nil, fmt.Errorf("sqlite: open a read connection to %s: %w", b.path, explain(err))
		}
		if _, err := c.exec(context.Background(), busy); err != nil {
			_ = c.close()
			return nil, fmt.Errorf("sqlite: open a read connection to %s: %w", b.path, err)
		}
		return c, nil
	})
	// Fail now, not at the first read, if readers cannot open the file.
	c, err := b.reads.get(ctx)
	if err != nil {
		return err
	}
	b.reads.put(c, false)
	return nil
}

// explain adds a hint to the errors whose SQLite message alone does not say
// what to do.
func explain(err error) error {
	switch code(err) {
	case sqliteCantOpen, sqliteReadOnly, sqlitePerm:
		return fmt.Errorf("%w (the file and its directory must be writable: SQLite creates the -wal and -shm files beside it)", err)
	case sqliteNotADB:
		return fmt.Errorf("%w (the file exists and is not a SQLite database; it was left untouched)", err)
	case sqliteCorrupt:
		return fmt.Errorf("%w (the file is damaged; restore it from a backup)", err)
	case sqliteTooBig:
		return fmt.Errorf("%w: %w", err, varve.ErrInvalidArgument)
	}
	return err
}

// Features implements [varve.Backend].
func (b *Backend) Features() varve.Features {
	return varve.Features{
		Name:           "sqlite",
		Durable:        !b.memory,
		UniqueEventIDs: true,
	}
}

// Stats describes the group commits and the checks for other
// connections' commits so far.
type Stats struct {
	// Commits is the number of write transactions committed.
	Commits uint64
	// Writes is the number of writes (appends, deletes, truncations,
	// snapshots, checkpoints) in them; Writes/Commits is the mean batch.
	Writes uint64
	// WatchPolls is the number of times the file was checked for commits
	// of other connections on behalf of waiters on Watch, and WatchErrors
	// the number of those checks that failed (each is retried after a
	// back-off; see [Backend.Watch]).
	WatchPolls  uint64
	WatchErrors uint64
	// KeyCheckpointsBusy is the number of checkpoints after the deletion
	// of a key ([Backend.DeleteKey]) that could not truncate the WAL,
	// because a reader kept it past the busy timeout, or failed.
	KeyCheckpointsBusy uint64
}

// Stats returns the counters.
func (b *Backend) Stats() Stats {
	return Stats{Commits: b.commits.Load(), Writes: b.ops.Load(), WatchPolls: b.polls.Load(), WatchErrors: b.pollErrors.Load(),
		KeyCheckpointsBusy: b.keyCkptBusy.Load()}
}

// Watch implements [varve.Watcher]. The channel is closed right after the
// next commit of this backend that wrote events, and within about
// [Config.WatchInterval] after a commit through any other connection to the
// same file (another process, another Backend of this process), which the
// backend checks for only while somebody waits. Those checks also see this
// backend's own commits, and a commit that wrote no events, so a wake-up
// may be spurious. While the check fails (the file cannot be opened), the
// waiters are woken after every failed attempt, from WatchInterval to a
// second apart, so that they read for themselves. A file replaced or
// renamed under an open backend is not followed: the backend keeps the one
// it opened. On a closed backend the channel is closed at once.
func (b *Backend) Watch() <-chan struct{} { return b.watch.Wait() }

// Close stops the writer, failing the writes still queued with
// [varve.ErrClosed], and closes the connections. It is idempotent.
func (b *Backend) Close() error {
	var err error
	b.once.Do(func() {
		b.closed.Store(true)
		close(b.closing)
		<-b.stopped
		if b.watchStopped != nil {
			<-b.watchStopped
		}
		errs := []error{b.txdb.close(), b.reads.close()}
		if !b.memory {
			errs = append(errs, b.wconn.close())
		}
		if e := errors.Join(errs...); e != nil {
			err = fmt.Errorf("sqlite: close %s: %w", b.path, e)
		}
		b.watch.Close()
	})
	return err
}

// SQLite primary result codes.
const (
	sqlitePerm     = 3
	sqliteReadOnly = 8
	sqliteCorrupt  = 11
	sqliteFull     = 13
	sqliteCantOpen = 14
	sqliteTooBig   = 18
	sqliteNotADB   = 26
)
