package backendtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

// goal is the position the Churn readers read up to: the last acknowledged
// append of a kept stream, known once the writers are done.
type goal struct {
	set     chan struct{} // closed once through is set
	through varve.Position
}

func (g *goal) reached(pos varve.Position) bool {
	select {
	case <-g.set:
		return !pos.Less(g.through)
	default:
		return false
	}
}

// churnReader is one reader of the Churn behaviour and what it saw. Its
// fields belong to its goroutine until done is closed.
type churnReader struct {
	name string
	read func(ctx context.Context, r *churnReader) error

	done     chan struct{}
	finished bool // read returned, rather than its goroutine exiting early
	reached  bool
	at       time.Time // when it reached the goal
	err      error
	pos      varve.Position
	seen     []seenEvent
	pages    int
	reopens  int
}

func (r *churnReader) start(ctx context.Context, from varve.Position) {
	r.pos, r.done = from, make(chan struct{})
	go func() {
		defer close(r.done)
		r.err = r.read(ctx, r)
		r.finished = true
	}()
}

// take checks that e follows what the reader read before and keeps it when
// it is an event of the test's streams.
func (r *churnReader) take(pfx string, e *varve.RecordedEvent) error {
	if !r.pos.Less(e.Position) {
		return fmt.Errorf("position %s (%s@%d) read after %s", e.Position, e.Stream, e.Version, r.pos)
	}
	r.pos = e.Position
	if strings.HasPrefix(e.Stream, pfx) {
		r.seen = append(r.seen, seenEvent{id: e.ID, stream: e.Stream, version: e.Version, pos: e.Position})
	}
	return nil
}

// page takes a page that was read after r.pos.
func (r *churnReader) page(pfx string, page varve.AllPage) error {
	from := r.pos
	for i := range page.Events {
		if err := r.take(pfx, &page.Events[i]); err != nil {
			return err
		}
	}
	if page.Through != r.pos {
		return fmt.Errorf("page of %d events after %s goes through %s, its last event is at %s", len(page.Events), from, page.Through, r.pos)
	}
	if len(page.Events) > 0 {
		r.pages++
	}
	return nil
}

