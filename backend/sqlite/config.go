package sqlite

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/redact"
)

// Memory is the Path of an in-memory database.
const Memory = ":memory:"

// Defaults of a [Config].
const (
	DefaultBusyTimeout    = 5 * time.Second
	DefaultReadConns      = 4
	DefaultMaxBatchEvents = 10_000
	DefaultMaxBatchOps    = 1_000
	DefaultWatchInterval  = 10 * time.Millisecond
)

// Bounds of [Config.WatchInterval].
const (
	MinWatchInterval = time.Millisecond
	MaxWatchInterval = time.Minute
)

// Synchronous is how hard a commit pushes its data to the disk: SQLite's
// PRAGMA synchronous, with the database in WAL mode.
type Synchronous uint8

const (
	// SyncFull syncs the write-ahead log at every commit: an acknowledged
	// append survives a crash of the process and a loss of power. The default.
	SyncFull Synchronous = iota
	// SyncNormal syncs the write-ahead log only at checkpoints: an
	// acknowledged append survives a crash of the process, but the last
	// commits before a power loss or an operating system crash may be lost
	// (the database stays consistent).
	SyncNormal
)

func (s Synchronous) String() string {
	switch s {
	case SyncFull:
		return "full"
	case SyncNormal:
		return "normal"
	}
	return fmt.Sprintf("Synchronous(%d)", uint8(s))
}

func (s Synchronous) pragma() string {
	if s == SyncNormal {
		return "NORMAL"
	}
	return "FULL"
}

// Config configures a [Backend]. Only Path is required; the zero value of
// every other field gives its default.
type Config struct {
	// Path is the database file, created if missing, or [Memory] for an
	// in-memory database that lives as long as the backend.
	Path string
	// Synchronous is the durability of a commit; default [SyncFull].
	Synchronous Synchronous
	// BusyTimeout bounds the wait for a lock held by another process on
	// the same file; default 5s.
	BusyTimeout time.Duration
	// ReadConns is the number of read-only connections; default 4. An
	// in-memory database has a single connection for reads and writes.
	ReadConns int
	// MaxBatchEvents and MaxBatchOps bound one group commit: the writer
	// stops collecting queued writes once the batch holds this many events
	// or operations; defaults 10,000 and 1,000. An append larger than
	// MaxBatchEvents is committed alone.
	MaxBatchEvents int
	MaxBatchOps    int
	// MaxBatchDelay is how long the writer waits for more writes before it
	// commits a batch that is not full. The default 0 commits what has
	// queued up while the previous commit was running, which is what makes
	// batches under load without delaying a lone writer.
	MaxBatchDelay time.Duration
	// MaxSize caps the database file in bytes (PRAGMA max_page_count); a
	// write that would grow it further fails with SQLite's "database or
	// disk is full". 0 means no cap.
	MaxSize int64
	// QuickCheck runs PRAGMA quick_check when the database is opened and
	// refuses a damaged file. It reads the whole file.
	QuickCheck bool
	// WatchInterval is how often, while somebody waits on [Backend.Watch],
	// the backend checks the file for commits of other processes (and of
	// other Backends of this process): the delay before such a commit
	// wakes the waiters is at most about this long. Each check reads PRAGMA
	// data_version (7.5-9µs each on a shared 2-core VM, so 0.1% of a core at
	// the default); nobody waiting, nothing is checked.
	// Default 10ms, from [MinWatchInterval] to [MaxWatchInterval]. An
	// in-memory database, which no other connection can write, ignores it.
	WatchInterval time.Duration
	// Inline, when set, runs in the transaction of every append (Append,
	// AppendIf, AppendMulti), after its events are written: a read model
	// that must never lag the events. See [InlineFunc].
	Inline InlineFunc
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Path == "":
		return c, fmt.Errorf("sqlite: config: empty Path (use %q for an in-memory database): %w", Memory, varve.ErrInvalidArgument)
	case c.Synchronous > SyncNormal:
		return c, fmt.Errorf("sqlite: config: unknown %v: %w", c.Synchronous, varve.ErrInvalidArgument)
	case c.BusyTimeout < 0 || c.ReadConns < 0 || c.MaxBatchEvents < 0 || c.MaxBatchOps < 0 || c.MaxBatchDelay < 0 || c.MaxSize < 0:
		return c, fmt.Errorf("sqlite: config: negative setting in %+v: %w", c, varve.ErrInvalidArgument)
	case c.WatchInterval != 0 && (c.WatchInterval < MinWatchInterval || c.WatchInterval > MaxWatchInterval):
		return c, fmt.Errorf("sqlite: config: WatchInterval %v out of [%v, %v]: %w", c.WatchInterval, MinWatchInterval, MaxWatchInterval, varve.ErrInvalidArgument)
	}
	if c.WatchInterval == 0 {
		c.WatchInterval = DefaultWatchInterval
	}
	if c.BusyTimeout == 0 {
		c.BusyTimeout = DefaultBusyTimeout
	}
	if c.ReadConns == 0 {
		c.ReadConns = DefaultReadConns
	}
	if c.MaxBatchEvents == 0 {
		c.MaxBatchEvents = DefaultMaxBatchEvents
	}
	if c.MaxBatchOps == 0 {
		c.MaxBatchOps = DefaultMaxBatchOps
	}
	return c, nil
}

