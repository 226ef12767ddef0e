// Package open opens a varve store from a URL. It imports all four backends,
// which the root package must not, so an application that uses one backend
// and no URL need not import it:
//
//	memory:                                  the in-memory backend
//	sqlite:///path/file.db, sqlite::memory:  the embedded SQLite backend
//	postgres://user@host/db?varve_schema=s   PostgreSQL (postgresql:// too)
//	nats://host:4222?stream=S&prefix=p       NATS JetStream
//
// Each backend's ParseURL says which parameters its URLs take; an unknown
// parameter or a malformed query is refused with [varve.ErrInvalidArgument].
// Errors never show a password, token or credential parameter of the URL.
//
// When the environment holds a master key ([MasterKeyEnv] or
// [MasterKeyFileEnv], with [PreviousMasterKeysEnv] during a rotation),
// [Store] and [Existing] give a store without a [varve.Config].Opener a
// [shred.Shredder] over the backend's keys: the store opens sealed events,
// and [Shredder] returns it for erasures.
package open

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/backend/nats"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/internal/redact"
	"github.com/varve-go/varve/shred"
)

// Schemes are the URL schemes [Backend] knows.
var Schemes = []string{"memory", "sqlite", "postgres", "postgresql", "nats"}

// Store opens the backend raw names and returns a store over it with cfg.
// Closing the store closes the backend.
func Store(ctx context.Context, raw string, cfg varve.Config) (*varve.Store, error) {
	b, err := Backend(ctx, raw)
	if err != nil {
		return nil, err
	}
	s, err := newStore(b, cfg)
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("open %s: %w", redact.URL(raw), err)
	}
	return s, nil
}

// Backend opens the backend raw names.
func Backend(ctx context.Context, raw string) (varve.Backend, error) {
	if err := parses(raw); err != nil {
		return nil, err
	}
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok {
		return nil, fmt.Errorf("open %s: want a URL such as memory: or sqlite:///path/file.db: %w", redact.URL(raw), varve.ErrInvalidArgument)
	}
	switch strings.ToLower(scheme) {
	case "memory":
		if rest != "" && rest != "//" {
			return nil, fmt.Errorf("open %s: the memory backend takes no host, path or parameters: %w", redact.URL(raw), varve.ErrInvalidArgument)
		}
		return memory.New(), nil
	case "sqlite":
		cfg, err := sqlite.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		return sqlite.New(ctx, cfg)
	case "nats":
		cfg, err := nats.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		return nats.New(ctx, cfg)
	case "postgres", "postgresql":
		cfg, err := postgres.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		return postgres.New(ctx, cfg)
	}
	return nil, fmt.Errorf("open %s: unknown scheme %q, want one of %s: %w",
		redact.URL(raw), scheme, strings.Join(Schemes, ", "), varve.ErrInvalidArgument)
}

// ErrNotFound is the error of [Existing] for a store that is not there: a
// missing SQLite file, PostgreSQL schema or NATS stream.
var ErrNotFound = errors.New("no such store")

// Existing opens the store raw names only if it is already there, and
// creates nothing: no SQLite file, no PostgreSQL schema (it does not
// migrate), no NATS stream. It is for tools that read or repair a store,
// such as `varve parked`. A missing store is [ErrNotFound]; the memory
// backend always opens empty.
func Existing(ctx context.Context, raw string, cfg varve.Config) (*varve.Store, error) {
	if err := parses(raw); err != nil {
		return nil, err
	}
	scheme, _, _ := strings.Cut(raw, ":")
	var b varve.Backend
	switch strings.ToLower(scheme) {
	case "sqlite":
		c, err := sqlite.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		if c.Path != sqlite.Memory {
			if _, err := os.Stat(c.Path); errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("open %s: file %s: %w", redact.URL(raw), c.Path, ErrNotFound)
			} else if err != nil {
				return nil, fmt.Errorf("open %s: %w", redact.URL(raw), err)
			}
		}
		if b, err = sqlite.New(ctx, c); err != nil {
			return nil, err
		}
	case "postgres", "postgresql":
		c, err := postgres.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		c.NoMigrate = true
		pb, err := postgres.New(ctx, c)
		if err != nil {
			return nil, err
		}
		schema := c.Schema
		if schema == "" {
			schema = postgres.DefaultSchema
		}
		var found bool
		err = pb.Pool().QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&found)
		if err == nil && !found {
			err = fmt.Errorf("open %s: schema %q: %w", redact.URL(raw), schema, ErrNotFound)
		}
		if err != nil {
			_ = pb.Close()
			return nil, err
		}
		b = pb
	case "nats":
		c, err := nats.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		if err := natsStreamExists(ctx, c); err != nil {
			return nil, fmt.Errorf("open %s: %w", redact.URL(raw), err)
		}
		if b, err = nats.New(ctx, c); err != nil {
			return nil, err
		}
	default:
		var err error
		if b, err = Backend(ctx, raw); err != nil {
			return nil, err
		}
	}
	s, err := newStore(b, cfg)
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("open %s: %w", redact.URL(raw), err)
	}
	return s, nil
}

