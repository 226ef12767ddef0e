package nats

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/varve-go/varve"
)

// Defaults of a [Config].
const (
	DefaultURL             = "nats://127.0.0.1:4222"
	DefaultStream          = "VARVE"
	DefaultPrefix          = "varve"
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultRequestTimeout  = 10 * time.Second
	DefaultCachedStreams   = 100_000
	DefaultCachedEventIDs  = 1_000_000
	DefaultWatchPoll       = time.Second
)

// Config configures a [Backend]. The zero value connects to
// nats://127.0.0.1:4222 and stores events in the JetStream stream "VARVE"
// under the subjects "varve.>".
type Config struct {
	// URL of the NATS server(s), comma separated; default DefaultURL.
	// Ignored when Conn is set.
	URL string
	// Conn is an open connection to use instead of dialing URL. The backend
	// does not close it.
	Conn *natsgo.Conn
	// Options are passed to natsgo.Connect (credentials, TLS, name).
	Options []natsgo.Option

	// Stream is the JetStream stream that holds every event stream; it is
	// created if missing. Default "VARVE".
	Stream string
	// Prefix is the first subject token(s) of the backend's subjects, e.g.
	// "varve" gives "varve.e.<stream id>". Default "varve".
	Prefix string
	// Replicas of the JetStream stream and buckets when they are created;
	// default 1.
	Replicas int
	// MemoryStorage keeps the stream in memory (tests, benchmarks). An
	// acknowledged append is then lost when the server stops.
	MemoryStorage bool
	// DuplicateWindow is the JetStream dedupe window of the stream when it
	// is created; default 2 minutes. Retries within it are recognised by the
	// server, and all of them by the stream's event id set.
	DuplicateWindow time.Duration
	// SnapshotBucket, CheckpointBucket and KeyBucket name the key-value
	// buckets of snapshots, checkpoints and the keys of crypto-shredding;
	// defaults Stream+"_snapshots", Stream+"_checkpoints" and
	// Stream+"_keys".
	SnapshotBucket   string
	CheckpointBucket string
	KeyBucket        string
	// RequestTimeout bounds one server request when the caller's context
	// has no deadline; default 10s.
	RequestTimeout time.Duration
	// CachedStreams and CachedEventIDs bound the per-stream cache: for
	// each stream the backend met, its head (so that an append is one
	// round trip), a commit to start reads at, and the ids of its live
	// events (so that an append checks every id it carries in that round
	// trip; an id takes 20-40 bytes). A stream weighs 1 plus its cached
	// ids, and the cache holds CachedStreams + CachedEventIDs of weight;
	// defaults 100,000 and 1,000,000. An evicted stream, or one with more
	// live events than the bound, has its head and ids read again by its
	// next append.
	CachedStreams  int
	CachedEventIDs int
	// NoNotify creates the stream without the republish of each commit's
	// headers that wakes watchers in every process ([Backend.Watch]),
	// which costs every append a few microseconds on the server
	// (docs/benchmarks.md, "NATS: what a single append adds to a raw
	// publish"). Watchers are then woken by this backend's own appends at
	// once and by other processes' within WatchPoll. On a stream that has
	// the republish, NoNotify changes nothing; a backend without NoNotify
	// refuses a stream that lacks it, as its watchers would not hear other
	// processes.
	NoNotify bool
	// WatchPoll is how often watchers are woken when no notification can
	// come: on a stream without notifications (NoNotify), and while the
	// notifications' subscription cannot be made. Default 1s.
	WatchPoll time.Duration
	// CategorySeparator ends the category part of a stream id, as
	// varve.Config.CategorySeparator, which it must equal: the category is
	// part of a stream's subject (see Layout in the package doc). Empty: the
	// separator the stream was created with, or "-" for a new stream. A
	// separator other than the stream's fails New.
	CategorySeparator string
}

