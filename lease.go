package varve

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrLeaseHeld: another holder holds the lease. The error is a
// [*LeaseHeldError].
var ErrLeaseHeld = errors.New("lease held by another holder")

// ErrLeaseLost: a newer holder took the lease since the token was handed
// out; what the call would have written was not written.
var ErrLeaseLost = errors.New("lease lost to a newer holder")

// Lease is a named, time-limited right of one holder, such as being the
// one active consumer of a subscription. Its Token grows with every new
// holder and with every new term of the same holder after the lease
// expired, so a write fenced by a token is refused once anyone else may
// have taken over.
type Lease struct {
	Name    string
	Holder  string
	Token   uint64
	Expires time.Time
}

// LeaseHeldError says who holds a lease and until when.
type LeaseHeldError struct {
	Holder  string
	Expires time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("lease held by %q until %s", e.Holder, e.Expires.Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// LeaseStore is the capability of a backend to keep leases with fencing
// tokens, and checkpoints fenced by them. Expiry is judged by the
// backend's clock (the server's, on a server), so that processes with
// skewed clocks agree.
type LeaseStore interface {
	// AcquireLease gives the lease to holder for ttl when it is free,
	// expired, or held by holder already (a renewal, which keeps the
	// token while the lease has not expired). A lease held by another
	// holder gives a [*LeaseHeldError].
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)
	// ReleaseLease ends the lease if holder holds it with token, so that
	// another holder can take it at once; otherwise it does nothing.
	ReleaseLease(ctx context.Context, name, holder string, token uint64) error
	// SaveCheckpointFenced saves pos under name unless the lease has a
	// token newer than token, which gives ErrLeaseLost and saves nothing.
	// The fence is atomic with AcquireLease: a save that starts after an
	// AcquireLease that handed out a newer token returned is refused, and a
	// save in flight during that AcquireLease lands before it returns (so
	// the new holder's next load sees it) or not at all.
	SaveCheckpointFenced(ctx context.Context, name string, pos Position, lease string, token uint64) error
	// ListLeases returns the leases whose names begin with prefix and
	// that are held and not expired, in name order.
	ListLeases(ctx context.Context, prefix string) ([]Lease, error)
}

// Leases is a store's lease capability. Every method fails with
// [ErrNotSupported] when the backend keeps no leases.
type Leases struct {
	s *Store
	b LeaseStore
}

// Leases returns the store's lease capability.
func (s *Store) Leases() Leases { return Leases{s, s.leases} }

// MinLeaseTTL and MaxLeaseTTL bound the time-to-live of a lease.
const (
	MinLeaseTTL = 100 * time.Millisecond
	MaxLeaseTTL = 24 * time.Hour
)

func (l Leases) check(ctx context.Context, name, holder string) error {
	if err := l.s.ready(ctx); err != nil {
		return err
	}
	if l.b == nil {
		return ErrNotSupported
	}
	if err := CheckName(name); err != nil {
		return err
	}
	return CheckName(holder)
}

// Acquire takes or renews lease name for holder for ttl.
func (l Leases) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error) {
	err := l.check(ctx, name, holder)
	if err == nil && (ttl < MinLeaseTTL || ttl > MaxLeaseTTL) {
		err = invalid("lease ttl %s: must be %s..%s", ttl, MinLeaseTTL, MaxLeaseTTL)
	}
	var lease Lease
	if err == nil {
		lease, err = l.b.AcquireLease(ctx, name, holder, ttl)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("varve: acquire lease %q for %q: %w", name, holder, err)
	}
	return lease, nil
}

// Release ends lease if its holder still holds it.
func (l Leases) Release(ctx context.Context, lease Lease) error {
	err := l.check(ctx, lease.Name, lease.Holder)
	if err == nil {
		err = l.b.ReleaseLease(ctx, lease.Name, lease.Holder, lease.Token)
	}
	if err != nil {
		return fmt.Errorf("varve: release lease %q of %q: %w", lease.Name, lease.Holder, err)
	}
	return nil
}

// List returns the live leases (held and not expired) whose names begin
// with prefix, in name order: who holds what, for a status, or the
// members of a group that each hold a lease of their own.
func (l Leases) List(ctx context.Context, prefix string) ([]Lease, error) {
	err := l.s.ready(ctx)
	if err == nil && l.b == nil {
		err = ErrNotSupported
	}
	if err == nil && len(prefix) > MaxNameLen {
		err = invalid("lease prefix of %d bytes: the limit is %d", len(prefix), MaxNameLen)
	}
	if err == nil {
		err = checkText("lease prefix", prefix)
	}
	var leases []Lease
	if err == nil {
		leases, err = l.b.ListLeases(ctx, prefix)
	}
	if err != nil {
		return nil, fmt.Errorf("varve: list leases %q: %w", prefix, err)
	}
	return leases, nil
}

// SaveCheckpoint saves pos under name, fenced by lease: refused with
// [ErrLeaseLost] once a newer holder took the lease.
func (l Leases) SaveCheckpoint(ctx context.Context, name string, pos Position, lease Lease) error {
	err := l.check(ctx, lease.Name, lease.Holder)
	if err == nil {
		err = CheckName(name)
	}
	if err == nil {
		err = l.b.SaveCheckpointFenced(ctx, name, pos, lease.Name, lease.Token)
	}
	if err != nil {
		return fmt.Errorf("varve: save checkpoint %q fenced by lease %q: %w", name, lease.Name, err)
	}
	return nil
}
