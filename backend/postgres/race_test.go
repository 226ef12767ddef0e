package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
)

// TestStreamRowRaces: on a few streams at once, fast-path appends (Any),
// appends at a version read a moment before (which mostly conflict and take
// the append function), deletes and truncations race for each stream's row.
// Every call must end in success or a conflict sentinel, and afterwards the
// store must satisfy the suite's invariants: no event left over from a
// deleted life of a stream, each stream's versions contiguous and in order
// in $all, and stream info agreeing with the events.
func TestStreamRowRaces(t *testing.T) {
	b := open(t, config(t, testSchema))
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pfx := fmt.Sprintf("rowrace-%d-", time.Now().UnixNano())
	var appended, conflicts, deletes, truncates atomic.Int64
	var wg sync.WaitGroup
	fail := make(chan error, 64)
	report := func(what string, err error) {
		select {
		case fail <- fmt.Errorf("%s: %w", what, err):
		default:
		}
	}
	for k := range 3 {
		stream := fmt.Sprintf("%s%d", pfx, k)
		for w := range 5 {
			wg.Go(func() {
				for ctx.Err() == nil {
					exp := varve.Any
					if w == 4 { // a writer at the version it just read
						exp = varve.NoStream
						if info, err := s.StreamInfo(ctx, stream); err == nil && !info.Deleted {
							exp = varve.Exact(info.Version)
						}
					}
					_, err := s.Append(ctx, stream, exp, varve.Event{Type: "E"}, varve.Event{Type: "E"})
					switch {
					case err == nil:
						appended.Add(2)
					case errors.Is(err, varve.ErrWrongExpectedVersion):
						conflicts.Add(1)
					case ctx.Err() != nil:
					default:
						report("append", err)
						return
					}
				}
			})
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
				err := s.Delete(ctx, stream, varve.Any)
				switch {
				case err == nil:
					deletes.Add(1)
				case errors.Is(err, varve.ErrStreamNotFound), ctx.Err() != nil:
				default:
					report("delete", err)
					return
				}
			}
		})
		wg.Go(func() {
			for ctx.Err() == nil {
				time.Sleep(7 * time.Millisecond)
				info, err := s.StreamInfo(ctx, stream)
				if err != nil || info.Version < 4 {
					continue
				}
				err = s.Truncate(ctx, stream, info.Version-2)
				switch {
				case err == nil:
					truncates.Add(1)
				case errors.Is(err, varve.ErrStreamNotFound), ctx.Err() != nil:
				default:
					report("truncate", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	// The race's last events may be deleted: wait for a marker appended
	// after all of them instead.
	marker, err := s.Append(context.Background(), "marker-"+pfx, varve.NoStream, varve.Event{Type: "Marker"})
	if err != nil {
		t.Fatal(err)
	}
	waitForPosition(t, b, marker.Position)
	n, err := backendtest.CheckInvariants(context.Background(), s, pfx)
	if err != nil {
		t.Fatal(err)
	}
	if appended.Load() == 0 || deletes.Load() == 0 || truncates.Load() == 0 {
		t.Fatalf("the race did not happen: %d events appended, %d deletes, %d truncations", appended.Load(), deletes.Load(), truncates.Load())
	}
	t.Logf("%d events appended (%d left), %d conflicts, %d deletes, %d truncations", appended.Load(), n, conflicts.Load(), deletes.Load(), truncates.Load())
}