// ParseURL parses "nats://[user:pass@]host:port[,host:port][?query]". Query
// parameters: stream, prefix, replicas, memory and no_notify (true/false),
// dupe_window, timeout and watch_poll (Go durations), snapshots, checkpoints
// and keys (bucket names), category_separator; an unknown one is
// varve.ErrInvalidArgument.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("nats: parse url: %w", varve.ErrInvalidArgument)
	}
	if u.Scheme != "nats" && u.Scheme != "tls" {
		return Config{}, fmt.Errorf("nats: url scheme %q, want nats or tls: %w", u.Scheme, varve.ErrInvalidArgument)
	}
	q := u.Query()
	cfg := Config{
		Stream:            q.Get("stream"),
		Prefix:            q.Get("prefix"),
		SnapshotBucket:    q.Get("snapshots"),
		CheckpointBucket:  q.Get("checkpoints"),
		KeyBucket:         q.Get("keys"),
		CategorySeparator: q.Get("category_separator"),
	}
	// Errors name the parameter, never a value: a URL may hold secrets.
	bad := func(key string) error {
		return fmt.Errorf("nats: url parameter %s: malformed value: %w", key, varve.ErrInvalidArgument)
	}
	if v := q.Get("replicas"); v != "" {
		if cfg.Replicas, err = strconv.Atoi(v); err != nil {
			return Config{}, bad("replicas")
		}
	}
	if v := q.Get("memory"); v != "" {
		if cfg.MemoryStorage, err = strconv.ParseBool(v); err != nil {
			return Config{}, bad("memory")
		}
	}
	if v := q.Get("no_notify"); v != "" {
		if cfg.NoNotify, err = strconv.ParseBool(v); err != nil {
			return Config{}, bad("no_notify")
		}
	}
	if v := q.Get("watch_poll"); v != "" {
		if cfg.WatchPoll, err = time.ParseDuration(v); err != nil {
			return Config{}, bad("watch_poll")
		}
	}
	if v := q.Get("dupe_window"); v != "" {
		if cfg.DuplicateWindow, err = time.ParseDuration(v); err != nil {
			return Config{}, bad("dupe_window")
		}
	}
	if v := q.Get("timeout"); v != "" {
		if cfg.RequestTimeout, err = time.ParseDuration(v); err != nil {
			return Config{}, bad("timeout")
		}
	}
	for key := range q {
		switch key {
		case "stream", "prefix", "snapshots", "checkpoints", "keys", "replicas", "memory", "no_notify", "watch_poll", "dupe_window", "timeout", "category_separator":
		default:
			return Config{}, fmt.Errorf("nats: unknown url parameter %q: %w", key, varve.ErrInvalidArgument)
		}
	}
	u.RawQuery = ""
	u.Fragment = ""
	cfg.URL = u.String()
	return cfg, cfg.validate()
}

func (c Config) withDefaults() (Config, error) {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.SnapshotBucket == "" {
		c.SnapshotBucket = c.Stream + "_snapshots"
	}
	if c.CheckpointBucket == "" {
		c.CheckpointBucket = c.Stream + "_checkpoints"
	}
	if c.KeyBucket == "" {
		c.KeyBucket = c.Stream + "_keys"
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.WatchPoll == 0 {
		c.WatchPoll = DefaultWatchPoll
	}
	if c.CachedStreams == 0 {
		c.CachedStreams = DefaultCachedStreams
	}
	if c.CachedEventIDs == 0 {
		c.CachedEventIDs = DefaultCachedEventIDs
	}
	return c, c.validate()
}

func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("nats: config: %s: %w", fmt.Sprintf(format, args...), varve.ErrInvalidArgument)
	}
	if c.Stream != "" && !isName(c.Stream) {
		return bad("stream name %q must be letters, digits, '_' or '-'", c.Stream)
	}
	for _, b := range []string{c.SnapshotBucket, c.CheckpointBucket, c.KeyBucket} {
		if b != "" && !isName(b) {
			return bad("bucket name %q must be letters, digits, '_' or '-'", b)
		}
	}
	if c.Prefix != "" {
		for _, tok := range strings.Split(c.Prefix, ".") {
			if !isName(tok) {
				return bad("subject prefix %q must be dot-separated tokens of letters, digits, '_' or '-'", c.Prefix)
			}
		}
	}
	if c.CategorySeparator != "" {
		if err := checkSeparator(c.CategorySeparator); err != nil {
			return err
		}
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		return bad("replicas %d, want 1..5", c.Replicas)
	}
	if c.DuplicateWindow < 0 || c.RequestTimeout < 0 || c.WatchPoll < 0 || c.CachedStreams < 0 || c.CachedEventIDs < 0 {
		return bad("negative duration or size")
	}
	return nil
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			return false
		}
	}
	return true
}
