package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

// SourceConfig configures a [Source].
type SourceConfig struct {
	// Name names the source for the dispatcher: the Subscription of its
	// deliveries and the first part of their idempotency keys (default:
	// the slot's name).
	Name string
	// Layout, Namespace and Stream choose each change's ordering key (the
	// Stream of its event) and seed its event id, as for [AppendToStore]:
	// table and replica identity key by default (PerRow).
	Layout    Layout
	Namespace string
	Stream    func(Change) (string, error)
}

// Source hands the transactions of a [Stream] to a dispatcher
// (delivery.NewFromSource) without storing them: it implements
// delivery.Source. Each change becomes a varve.RecordedEvent: Stream is its
// ordering key, Position {Commit: commit LSN, Seq: index in the
// transaction + 1}, Type and Data those of the event AppendToStore appends
// (the change's Op and its [ChangeEvent] JSON), ID the same [EventID], and
// RecordedAt the commit time. Version is 0: a key is not a stream of a
// store.
//
// SaveCheckpoint(pos) acknowledges to the stream, in order, the
// transactions whose every change is at or before pos, so the slot's
// confirmed flush LSN moves only past whole transactions that were
// delivered or parked: after a crash the slot re-sends at most the
// transactions that were in flight. The source keeps no store, so the
// dispatcher needs a delivery.Config.Parked of its own, which keeps the
// events it parks.
//
// Next and SaveCheckpoint may run on different goroutines, as the
// dispatcher calls them.
type Source struct {
	stream *Stream
	cfg    StoreConfig
	name   string
	start  varve.Position

	mu      sync.Mutex
	pending []*Transaction // handed to the dispatcher, not acknowledged, in order
}

// NewSource returns a source over s, which it reads from now on: nothing
// else should call s.Next or s.Ack.
func NewSource(s *Stream, cfg SourceConfig) (*Source, error) {
	if s == nil {
		return nil, fmt.Errorf("pgcdc: new source: %w: nil stream", varve.ErrInvalidArgument)
	}
	if cfg.Name == "" {
		cfg.Name = s.cfg.Slot
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "pgcdc"
	}
	if cfg.Layout > PerTable {
		return nil, fmt.Errorf("pgcdc: new source: %w: layout %d", varve.ErrInvalidArgument, cfg.Layout)
	}
	// The stream starts after its confirmed flush LSN, and every
	// transaction it sends commits at or after it.
	return &Source{stream: s, name: cfg.Name, start: varve.Position{Commit: uint64(s.Flushed())},
		cfg: StoreConfig{Layout: cfg.Layout, Namespace: cfg.Namespace, Stream: cfg.Stream}}, nil
}

// Name returns the source's name.
func (s *Source) Name() string { return s.name }

// Position returns the position before the first change the source hands
// over: the stream's confirmed flush LSN when the source was made.
func (s *Source) Position() varve.Position { return s.start }

// Next returns the changes of the stream's next transaction as events;
// Through is the position of the last one ({commit LSN, 0} for a
// transaction without changes). When the stream has failed for good or
// was closed the error wraps varve.ErrClosed.
func (s *Source) Next(ctx context.Context) (subscription.Batch, error) {
	tx, err := s.stream.Next(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return subscription.Batch{}, err
		}
		return subscription.Batch{}, fmt.Errorf("pgcdc: source %q: %w: %w", s.name, varve.ErrClosed, err)
	}
	b, err := s.batch(tx)
	if err != nil {
		// A change whose key or JSON cannot be made would be skipped by
		// every later run too: stop instead.
		return subscription.Batch{}, fmt.Errorf("pgcdc: source %q: %w: %w", s.name, varve.ErrClosed, err)
	}
	s.mu.Lock()
	s.pending = append(s.pending, tx)
	s.mu.Unlock()
	return b, nil
}

func (s *Source) batch(tx *Transaction) (subscription.Batch, error) {
	ns := namespaceID(s.cfg.Namespace)
	b := subscription.Batch{Events: make([]varve.RecordedEvent, len(tx.Changes)), Through: varve.Position{Commit: uint64(tx.CommitLSN)}}
	for i, c := range tx.Changes {
		key, err := s.cfg.streamOf(c)
		if err != nil {
			return b, err
		}
		data, err := json.Marshal(changeEvent(tx, c))
		if err != nil {
			return b, fmt.Errorf("pgcdc: encode %s on %s.%s at %s: %w", c.Op, c.Schema, c.Table, c.LSN, err)
		}
		pos := varve.Position{Commit: uint64(tx.CommitLSN), Seq: uint64(i + 1)}
		b.Events[i] = varve.RecordedEvent{ID: eventID(ns, tx.CommitLSN, i), Type: c.Op.String(), Data: data,
			Stream: key, Position: pos, RecordedAt: tx.CommitTime}
		b.Through = pos
	}
	return b, nil
}

// complete reports whether every change of tx is at or before pos.
func complete(tx *Transaction, pos varve.Position) bool {
	return !pos.Less(varve.Position{Commit: uint64(tx.CommitLSN), Seq: uint64(len(tx.Changes))})
}

// SaveCheckpoint acknowledges the transactions handed over whose every
// change is at or before pos. The stream confirms them to the slot at its
// next status update (Config.StatusInterval).
func (s *Source) SaveCheckpoint(_ context.Context, pos varve.Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	var errs []error
	for n < len(s.pending) && complete(s.pending[n], pos) {
		if err := s.stream.Ack(s.pending[n]); err != nil {
			errs = append(errs, err)
		}
		n++
	}
	s.pending = s.pending[n:]
	return errors.Join(errs...)
}

// Flushed returns the end of the acknowledged prefix of the stream (see
// [Stream.Flushed]).
func (s *Source) Flushed() LSN { return s.stream.Flushed() }