// parses refuses a URL that does not parse before any backend's parser
// sees it: url.Parse's error holds the whole URL, password included, and
// url.Values drops a malformed query pair ("schema=x;drop") without a word,
// which would open the default in its place.
func parses(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("open %s: not a URL (a bad %%-escape or port?): %w", redact.URL(raw), varve.ErrInvalidArgument)
	}
	if _, err := url.ParseQuery(u.RawQuery); err != nil {
		return fmt.Errorf("open %s: malformed query string: %w", redact.URL(raw), varve.ErrInvalidArgument)
	}
	return nil
}

// natsStreamExists looks the backend's JetStream stream up on a connection
// of its own.
func natsStreamExists(ctx context.Context, c nats.Config) error {
	url, name := c.URL, c.Stream
	if url == "" {
		url = nats.DefaultURL
	}
	if name == "" {
		name = nats.DefaultStream
	}
	nc, err := natsgo.Connect(url, append([]natsgo.Option{natsgo.Name("varve-open")}, c.Options...)...)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := js.Stream(ctx, name); errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("stream %s: %w", name, ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("look up stream %s: %w", name, err)
	}
	return nil
}

// The environment variables of the master key: the key in shred's text
// form ("<id>:<32 bytes in hex or base64>"), or the path of a file that
// holds it (mode 0600), and the keys it replaces, comma-separated, while a
// rotation runs.
const (
	MasterKeyEnv          = "VARVE_MASTER_KEY"
	MasterKeyFileEnv      = "VARVE_MASTER_KEY_FILE"
	PreviousMasterKeysEnv = "VARVE_PREVIOUS_MASTER_KEYS"
)

// newStore returns a store over b with cfg, and with a Shredder from the
// environment's master key when cfg has no Opener.
func newStore(b varve.Backend, cfg varve.Config) (*varve.Store, error) {
	if cfg.Opener == nil {
		sh, err := shredderFromEnv(b)
		if err != nil {
			return nil, err
		}
		if sh != nil {
			cfg.Opener = sh
		}
	}
	return varve.New(b, cfg)
}

// shredderFromEnv returns a Shredder over b's keys with the environment's
// master key, or nil when the environment has none.
func shredderFromEnv(b varve.Backend) (*shred.Shredder, error) {
	var master shred.MasterKey
	var err error
	switch {
	case os.Getenv(MasterKeyEnv) != "":
		master, err = shred.MasterKeyFromEnv(MasterKeyEnv)
	case os.Getenv(MasterKeyFileEnv) != "":
		master, err = shred.MasterKeyFromFile(os.Getenv(MasterKeyFileEnv))
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var previous []shred.MasterKey
	for _, text := range strings.Split(os.Getenv(PreviousMasterKeysEnv), ",") {
		if strings.TrimSpace(text) == "" {
			continue
		}
		m, err := shred.ParseMasterKey(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", PreviousMasterKeysEnv, err)
		}
		previous = append(previous, m)
	}
	return shred.New(b, shred.Config{Master: master, Previous: previous})
}

// Shredder returns the Shredder that opens s's sealed events, or an error
// wrapping varve.ErrNotSupported that says how to give one.
func Shredder(s *varve.Store) (*shred.Shredder, error) {
	if sh, ok := s.Config().Opener.(*shred.Shredder); ok {
		return sh, nil
	}
	return nil, fmt.Errorf("the store has no master key: set %s (or %s) to the key's text form, %q: %w",
		MasterKeyEnv, MasterKeyFileEnv, "<id>:<32 bytes in hex or base64>", varve.ErrNotSupported)
}
