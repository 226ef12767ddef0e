package memory

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/varve-go/varve"
)

type lease struct {
	holder  string
	token   uint64
	expires time.Time
}

// AcquireLease implements varve.LeaseStore.
func (b *Backend) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (varve.Lease, error) {
	if err := b.check(ctx); err != nil {
		return varve.Lease{}, err
	}
	b.kvMu.Lock()
	defer b.kvMu.Unlock()
	if b.leases == nil {
		b.leases = map[string]lease{}
	}
	now := time.Now()
	l := b.leases[name]
	switch {
	case l.holder == holder && now.Before(l.expires):
	case l.holder == "" || !now.Before(l.expires):
		l.token++
		l.holder = strings.Clone(holder)
	default:
		return varve.Lease{}, &varve.LeaseHeldError{Holder: l.holder, Expires: l.expires}
	}
	l.expires = now.Add(ttl)
	b.leases[strings.Clone(name)] = l
	return varve.Lease{Name: name, Holder: holder, Token: l.token, Expires: l.expires}, nil
}

// ReleaseLease implements varve.LeaseStore.
func (b *Backend) ReleaseLease(ctx context.Context, name, holder string, token uint64) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	b.kvMu.Lock()
	defer b.kvMu.Unlock()
	if l, ok := b.leases[name]; ok && l.holder == holder && l.token == token {
		l.holder, l.expires = "", time.Time{}
		b.leases[name] = l
	}
	return nil
}

// SaveCheckpointFenced implements varve.LeaseStore.
func (b *Backend) SaveCheckpointFenced(ctx context.Context, name string, pos varve.Position, lease string, token uint64) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	b.kvMu.Lock()
	defer b.kvMu.Unlock()
	if b.leases[lease].token > token {
		return varve.ErrLeaseLost
	}
	b.checkpoints[strings.Clone(name)] = pos
	return nil
}

// ListLeases implements varve.LeaseStore.
func (b *Backend) ListLeases(ctx context.Context, prefix string) ([]varve.Lease, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	b.kvMu.Lock()
	defer b.kvMu.Unlock()
	now := time.Now()
	var out []varve.Lease
	for name, l := range b.leases {
		if l.holder != "" && now.Before(l.expires) && strings.HasPrefix(name, prefix) {
			out = append(out, varve.Lease{Name: name, Holder: l.holder, Token: l.token, Expires: l.expires})
		}
	}
	slices.SortFunc(out, func(a, b varve.Lease) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
