package backendtest

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

const (
	closeStreamLen = 30_000
	closePageSize  = 500
	// closeBound is how long a read in flight may take to end after Close:
	// generous, for a loaded machine; the figure measured is logged.
	closeBound = 5 * time.Second
)

// testCloseDuringRead: a stream read and a $all scan, each many pages long
// and consumed slowly, are in flight when the store is closed, once while a
// page of the stream read is being fetched and once while one of the scan
// is; both end with ErrClosed soon after, instead of running to their end or
// waiting out a backend timeout.
func testCloseDuringRead(t *testing.T, f Factory) {
	s := store(t, f)
	stream := prefix(t) + "long"
	start, err := s.LastPosition(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	const batch = 1000
	var last varve.AppendResult
	for v := 0; v < closeStreamLen; v += batch {
		last = mustAppend(t, s, stream, varve.Exact(varve.Version(v)), events("Long", batch)...)
	}
	// The scan must have the stream's events to read when the store closes.
	waitForPosition(t, s, last.Position)
	for _, during := range []string{"stream", "$all"} {
		t.Run("during a "+during+" page", func(t *testing.T) {
			b, err := reopen(t, f, s, stream)
			if err != nil {
				t.Fatal(err)
			}
			closeDuringRead(t, b, stream, start, last.Position, during)
		})
	}
}

// closeDuringRead closes a store over b while a read of stream and a scan
// of $all after start are in flight, as the third page of the one named by
// during is being fetched. through is the stream's last append, which the
// scan waits for on b (a backend opened anew has proven no horizon yet).
func closeDuringRead(t *testing.T, b varve.Backend, stream string, start, through varve.Position, during string) {
	fetched := make(chan struct{})
	var pages [2]atomic.Int32 // page reads started: of the stream, of $all
	s, err := varve.New(&announcing{Backend: b, onRead: func(all bool) {
		i := 0
		if all {
			i = 1
		}
		if pages[i].Add(1) == 3 && (all == (during == "$all")) {
			close(fetched)
		}
	}}, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	waitForPosition(t, s, through)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	type result struct {
		name string
		n    int
		err  error
		at   time.Time
	}
	closing := make(chan struct{})
	results := make(chan result, 2)
	consume := func(name string, seq iter.Seq2[varve.RecordedEvent, error]) {
		n := 0
		for _, err := range seq {
			if err != nil {
				results <- result{name, n, err, time.Now()}
				return
			}
			n++
			select {
			case <-closing:
			default:
				time.Sleep(100 * time.Microsecond)
			}
		}
		results <- result{name, n, nil, time.Now()}
	}
	go consume("stream read", s.ReadStream(ctx, stream, varve.PageSize(closePageSize)))
	go consume("$all scan", s.ReadAll(ctx, start, varve.PageSize(closePageSize)))
	select {
	case <-fetched:
	case r := <-results:
		t.Fatalf("%s ended before its third page: %d events, %v", r.name, r.n, r.err)
	case <-time.After(2 * time.Minute):
		t.Fatalf("no third page of the %s read within two minutes", during)
	}
	close(closing)
	closed := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	closeTook := time.Since(closed)
	for range 2 {
		select {
		case r := <-results:
			took := r.at.Sub(closed)
			switch {
			case r.err == nil:
				t.Errorf("%s ran to its end (%d events) despite Close", r.name, r.n)
			case !errors.Is(r.err, varve.ErrClosed):
				t.Errorf("%s after Close, %s later and %d events: got %v, want ErrClosed", r.name, took, r.n, r.err)
			case took > closeBound:
				t.Errorf("%s ended with ErrClosed %s after Close, more than %s", r.name, took, closeBound)
			default:
				state := "the other read in flight"
				if strings.HasPrefix(r.name, during) {
					state = "fetching its third page"
				}
				t.Logf("%s (%s at Close) ended with ErrClosed %s after Close, which returned in %s, after %d events", r.name, state, took, closeTook, r.n)
			}
		case <-time.After(closeBound):
			t.Fatalf("a read in flight did not end within %s of Close", closeBound)
		}
	}
}

// announcing is a backend whose page reads call onRead as they start.
type announcing struct {
	varve.Backend
	onRead func(all bool)
}

func (a *announcing) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	a.onRead(false)
	return a.Backend.ReadStream(ctx, q, buf)
}

func (a *announcing) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	a.onRead(true)
	return a.Backend.ReadAll(ctx, q, buf)
}
