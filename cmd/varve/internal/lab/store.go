package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	natsbackend "github.com/varve-go/varve/backend/nats"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/internal/redact"
	"github.com/varve-go/varve/open"
)

// DefaultStore is the store of every lab command when none is given: the
// embedded SQLite store in a new temporary file.
const DefaultStore = "sqlite"

// Local servers the shorthands postgres and nats name unless
// VARVE_POSTGRES_URL or VARVE_NATS_URL say otherwise.
const (
	LocalPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	LocalNATSURL     = "nats://127.0.0.1:4222"
)

// StoreForms describes what --store accepts, for the help of every command.
const StoreForms = `Stores (--store):
  sqlite          the embedded SQLite store in a new temporary file (the default)
  memory, mem     the in-memory store
  postgres, pg    PostgreSQL at $VARVE_POSTGRES_URL, else ` + LocalPostgresURL + `
  nats            NATS JetStream at $VARVE_NATS_URL, else ` + LocalNATSURL + `
  a URL           memory:, sqlite:///path/file.db, sqlite:relative.db, sqlite::memory:,
                  postgres://user@host:5432/db?varve_schema=s, nats://host:4222?stream=S&prefix=p;
                  "{tmp}" in a URL stands for a new temporary directory, removed after the run
Unknown URL parameters are refused. On PostgreSQL and NATS a run writes into a schema
(or stream) of its own, named for the run, and drops it afterwards unless --keep is
given; a URL that names varve_schema (or stream) is used as given and never dropped.`

// Target is a store a command was told to use, resolved: the URL to open,
// the names to show, and what to remove after the run.
type Target struct {
	// URL is what to open: {tmp} expanded, the run's schema or stream
	// added. It may hold secrets: never print it.
	URL string
	// Display is URL redacted.
	Display string
	// Label is a short redacted name for tables: "sqlite",
	// "postgres@127.0.0.1:5432/test".
	Label string
	// Backend is the scheme's backend: memory, sqlite, postgres or nats.
	Backend string
	// Namespace is the PostgreSQL schema or the NATS stream made for this
	// run, dropped by Release unless Keep; empty when the run uses the
	// store as given.
	Namespace string
	Keep      bool

	tmpDir string
	nats   natsbackend.Config // when Namespace is a NATS stream
	pg     postgres.Config    // when Namespace is a PostgreSQL schema
}

// ResolveMode says how a command uses its store.
type ResolveMode int

const (
	// ForRun is a lab run: it may make a temporary SQLite file, and on a
	// server it works in a schema or stream of its own.
	ForRun ResolveMode = iota
	// Existing opens a store that is already there, as given: no temporary
	// file, no namespace of its own.
	Existing
)

// NewRunID returns a name for a run of command: "bench_1a2b3c4d".
func NewRunID(command string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strings.ReplaceAll(command, "-", "_") + "_" + hex.EncodeToString(b[:])
}

