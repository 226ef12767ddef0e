package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/workload"
)

// errNoBaseline: the lab has no raw baseline for the store's scheme.
var errNoBaseline = errors.New("no raw baseline for this scheme")

// baseline is the raw floor a store is measured against: the cheapest
// durable (or, for memory, locked) write of one event that the store's
// medium allows, with no event-store logic on top.
type baseline struct {
	name    string // "mutex+slice"
	about   string
	version string // of the server or engine, when known
	newOp   func(worker int) workload.Op
	close   func(ctx context.Context) error
	workers int // 0 is 1
}

// openBaseline opens the baseline of the store that raw names. The op of
// every baseline writes one event of workload.Payload with a fresh id.
func openBaseline(ctx context.Context, raw string) (*baseline, error) {
	scheme, _, _ := strings.Cut(raw, ":")
	switch scheme {
	case "memory", "mem":
		return memoryBaseline(), nil
	case "sqlite", "sqlite3":
		return sqliteBaseline(ctx, raw)
	case "postgres", "postgresql":
		return postgresBaseline(ctx, raw)
	case "nats":
		return natsBaseline(ctx, raw)
	}
	return nil, fmt.Errorf("%s: %w", scheme, errNoBaseline)
}

// openConcurrentBaseline opens the store's baseline for workloads of
// several writers, or returns nil if its scheme has none.
func openConcurrentBaseline(ctx context.Context, raw string) (*baseline, error) {
	scheme, _, _ := strings.Cut(raw, ":")
	switch scheme {
	case "postgres", "postgresql":
		return postgresConcurrentBaseline(ctx, raw, 8)
	}
	return nil, nil
}

func memoryBaseline() *baseline {
	type rec struct {
		id   uuid.UUID
		typ  string
		data []byte
	}
	var mu sync.Mutex
	var log []rec
	return &baseline{
		name:  "mutex+slice",
		about: "append {id, type, copy of the payload} to a slice under a mutex",
		newOp: func(int) workload.Op {
			return func(context.Context) (int, error) {
				r := rec{id: varve.NewEventID(), typ: "OrderPlaced", data: append([]byte(nil), workload.Payload...)}
				mu.Lock()
				log = append(log, r)
				mu.Unlock()
				return 1, nil
			}
		},
		close: func(context.Context) error {
			mu.Lock()
			log = nil
			mu.Unlock()
			return nil
		},
	}
}

// throwawayName returns a name for a baseline's own table or stream.
func throwawayName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
