package lab

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/backend/postgres"
)

// Open opens the store a URL names: "memory:" for the in-memory backend;
// the other schemes are those of the backend packages.
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
	case "postgres", "postgresql":
		cfg, err := postgres.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		return postgres.New(ctx, cfg)
	}
	return nil, fmt.Errorf("lab: store %q: unknown scheme %q: %w", Redact(raw), scheme, varve.ErrInvalidArgument)
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