// Resolve turns what a user gave as --store into a Target. run names the
// schema or stream of a ForRun target on a server. Errors never hold the
// URL's secrets.
func Resolve(given, run string, mode ResolveMode) (*Target, error) {
	raw := strings.TrimSpace(given)
	if raw == "" {
		if mode == Existing {
			return nil, fmt.Errorf("no store given: %w", varve.ErrInvalidArgument)
		}
		raw = DefaultStore
	}
	switch strings.ToLower(raw) {
	case "mem", "mem:", "memory", "memory:":
		raw = "memory:"
	case "sqlite", "sqlite:":
		if mode == Existing {
			return nil, fmt.Errorf("store %q is a new temporary file, which holds nothing: give the URL of an existing store (sqlite:///path/file.db): %w", raw, varve.ErrInvalidArgument)
		}
		raw = "sqlite://{tmp}/varve.db"
	case "postgres", "postgresql", "pg":
		raw = envOr("VARVE_POSTGRES_URL", LocalPostgresURL)
	case "nats":
		raw = envOr("VARVE_NATS_URL", LocalNATSURL)
	}
	scheme, _, ok := strings.Cut(raw, ":")
	scheme = strings.ToLower(scheme)
	known := false
	for _, s := range open.Schemes {
		known = known || s == scheme
	}
	if !ok || !known {
		what := fmt.Sprintf("unknown scheme %q", scheme)
		if !ok {
			what = "not a URL or shorthand"
		}
		return nil, fmt.Errorf("store %s: %s; want sqlite, memory, postgres, nats or a URL with one of the schemes %s: %w",
			redact.URL(raw), what, strings.Join(open.Schemes, ":, ")+":", varve.ErrInvalidArgument)
	}
	if scheme == "postgresql" {
		scheme = "postgres"
	}
	RegisterSecrets(raw)
	t := &Target{Backend: scheme}
	if strings.Contains(raw, "{tmp}") {
		if mode == Existing {
			return nil, fmt.Errorf("store %s: {tmp} is a new directory, which holds no store: %w", redact.URL(raw), varve.ErrInvalidArgument)
		}
		dir, err := os.MkdirTemp("", "varve-*")
		if err != nil {
			return nil, fmt.Errorf("temporary directory for the store: %w", err)
		}
		t.tmpDir = dir
		raw = strings.ReplaceAll(raw, "{tmp}", filepath.ToSlash(dir))
	}
	if mode == ForRun {
		if err := t.isolate(&raw, run); err != nil {
			t.removeTemp()
			return nil, scrubErr(err)
		}
	}
	if err := check(t.Backend, raw); err != nil {
		t.removeTemp()
		return nil, scrubErr(err)
	}
	t.URL, t.Display = raw, redact.URL(raw)
	t.Label = shortLabel(t, raw)
	return t, nil
}

// isolate gives a run on a server a schema or stream of its own, unless
// the URL names one.
func (t *Target) isolate(raw *string, run string) error {
	q, err := strictQuery(*raw)
	if err != nil {
		return err
	}
	add := func(pairs ...string) {
		sep := "?"
		if strings.Contains(*raw, "?") {
			sep = "&"
		}
		*raw += sep + strings.Join(pairs, "&")
	}
	switch t.Backend {
	case "postgres":
		if q.Has("varve_schema") {
			return nil
		}
		t.Namespace = "varve_" + run
		add("varve_schema=" + t.Namespace)
		cfg, err := postgres.ParseURL(*raw)
		if err != nil {
			return err
		}
		t.pg = cfg
	case "nats":
		if q.Has("stream") {
			return nil
		}
		t.Namespace = strings.ToUpper("VARVE_" + run)
		pairs := []string{"stream=" + t.Namespace}
		if !q.Has("prefix") {
			pairs = append(pairs, "prefix=varve_"+run)
		}
		add(pairs...)
		cfg, err := natsbackend.ParseURL(*raw)
		if err != nil {
			return err
		}
		t.nats = cfg
	}
	return nil
}

// check parses raw as its backend would, so that a malformed URL or an
// unknown parameter fails before anything runs.
func check(backend, raw string) error {
	if _, err := strictQuery(raw); err != nil {
		return err
	}
	var err error
	switch backend {
	case "memory":
		if _, rest, _ := strings.Cut(raw, ":"); rest != "" && rest != "//" {
			err = fmt.Errorf("store %s: the memory store takes no host, path or parameters: %w", redact.URL(raw), varve.ErrInvalidArgument)
		}
	case "sqlite":
		_, err = sqlite.ParseURL(raw)
	case "postgres":
		_, err = postgres.ParseURL(raw)
	case "nats":
		_, err = natsbackend.ParseURL(raw)
	}
	return err
}

// strictQuery parses the query of a URL and refuses one that does not
// parse whole (a ";" pair, a bad escape) instead of dropping the bad part.
func strictQuery(raw string) (url.Values, error) {
	_, query, _ := strings.Cut(raw, "?")
	query, _, _ = strings.Cut(query, "#")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("store %s: malformed query string: %w", redact.URL(raw), varve.ErrInvalidArgument)
	}
	return q, nil
}

