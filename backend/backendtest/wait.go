package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// testWaitFor: Store.WaitFor returns once the log is readable through a
// position (at once when it already is), is woken by a later append, and
// ends with the context's error or ErrClosed.
func testWaitFor(t *testing.T, f Factory) {
	s := store(t, f)
	pfx := prefix(t)
	ctx := ctxFor(t)
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, varve.Start); err != nil {
		t.Fatalf("wait for the start: %v", err)
	}
	res := mustAppend(t, s, pfx+"w", varve.NoStream, events("E", 2)...)
	if err := s.WaitFor(ctx, res.Position); err != nil {
		t.Fatalf("wait for an append's position: %v", err)
	}
	if last, err := s.LastPosition(ctx); err != nil || last.Less(res.Position) {
		t.Fatalf("after the wait the log is through %s (%v), want %s", last, err, res.Position)
	}
	// A filtered view through the position holds the append (read again
	// while PostgreSQL's horizon moves back, as the contract says).
	filter := varve.Filter{StreamPrefixes: []string{pfx + "w"}}
	for try := 0; ; try++ {
		page, err := s.ReadAllPage(ctx, start, nil, filter)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) == 2 && page.Events[1].Position == res.Position {
			break
		}
		if try == 100 {
			t.Fatalf("the filtered view after the wait: %d events through %s, want 2 through %s", len(page.Events), page.Through, res.Position)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Just after the log's last position: the next append, of anyone,
	// wakes the wait.
	last, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := varve.Position{Commit: last.Commit, Seq: last.Seq + 1}
	done := make(chan error, 1)
	go func() { done <- s.WaitFor(ctx, next) }()
	later := mustAppend(t, s, pfx+"w", varve.Exact(2), events("E", 1)...)
	if err := <-done; err != nil {
		t.Fatalf("wait for %s, woken by an append at %s: %v", next, later.Position, err)
	}

	far := varve.Position{Commit: last.Commit + 1<<40, Seq: 1}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := s.WaitFor(short, far); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait for %s with a deadline: %v, want context.DeadlineExceeded", far, err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.WaitFor(gone, far); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled context: %v, want context.Canceled", err)
	}
	closing := store(t, f)
	go func() { done <- closing.WaitFor(ctx, far) }()
	if err := closing.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, varve.ErrClosed) {
		t.Fatalf("wait on a store that closes: %v, want ErrClosed", err)
	}
}