// ParseURL parses a backend URL: sqlite:///absolute/path/file.db,
// sqlite:relative/path/file.db or sqlite::memory:. Query parameters set the
// other fields of the Config:
//
//	synchronous=full|normal
//	busy_timeout=5s
//	read_conns=4
//	max_batch_events=10000
//	max_batch_ops=1000
//	max_batch_delay=0s
//	max_size=1073741824
//	quick_check=true
//	watch_interval=10ms
func ParseURL(raw string) (Config, error) {
	var cfg Config
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("sqlite: parse URL %s: %s: %w", redact.URL(raw), fmt.Sprintf(format, args...), varve.ErrInvalidArgument)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fail("not a URL") // url.Parse's error holds the whole URL
	}
	if u.Scheme != "sqlite" {
		return fail("scheme %q, want sqlite", u.Scheme)
	}
	switch {
	case u.Opaque != "":
		cfg.Path = u.Opaque
		if cfg.Path != Memory {
			p, err := url.PathUnescape(u.Opaque)
			if err != nil {
				return fail("%v", err)
			}
			cfg.Path = p
		}
	case u.Host != "" && u.Host != "localhost":
		return fail("host %q: the database is a local file, write sqlite:///path", u.Host)
	case u.User != nil:
		return fail("user info in a file URL")
	default:
		cfg.Path = u.Path
	}
	if cfg.Path == "" {
		return fail("no path")
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fail("malformed query string")
	}
	for key, vals := range query {
		if len(vals) != 1 {
			return fail("parameter %s given %d times", key, len(vals))
		}
		v := vals[0]
		var err error
		switch key {
		case "synchronous":
			switch strings.ToLower(v) {
			case "full":
				cfg.Synchronous = SyncFull
			case "normal":
				cfg.Synchronous = SyncNormal
			default:
				return fail("synchronous=%s, want full or normal", v)
			}
		case "busy_timeout":
			cfg.BusyTimeout, err = time.ParseDuration(v)
		case "max_batch_delay":
			cfg.MaxBatchDelay, err = time.ParseDuration(v)
		case "watch_interval":
			cfg.WatchInterval, err = time.ParseDuration(v)
		case "read_conns":
			cfg.ReadConns, err = strconv.Atoi(v)
		case "max_batch_events":
			cfg.MaxBatchEvents, err = strconv.Atoi(v)
		case "max_batch_ops":
			cfg.MaxBatchOps, err = strconv.Atoi(v)
		case "max_size":
			cfg.MaxSize, err = strconv.ParseInt(v, 10, 64)
		case "quick_check":
			cfg.QuickCheck, err = strconv.ParseBool(v)
		default:
			return fail("unknown parameter %q", key)
		}
		if err != nil {
			return fail("parameter %s: %v", key, err)
		}
	}
	if _, err := cfg.withDefaults(); err != nil {
		return fail("%v", err)
	}
	return cfg, nil
}
