package lab

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	varvenats "github.com/varve-go/varve/backend/nats"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/backend/sqlite"
)

// Open opens the store a URL names: "memory:" for the in-memory backend,
// "sqlite:///path/file.db" (or "sqlite::memory:"), "postgres://..." and
// "nats://..." for the backend packages of those names.
func Open(ctx context.Context, raw string) (*varve.Store, error) {
	b, err := OpenBackend(ctx, raw)
	if err != nil {
		return nil, err
	}
	return varve.New(b, varve.Config{})
}

// OpenBackend opens the backend a URL names.
func OpenBackend(ctx context.Context, raw string) (varve.Backend, error) {
	scheme, _, ok := strings.Cut(raw, ":")
	if !ok {
		return nil, fmt.Errorf("lab: store %q: want a URL such as memory: or sqlite:///path/file.db: %w", Redact(raw), varve.ErrInvalidArgument)
	}
	switch scheme {
	case "memory", "mem":
		return memory.New(), nil
	case "sqlite":
		cfg, err := sqlite.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		return sqlite.New(ctx, cfg)
	case "nats":
		cfg, err := varvenats.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		return varvenats.New(ctx, cfg)
	case "postgres", "postgresql":
		cfg, err := postgres.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		return postgres.New(ctx, cfg)
	}
	return nil, fmt.Errorf("lab: store %q: unknown scheme %q: %w", Redact(raw), scheme, varve.ErrInvalidArgument)
}

// ExpandTemp replaces "{tmp}" in store URLs with a new temporary directory,
// made only when a URL asks for it; remove deletes it.
func ExpandTemp(urls ...string) (expanded []string, remove func(), err error) {
	var tmp string
	remove = func() {
		if tmp != "" {
			_ = os.RemoveAll(tmp)
		}
	}
	expanded = make([]string, len(urls))
	for i, u := range urls {
		if strings.Contains(u, "{tmp}") && tmp == "" {
			if tmp, err = os.MkdirTemp("", "varve-*"); err != nil {
				return nil, remove, fmt.Errorf("lab: temporary directory: %w", err)
			}
		}
		expanded[i] = strings.ReplaceAll(u, "{tmp}", filepath.ToSlash(tmp))
	}
	return expanded, remove, nil
}

// Redact returns a store URL fit for printing: without its password.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
