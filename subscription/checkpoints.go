package subscription

import (
	"context"
	"strings"
	"sync"

	"github.com/varve-go/varve"
)

// MemoryCheckpoints is a [varve.CheckpointStore] in process memory: nothing
// survives a restart. It is what a subscription uses on a backend without
// checkpoints when no store is configured.
type MemoryCheckpoints struct {
	mu  sync.Mutex
	pos map[string]varve.Position
}

// NewMemoryCheckpoints returns an empty MemoryCheckpoints.
func NewMemoryCheckpoints() *MemoryCheckpoints {
	return &MemoryCheckpoints{pos: map[string]varve.Position{}}
}

// SaveCheckpoint implements varve.CheckpointStore.
func (m *MemoryCheckpoints) SaveCheckpoint(ctx context.Context, name string, pos varve.Position) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	m.pos[strings.Clone(name)] = pos
	m.mu.Unlock()
	return nil
}

// LoadCheckpoint implements varve.CheckpointStore.
func (m *MemoryCheckpoints) LoadCheckpoint(ctx context.Context, name string) (varve.Position, bool, error) {
	if err := ctx.Err(); err != nil {
		return varve.Position{}, false, err
	}
	m.mu.Lock()
	p, ok := m.pos[name]
	m.mu.Unlock()
	return p, ok, nil
}

// storeCheckpoints is a store's checkpoint capability as a
// [varve.CheckpointStore].
type storeCheckpoints struct{ c varve.Checkpoints }

func (s storeCheckpoints) SaveCheckpoint(ctx context.Context, name string, pos varve.Position) error {
	return s.c.Save(ctx, name, pos)
}

func (s storeCheckpoints) LoadCheckpoint(ctx context.Context, name string) (varve.Position, bool, error) {
	return s.c.Load(ctx, name)
}
