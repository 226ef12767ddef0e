package varve

import (
	"context"
	"fmt"
)

// MaxPositionNumber is the largest position number, 2^53-1: the largest
// integer that a JSON number carries exactly to a JavaScript client
// (Number.MAX_SAFE_INTEGER).
const MaxPositionNumber = 1<<53 - 1

// PositionNumbers is the capability of a backend to name each event of its
// log by one integer of at most 53 bits, increasing in $all's order, for
// interfaces that carry positions as JSON numbers (package server's DCB
// interface). Callers use it through [Store.NumberPositions] and
// [Store.PositionOfNumber].
//
// Numbers are non-decreasing in position order for any positions, and
// strictly increasing for the positions of events in the log. The number of
// an event never decreases: removing events (Delete, Truncate) may raise the
// numbers of other events of the same commit, so that a number kept from an
// earlier read names its event or one before it, and a reader that goes on
// after it may read again, never skip.
type PositionNumbers interface {
	// NumberPositions returns the numbers of ps, one for one: 0 for Start,
	// 1..MaxPositionNumber for the position of an event. A position that
	// the backend's scheme cannot number fails with ErrInvalidArgument.
	NumberPositions(ctx context.Context, ps []Position) ([]uint64, error)
	// PositionOfNumber returns the position p such that the events after p
	// are exactly those whose number is greater than n, for any n up to
	// MaxPositionNumber (Start for 0).
	PositionOfNumber(ctx context.Context, n uint64) (Position, error)
}

// NumberPositions returns the numbers of the positions ps, one for one (see
// [PositionNumbers]). Backends without the capability give ErrNotSupported.
func (s *Store) NumberPositions(ctx context.Context, ps []Position) ([]uint64, error) {
	b, err := s.numbers(ctx)
	var out []uint64
	if err == nil {
		rctx, stop := s.readContext(ctx)
		out, err = b.NumberPositions(rctx, ps)
		err = readErr(rctx, err)
		stop()
	}
	if err == nil && len(out) != len(ps) {
		err = fmt.Errorf("the backend numbered %d positions of %d", len(out), len(ps))
	}
	if err != nil {
		return nil, fmt.Errorf("varve: number positions: %w", err)
	}
	return out, nil
}

// PositionOfNumber returns the position after which come exactly the events
// whose number is greater than n (see [PositionNumbers]). An n over
// [MaxPositionNumber] is ErrInvalidArgument; backends without the
// capability give ErrNotSupported.
func (s *Store) PositionOfNumber(ctx context.Context, n uint64) (Position, error) {
	b, err := s.numbers(ctx)
	if err == nil && n > MaxPositionNumber {
		err = invalid("position number %d over %d", n, uint64(MaxPositionNumber))
	}
	var p Position
	if err == nil {
		rctx, stop := s.readContext(ctx)
		p, err = b.PositionOfNumber(rctx, n)
		err = readErr(rctx, err)
		stop()
	}
	if err != nil {
		return Position{}, fmt.Errorf("varve: position of number %d: %w", n, err)
	}
	return p, nil
}

func (s *Store) numbers(ctx context.Context) (PositionNumbers, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	b := capability[PositionNumbers](s.b)
	if b == nil {
		return nil, ErrNotSupported
	}
	return b, nil
}
