package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/redact"
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
	// DefaultConnectTimeout bounds each connection attempt (TCP, TLS and
	// start-up) unless Config.ConnectTimeout or the connection string's
	// connect_timeout says otherwise: a server that accepts connections
	// but never answers fails the open instead of hanging it.
	DefaultConnectTimeout = 10 * time.Second
)

// Config configures a [Backend]. The zero value connects with libpq's
// environment defaults (PGHOST, PGUSER, ...) to the schema "varve".
type Config struct {
	// ConnString is a PostgreSQL URL or keyword/value string as pgx parses
	// it, including pgxpool's pool_* settings.
	ConnString string
	// Schema holds varve's tables and functions; default "varve". Separate
	// schemas are separate stores. Any name PostgreSQL allows works as
	// given (quotes, spaces, upper case, any UTF-8), up to 63 bytes, except
	// names reserved by PostgreSQL (pg_*, information_schema) and "public",
	// which is shared with everything else in the database (Drop would
	// remove it); a NUL is refused too.
	Schema string
	// MaxConns bounds the connection pool; 0 means the pool_max_conns of
	// ConnString or else DefaultMaxConns. An append waits for its commit's
	// WAL flush, and appends in flight together share one flush, so the
	// pool is larger than pgxpool's default of one connection per CPU.
	MaxConns int32
	// ConnectTimeout bounds each connection attempt; 0 means the
	// connect_timeout of ConnString or else DefaultConnectTimeout, a
	// negative value no bound (a context deadline still applies).
	ConnectTimeout time.Duration
	// NoMigrate skips creating and upgrading the schema, and replacing its
	// functions, in New. A schema older than the baseline is refused all
	// the same (see the package documentation).
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
	// Inline, when set, runs in the transaction of every append (Append,
	// AppendIf, AppendMulti), after its events are written: a read model
	// that must never lag the events. An append then takes an explicit
	// transaction and more round trips. See [InlineFunc].
	Inline InlineFunc
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
		return c, fmt.Errorf("postgres: config: negative MaxConns, NotifyInterval or WatchPoll: %w", varve.ErrInvalidArgument)
	}
	if err := checkSchema(c.Schema); err != nil {
		return c, err
	}
	return c, nil
}

// checkSchema refuses the schema names varve cannot own. PostgreSQL
// truncates identifiers to 63 bytes (two longer names would be one schema),
// cannot store NUL, reserves pg_* and information_schema; public belongs to
// the whole database.
func checkSchema(s string) error {
	bad := func(why string) error {
		return fmt.Errorf("postgres: schema name %s: %w", why, varve.ErrInvalidArgument)
	}
	switch {
	case len(s) > 63:
		return bad(fmt.Sprintf("is %d bytes, PostgreSQL keeps 63", len(s)))
	case strings.IndexByte(s, 0) >= 0:
		return bad("contains NUL")
	case !utf8.ValidString(s):
		return bad("is not valid UTF-8")
	case strings.HasPrefix(s, "pg_"):
		return bad(`begins with "pg_", which PostgreSQL reserves for system schemas`)
	case s == "information_schema":
		return bad("information_schema is PostgreSQL's own")
	case s == "public":
		return bad("public is shared with the rest of the database; varve needs a schema of its own")
	}
	return nil
}

// ParseURL parses a postgres:// or postgresql:// URL into a Config. The
// query parameters varve_schema, varve_max_conns, varve_no_migrate,
// varve_no_notify, varve_notify_interval and varve_watch_poll set the
// corresponding fields; every other part of the URL is passed to pgx, which
// knows pool_* settings, connect_timeout, sslmode and the like, and sends
// the rest to the server as run-time parameters (application_name,
// search_path, ...; default_transaction_isolation is always read
// committed, which the backend's statements rely on, and jit is off unless
// given). An unknown varve_*
// parameter, a parameter given twice or a malformed query string (a bad %
// escape, a ";") is refused with [varve.ErrInvalidArgument]. Errors never
// show a password.
//
//	postgres://user@127.0.0.1:5432/db?sslmode=disable&varve_schema=orders
func ParseURL(raw string) (Config, error) {
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("postgres: parse URL %s: %s: %w", redact.URL(raw), fmt.Sprintf(format, args...), varve.ErrInvalidArgument)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fail("%s", urlProblem(err)) // url.Parse's error holds the whole URL
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fail("scheme must be postgres or postgresql")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fail("malformed query string")
	}
	var cfg Config
	for key, vals := range q {
		if len(vals) != 1 {
			return fail("parameter %s given %d times", paramName(key), len(vals))
		}
		lower := strings.ToLower(key)
		if !strings.HasPrefix(lower, "varve_") {
			continue
		}
		v := vals[0]
		var err error
		switch key {
		case "varve_schema":
			cfg.Schema = v
		case "varve_max_conns":
			var n int64
			n, err = strconv.ParseInt(v, 10, 32)
			cfg.MaxConns = int32(n)
		case "varve_no_migrate":
			cfg.NoMigrate, err = strconv.ParseBool(v)
		case "varve_no_notify":
			cfg.NoNotify, err = strconv.ParseBool(v)
		case "varve_notify_interval":
			cfg.NotifyInterval, err = time.ParseDuration(v)
		case "varve_watch_poll":
			cfg.WatchPoll, err = time.ParseDuration(v)
		default:
			return fail("unknown parameter %s", paramName(key))
		}
		if err != nil {
			return fail("%s=%q is not a valid value", key, v)
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

// urlProblem says what is wrong with a URL that url.Parse refused, in
// words of its own: the parser's error quotes the input.
func urlProblem(err error) string {
	var esc url.EscapeError
	var host url.InvalidHostError
	switch {
	case errors.As(err, &esc):
		return "bad % escape"
	case errors.As(err, &host):
		return "invalid character in the host"
	case strings.Contains(err.Error(), "invalid port"):
		return "invalid port"
	case strings.Contains(err.Error(), "control character"):
		return "control character in the URL"
	}
	return "malformed URL"
}

// paramName quotes a parameter's name if it is a plain one, so that a
// malformed URL whose password ended up in a key is not printed.
func paramName(key string) string {
	if len(key) > 64 {
		return "(a long name)"
	}
	for _, r := range key {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return "(a name with unusual characters)"
		}
	}
	return key
}

// parseProblems are the phrases of pgx's connection string errors that say
// what is wrong without quoting the input.
var parseProblems = []string{
	"failed to parse as URL", "failed to parse as keyword/value", "invalid port", "port numbers to",
	"invalid connect_timeout", "invalid sslcertmode", "failed to configure TLS", "failed to read service",
	"unknown target_session_attrs", "invalid min_protocol_version", "invalid max_protocol_version",
	"unknown channel_binding", "invalid require_auth", "not in ConnStringAllowedKeys",
	"cannot parse pool_max_conns", "pool_max_conns too small", "cannot parse pool_min_conns",
	"cannot parse pool_min_idle_conns", "cannot parse pool_max_conn_lifetime_jitter",
	"cannot parse pool_max_conn_lifetime", "cannot parse pool_max_conn_idle_time",
	"cannot parse pool_health_check_period", "cannot parse pool_ping_timeout",
}

// parseProblem names what pgx found wrong with a connection string. pgx's
// error text holds the string itself, with passwords masked only as far as
// the string can be parsed, so none of it is passed on.
func parseProblem(err error) string {
	msg := err.Error()
	for _, p := range parseProblems {
		if strings.Contains(msg, p) {
			return p
		}
	}
	return "pgx cannot parse it"
}