// check records when the reader reached the goal and says whether it did.
func (r *churnReader) check(g *goal) bool {
	if !r.reached && g.reached(r.pos) {
		r.reached, r.at = true, time.Now()
	}
	return r.reached
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

const churnPoll = 5 * time.Millisecond

// readTiny reads $all a page of 1 to 7 events at a time.
func readTiny(ctx context.Context, s *varve.Store, pfx string, g *goal, r *churnReader) error {
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var buf []varve.RecordedEvent
	for !r.check(g) {
		page, err := s.ReadAllPage(ctx, r.pos, buf[:0], varve.Limit(1+rng.IntN(7)))
		if err != nil {
			return err
		}
		buf = page.Events
		if err := r.page(pfx, page); err != nil {
			return err
		}
		if len(page.Events) == 0 {
			if err := pause(ctx, churnPoll); err != nil {
				return err
			}
		}
	}
	return nil
}

// readFilteredPages reads $all in pages of 1 to 7 events filtered on the
// test's stream prefix, which holds the category separator, so that
// backends serve it from their category index and check the prefix on
// each event. A page goes through its last event, or further when it is
// short; the reader resumes after that.
func readFilteredPages(ctx context.Context, s *varve.Store, pfx string, g *goal, r *churnReader) error {
	rng := rand.New(rand.NewPCG(3, uint64(time.Now().UnixNano())))
	f := varve.Filter{StreamPrefixes: []string{pfx}}
	var buf []varve.RecordedEvent
	for !r.check(g) {
		n := 1 + rng.IntN(7)
		from := r.pos
		page, err := s.ReadAllPage(ctx, r.pos, buf[:0], varve.Limit(n), f)
		if err != nil {
			return err
		}
		buf = page.Events
		for i := range page.Events {
			if e := &page.Events[i]; !strings.HasPrefix(e.Stream, pfx) {
				return fmt.Errorf("filtered page after %s holds %s@%d, which does not match", from, e.Stream, e.Version)
			}
			if err := r.take(pfx, &page.Events[i]); err != nil {
				return err
			}
		}
		switch {
		case page.Through.Less(r.pos):
			return fmt.Errorf("page of %d events after %s goes through %s, before its last event at %s", len(page.Events), from, page.Through, r.pos)
		case page.Full && page.Through != r.pos:
			return fmt.Errorf("full page of %d events after %s goes through %s, its last event is at %s", len(page.Events), from, page.Through, r.pos)
		}
		r.pos = page.Through
		if len(page.Events) > 0 {
			r.pages++
		}
		if !page.Full {
			if err := pause(ctx, churnPoll); err != nil {
				return err
			}
		}
	}
	return nil
}

// readReopening reads $all in pages of 1 to 50 events and every 20 pages
// closes its store, opens a new one and resumes from the text form of its
// position, as a process that restarts from a saved checkpoint does.
func readReopening(ctx context.Context, open func() (*varve.Store, error), pfx string, g *goal, r *churnReader) error {
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	s, err := open()
	if err != nil {
		return err
	}
	defer func() {
		if s != nil {
			_ = s.Close()
		}
	}()
	var buf []varve.RecordedEvent
	for !r.check(g) {
		page, err := s.ReadAllPage(ctx, r.pos, buf[:0], varve.Limit(1+rng.IntN(50)))
		if err != nil {
			return err
		}
		buf = page.Events
		if err := r.page(pfx, page); err != nil {
			return err
		}
		if len(page.Events) == 0 {
			if err := pause(ctx, churnPoll); err != nil {
				return err
			}
			continue
		}
		if r.pages%churnReopenEvery != 0 {
			continue
		}
		text := r.pos.String()
		if err := s.Close(); err != nil {
			return fmt.Errorf("close before reopening: %w", err)
		}
		next, err := open()
		if err != nil {
			s = nil
			return fmt.Errorf("reopen: %w", err)
		}
		s = next
		pos, err := varve.ParsePosition(text)
		if err != nil || pos != r.pos {
			return fmt.Errorf("position %s saved as %q parses as %s (%v)", r.pos, text, pos, err)
		}
		r.pos = pos
		r.reopens++
	}
	return nil
}

// readLive follows $all through package subscription, which waits on
// Store.Watch (or polls) when it is caught up.
func readLive(ctx context.Context, s *varve.Store, pfx string, g *goal, r *churnReader) error {
	sub, err := subscription.Open(ctx, s, subscription.Config{
		Name:        pfx + "live",
		Start:       subscription.FromPosition,
		Position:    r.pos,
		Checkpoints: subscription.NewMemoryCheckpoints(),
		MaxPoll:     100 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	// Next waits for events; until the goal is known, it also stops waiting
	// when the goal becomes known, which may be already reached.
	before, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-g.set:
			cancel()
		case <-before.Done():
		}
	}()
	for !r.check(g) {
		nctx := before
		if before.Err() != nil {
			nctx = ctx
		}
		b, err := sub.Next(nctx)
		if err != nil {
			if nctx == before && ctx.Err() == nil {
				continue
			}
			return err
		}
		for i := range b.Events {
			if err := r.take(pfx, &b.Events[i]); err != nil {
				return err
			}
		}
		// Through also moves over the system streams' events it filtered.
		if b.Through.Less(r.pos) {
			return fmt.Errorf("batch goes through %s, before its last event at %s", b.Through, r.pos)
		}
		r.pos = b.Through
		r.pages++
	}
	return nil
}

// readFresh reads the whole run with one ReadAll once the writers are done,
// and again from where it stopped until it reaches the goal.
func readFresh(ctx context.Context, s *varve.Store, pfx string, g *goal, r *churnReader) error {
	for !r.check(g) {
		for e, err := range s.ReadAll(ctx, r.pos) {
			if err != nil {
				return err
			}
			if err := r.take(pfx, &e); err != nil {
				return err
			}
		}
		r.pages++
		if !r.check(g) {
			if err := pause(ctx, churnPoll); err != nil {
				return err
			}
		}
	}
	return nil
}
