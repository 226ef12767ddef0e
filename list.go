package varve

import (
	"context"
	"fmt"
	"strings"
)

// ListQuery asks a backend for one page of names: those that begin with
// Prefix and sort after After, in byte order (Go's string order), at most
// Limit of them.
type ListQuery struct {
	Prefix string
	After  string
	Limit  int
}

// StreamLister is the capability of a backend to enumerate its streams, for
// operators' tools (the server's stream list, `varve streams ls`). Callers
// use it through [Store.Streams].
type StreamLister interface {
	// ListStreams appends to buf the streams of q in byte order of their
	// ids: every stream that has ever been written and not forgotten,
	// deleted and tombstoned ones with their flags set, system streams
	// included. Fewer than q.Limit streams means there are no more.
	ListStreams(ctx context.Context, q ListQuery, buf []StreamInfo) ([]StreamInfo, error)
}

// MaxListLimit bounds the names one list call returns.
const MaxListLimit = 10_000

// StreamPage is one page of a stream list.
type StreamPage struct {
	Streams []StreamInfo
	// Next is the After of the following page; empty when this page is the
	// last.
	Next string
}

// Streams is a store's stream listing capability. Every method fails with
// [ErrNotSupported] when the backend cannot enumerate its streams.
type Streams struct {
	s *Store
	b StreamLister
}

// Streams returns the store's stream listing capability.
func (s *Store) Streams() Streams {
	return Streams{s, capability[StreamLister](s.b)}
}

// List returns a page of the streams whose ids begin with q.Prefix and sort
// after q.After, in byte order; q.Limit 0 means the store's page size.
// System streams (ids beginning with [SystemPrefix]) are left out unless
// system is set or the prefix itself begins with it.
func (n Streams) List(ctx context.Context, q ListQuery, system bool) (StreamPage, error) {
	q, err := n.s.checkList(ctx, n.b != nil, q)
	if err != nil {
		return StreamPage{}, fmt.Errorf("varve: list streams: %w", err)
	}
	system = system || strings.HasPrefix(q.Prefix, SystemPrefix)
	var page StreamPage
	want := q.Limit
	for {
		q.Limit = want - len(page.Streams)
		got, err := n.b.ListStreams(ctx, q, nil)
		if err != nil {
			return StreamPage{}, fmt.Errorf("varve: list streams: %w", n.s.closedOr(err))
		}
		for _, info := range got {
			if system || !isSystem(info.Stream) {
				page.Streams = append(page.Streams, info)
			}
		}
		if len(got) < q.Limit {
			return page, nil
		}
		q.After = got[len(got)-1].Stream
		if len(page.Streams) == want {
			page.Next = q.After
			return page, nil
		}
	}
}

func (s *Store) checkList(ctx context.Context, supported bool, q ListQuery) (ListQuery, error) {
	if err := s.ready(ctx); err != nil {
		return q, err
	}
	if !supported {
		return q, ErrNotSupported
	}
	if len(q.Prefix) > MaxStreamIDLen || len(q.After) > MaxStreamIDLen {
		return q, invalid("prefix and after must be at most %d bytes", MaxStreamIDLen)
	}
	if err := checkText("prefix", q.Prefix); err != nil {
		return q, err
	}
	if err := checkText("after", q.After); err != nil {
		return q, err
	}
	switch {
	case q.Limit < 0 || q.Limit > MaxListLimit:
		return q, invalid("limit %d: want 0..%d", q.Limit, MaxListLimit)
	case q.Limit == 0:
		q.Limit = s.cfg.PageSize
	}
	return q, nil
}

// closedOr is ErrClosed when the store was closed under a call, err otherwise.
func (s *Store) closedOr(err error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return err
}
