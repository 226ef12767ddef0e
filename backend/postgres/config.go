package postgres

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/varve-go/varve"
)

// Defaults of a [Config].
const (
	DefaultSchema         = "varve"
	DefaultNotifyInterval = 2 * time.Millisecond
	DefaultWatchPoll      = time.Second
	// DefaultMaxConns is the pool size unless Config.MaxConns or the
	// connection string's pool_max_conns says otherwise (or pgxpool's own
	// default, one connection per CPU, is larger).
	DefaultMaxConns = 8
)

// Config configures a [Backend]. The zero value connects with libpq's
// environment defaults (PGHOST, PGUSER, ...) to the schema "varve".
type Config struct {
	// ConnString is a PostgreSQL URL or keyword/value string as pgx parses
	// it, including pgxpool's pool_* settings.
	ConnString string
	// Schema holds varve's tables and functions; default "varve". Separate
	// schemas are separate stores.
	Schema string
	// MaxConns bounds the connection pool; 0 means the pool_max_conns of
	// ConnString or else DefaultMaxConns. An append waits for its commit's
	// WAL flush, and appends in flight together share one flush, so the
	// pool is larger than pgxpool's default of one connection per CPU.
	MaxConns int32
	// NoMigrate skips creating and upgrading the schema in New.
	NoMigrate bool
	// NoNotify turns off the NOTIFY that tells other processes' watchers
	// about new events. Watchers in this process are woken either way.
	NoNotify bool
	// NotifyInterval is the least time between two NOTIFYs this backend
	// sends; appends in between share one. Default 2ms.
	NotifyInterval time.Duration
	// WatchPoll is how often watchers are woken when no notification
	// arrives, to cover events that became readable without one (a commit
	// held back behind an older transaction, a lost connection). Default 1s.
	WatchPoll time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.NotifyInterval == 0 {
		c.NotifyInterval = DefaultNotifyInterval
	}
	if c.WatchPoll == 0 {
		c.WatchPoll = DefaultWatchPoll
	}
	if c.MaxConns < 0 || c.NotifyInterval < 0 || c.WatchPoll < 0 {
		return c, fmt.Errorf("postgres: config %+v: negative setting: %w", c, varve.ErrInvalidArgument)
	}
	if len(c.Schema) > 63 {
		return c, fmt.Errorf("postgres: schema name %q is longer than 63 bytes: %w", c.Schema, varve.ErrInvalidArgument)
	}
	return c, nil
}

// ParseURL parses a postgres:// or postgresql:// URL into a Config. The
// query parameters varve_schema, varve_max_conns, varve_no_migrate,
// varve_no_notify, varve_notify_interval and varve_watch_poll set the
// corresponding fields; every other part of the URL is passed to pgx.
//
//	postgres://user@127.0.0.1:5432/db?sslmode=disable&varve_schema=orders
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("postgres: parse url: %w: %v", varve.ErrInvalidArgument, err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return Config{}, fmt.Errorf("postgres: parse url %q: scheme must be postgres or postgresql: %w", redact(u), varve.ErrInvalidArgument)
	}
	var cfg Config
	q := u.Query()
	for key, vals := range q {
		if !strings.HasPrefix(key, "varve_") {
			continue
		}
		v := vals[len(vals)-1]
		bad := func(err error) error {
			return fmt.Errorf("postgres: parse url %q: %s=%q: %w: %v", redact(u), key, v, varve.ErrInvalidArgument, err)
		}
		switch key {
		case "varve_schema":
			cfg.Schema = v
		case "varve_max_conns":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return Config{}, bad(err)
			}
			cfg.MaxConns = int32(n)
		case "varve_no_migrate", "varve_no_notify":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Config{}, bad(err)
			}
			if key == "varve_no_migrate" {
				cfg.NoMigrate = b
			} else {
				cfg.NoNotify = b
			}
		case "varve_notify_interval", "varve_watch_poll":
			d, err := time.ParseDuration(v)
			if err != nil {
				return Config{}, bad(err)
			}
			if key == "varve_notify_interval" {
				cfg.NotifyInterval = d
			} else {
				cfg.WatchPoll = d
			}
		default:
			return Config{}, bad(fmt.Errorf("unknown parameter"))
		}
		q.Del(key)
	}
	u.RawQuery = q.Encode()
	cfg.ConnString = u.String()
	if _, err := cfg.withDefaults(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func redact(u *url.URL) string { return u.Redacted() }