// Release drops the run's schema or stream unless Keep, and removes the
// temporary directory. It is safe to call more than once.
func (t *Target) Release(ctx context.Context) error {
	defer t.removeTemp()
	if t.Namespace == "" || t.Keep {
		return nil
	}
	ns := t.Namespace
	t.Namespace = ""
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch t.Backend {
	case "postgres":
		cfg := t.pg
		cfg.NoMigrate, cfg.NoNotify = true, true
		b, err := postgres.New(ctx, cfg)
		if err != nil {
			return fmt.Errorf("drop schema %s: %s", ns, Scrub(err.Error()))
		}
		defer b.Close()
		if err := b.Drop(ctx); err != nil {
			return fmt.Errorf("drop schema %s: %s", ns, Scrub(err.Error()))
		}
	case "nats":
		nc, err := natsgo.Connect(t.nats.URL, natsgo.Name("varve-lab-cleanup"))
		if err != nil {
			return fmt.Errorf("delete stream %s: connect: %s", ns, Scrub(err.Error()))
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("delete stream %s: %w", ns, err)
		}
		var errs []error
		if err := js.DeleteStream(ctx, ns); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, fmt.Errorf("delete stream %s: %w", ns, err))
		}
		for _, bucket := range []string{ns + "_snapshots", ns + "_checkpoints", ns + "_keys"} {
			if err := js.DeleteKeyValue(ctx, bucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
				errs = append(errs, fmt.Errorf("delete bucket %s: %w", bucket, err))
			}
		}
		return errors.Join(errs...)
	}
	return nil
}

func (t *Target) removeTemp() {
	if t.tmpDir != "" {
		_ = os.RemoveAll(t.tmpDir)
		t.tmpDir = ""
	}
}

func envOr(key, def string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return def
}

// shortLabel names a store in a table cell: the backend, and the server or
// file it is on, with nothing secret.
func shortLabel(t *Target, raw string) string {
	switch t.Backend {
	case "memory":
		return "memory"
	case "sqlite":
		if t.tmpDir != "" {
			return "sqlite"
		}
		u, err := url.Parse(raw)
		if err != nil {
			return "sqlite"
		}
		p := u.Path
		if u.Opaque != "" {
			p = u.Opaque
		}
		if p == ":memory:" {
			return "sqlite (in memory)"
		}
		return "sqlite " + clip(filepath.Base(p), 32)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return t.Backend
	}
	host := u.Host
	if t.Backend == "postgres" && len(u.Path) > 1 {
		host += u.Path
	}
	return t.Backend + "@" + clip(host, 40)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// UniqueLabels makes the labels of targets distinct by numbering repeats.
func UniqueLabels(ts []*Target) {
	seen := map[string]int{}
	for _, t := range ts {
		seen[t.Label]++
	}
	n := map[string]int{}
	for _, t := range ts {
		if seen[t.Label] > 1 {
			base := t.Label
			n[base]++
			t.Label = fmt.Sprintf("%s #%d", base, n[base])
		}
	}
}

// Open opens the store a target or URL names; "mem:" is short for
// "memory:".
func Open(ctx context.Context, raw string) (*varve.Store, error) {
	s, err := open.Store(ctx, shorthand(raw), varve.Config{})
	if err != nil {
		return nil, scrubErr(err)
	}
	return s, nil
}

// OpenBackend opens the backend a URL names.
func OpenBackend(ctx context.Context, raw string) (varve.Backend, error) {
	b, err := open.Backend(ctx, shorthand(raw))
	if err != nil {
		return nil, scrubErr(err)
	}
	return b, nil
}

func shorthand(raw string) string {
	if raw == "mem:" || raw == "mem" {
		return "memory:"
	}
	return raw
}

// Redact returns a store URL fit for printing: without its secrets.
func Redact(raw string) string { return redact.URL(raw) }
