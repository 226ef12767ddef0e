package workload_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/internal/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t *testing.T) *varve.Store {
	t.Helper()
	s, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestWorkloads runs every workload on a small budget and checks the counts
// it reports against what it did to the store.
func TestWorkloads(t *testing.T) {
	for _, w := range workload.All() {
		t.Run(w.Name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			const budget = 300
			before, err := s.LastPosition(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			prep, err := w.Setup(t.Context(), s, workload.Params{Prefix: "t-", Events: budget})
			if err != nil {
				t.Fatal(err)
			}
			afterSetup, _ := s.LastPosition(t.Context())
			res := drive(t, w.Workers, prep.NewOp, workload.Limits{Ops: prep.Ops(budget)})
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.stopped != workload.StopBudget || res.Ops != int64(prep.Ops(budget)) {
				t.Fatalf("stopped %q after %d ops, want budget after %d", res.stopped, res.Ops, prep.Ops(budget))
			}
			end, _ := s.LastPosition(t.Context())
			written := int64(end.Seq - afterSetup.Seq)
			switch {
			case w.Name == "stream-info" || w.Name == "last-position":
				if res.Events != 0 || written != 0 {
					t.Fatalf("%s moved %d events and wrote %d, want none", w.Name, res.Events, written)
				}
			case w.Unit == workload.Ops: // mixed: events read plus events written
				if written == 0 || written == res.Ops || res.Events <= written {
					t.Fatalf("mixed workload wrote %d events in %d ops and counted %d events", written, res.Ops, res.Events)
				}
			case w.Name == "scale-load" || strings.HasPrefix(w.Name, "load-") || strings.Contains(w.Name, "filter-"):
				if written != 0 || res.Events < budget {
					t.Fatalf("%s wrote %d events and read %d, want 0 and >= %d", w.Name, written, res.Events, budget)
				}
			default:
				if res.Events != written || written < budget {
					t.Fatalf("%s counted %d events and wrote %d, want equal and >= %d", w.Name, res.Events, written, budget)
				}
			}
			if afterSetup.Seq < before.Seq {
				t.Fatal("log went backwards")
			}
		})
	}
}

// driven is what drive saw.
type driven struct {
	Ops, Events int64
	stopped     string
	err         error
}

// drive runs Drive and counts the ops and events its observer is told of.
func drive(t *testing.T, workers int, newOp func(int) workload.Op, lim workload.Limits) driven {
	return driveCtx(t.Context(), workers, newOp, lim)
}

func driveCtx(ctx context.Context, workers int, newOp func(int) workload.Op, lim workload.Limits) driven {
	ops := make([]workload.Op, workers)
	for i := range ops {
		ops[i] = newOp(i)
	}
	var n, ev atomic.Int64
	var res driven
	_, res.stopped, res.err = workload.Drive(ctx, ops, lim, func(_ int, d time.Duration, events int) {
		n.Add(1)
		ev.Add(int64(events))
	}, nil)
	res.Ops, res.Events = n.Load(), ev.Load()
	return res
}

func TestSelect(t *testing.T) {
	tests := []struct {
		names []string
		want  int
		err   bool
	}{
		{nil, len(workload.Suite()), false},
		{[]string{"scale"}, len(workload.Scale()), false},
		{[]string{"storage"}, len(workload.Storage()), false},
		{[]string{"all", "append-single"}, len(workload.All()), false},
		{[]string{"load-10", "append-single"}, 2, false},
		{[]string{"nope"}, 0, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.names), func(t *testing.T) {
			ws, err := workload.Select(tc.names)
			if (err != nil) != tc.err || len(ws) != tc.want {
				t.Fatalf("got %d workloads, error %v; want %d, error %v", len(ws), err, tc.want, tc.err)
			}
			if tc.err && !errors.Is(err, varve.ErrInvalidArgument) {
				t.Fatalf("error %v is not ErrInvalidArgument", err)
			}
		})
	}
	ws, _ := workload.Select([]string{"load-10", "append-single"})
	if ws[0].Name != "append-single" {
		t.Fatalf("selection not in report order: %s first", ws[0].Name)
	}
}

func TestPayloadSizes(t *testing.T) {
	if len(workload.Payload) != 84 || len(workload.Metadata) != 149 || len(workload.StoragePayload) != 100 {
		t.Fatalf("payload %d, metadata %d and storage payload %d bytes; the docs say 84, 149 and 100",
			len(workload.Payload), len(workload.Metadata), len(workload.StoragePayload))
	}
}

// TestStorageWorkloads: the storage workloads, and only they, are marked
// for a measure of bytes, and append events of 100 bytes of data over
// StorageStreams streams.
func TestStorageWorkloads(t *testing.T) {
	for _, w := range workload.All() {
		if w.Bytes != strings.HasPrefix(w.Name, "storage-") {
			t.Errorf("workload %s: Bytes %v", w.Name, w.Bytes)
		}
	}
	for _, w := range workload.Storage() {
		s := newStore(t)
		prep, err := w.Setup(t.Context(), s, workload.Params{Prefix: "t-"})
		if err != nil {
			t.Fatal(err)
		}
		if res := drive(t, w.Workers, prep.NewOp, workload.Limits{Ops: 2 * workload.StorageStreams}); res.err != nil {
			t.Fatal(res.err)
		}
		events, streams := 0, map[string]bool{}
		for e, err := range s.ReadAll(t.Context(), varve.Start) {
			if err != nil {
				t.Fatal(err)
			}
			if len(e.Data) != 100 || len(e.Metadata) != 0 {
				t.Fatalf("%s: event of %d bytes of data and %d of metadata, want 100 and 0", w.Name, len(e.Data), len(e.Metadata))
			}
			events++
			streams[e.Stream] = true
		}
		if want := 2 * workload.StorageStreams * prep.PerOp; events != want || len(streams) != workload.StorageStreams {
			t.Fatalf("%s: %d events in %d streams, want %d in %d", w.Name, events, len(streams), want, workload.StorageStreams)
		}
	}
}

// countedOp is slowOp that counts the ops it completes and calls done,
// when set, with the count.
func countedOp(completed *atomic.Int64, done func(int64)) func(int) workload.Op {
	return func(w int) workload.Op {
		op := slowOp(w)
		return func(ctx context.Context) (int, error) {
			n, err := op(ctx)
			if err == nil {
				c := completed.Add(1)
				if done != nil {
					done(c)
				}
			}
			return n, err
		}
	}
}

// slowOp sleeps, so that limits and cancellation land while ops run.
func slowOp(int) workload.Op {
	return func(ctx context.Context) (int, error) {
		select {
		case <-time.After(time.Millisecond):
			return 1, nil
		case <-ctx.Done():
			return 0, fmt.Errorf("slow op: %w", ctx.Err())
		}
	}
}

func TestDriveStops(t *testing.T) {
	t.Run("duration", func(t *testing.T) {
		// Every op that completed is counted (on a starved machine none
		// may complete in 50ms).
		var completed atomic.Int64
		res := drive(t, 2, countedOp(&completed, nil), workload.Limits{Ops: 1 << 30, Duration: 50 * time.Millisecond})
		if res.err != nil || res.stopped != workload.StopDuration || res.Ops != completed.Load() {
			t.Fatalf("got %q after %d ops (%d completed), error %v; want duration", res.stopped, res.Ops, completed.Load(), res.err)
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		// Interrupted when the second op completes: with an op done
		// however slow the machine.
		ctx, cancel := context.WithCancel(t.Context())
		var completed atomic.Int64
		res := driveCtx(ctx, 4, countedOp(&completed, func(n int64) {
			if n == 2 {
				cancel()
			}
		}), workload.Limits{Ops: 1 << 30})
		if res.err != nil || res.stopped != workload.StopInterrupted || res.Ops == 0 {
			t.Fatalf("got %q after %d ops, error %v; want interrupted with what ran", res.stopped, res.Ops, res.err)
		}
	})
	t.Run("error", func(t *testing.T) {
		boom := errors.New("boom")
		n := 0
		failing := func(int) workload.Op {
			return func(context.Context) (int, error) {
				if n++; n == 10 {
					return 0, boom
				}
				return 1, nil
			}
		}
		res := drive(t, 1, failing, workload.Limits{Ops: 100})
		if !errors.Is(res.err, boom) || res.stopped != workload.StopError || res.Ops != 9 {
			t.Fatalf("got %q after %d ops, error %v; want error after 9", res.stopped, res.Ops, res.err)
		}
	})
	t.Run("bad limits", func(t *testing.T) {
		if res := drive(t, 1, slowOp, workload.Limits{}); !errors.Is(res.err, varve.ErrInvalidArgument) {
			t.Fatalf("zero budget: %v", res.err)
		}
	})
}

func TestRound(t *testing.T) {
	tests := []struct{ in, want time.Duration }{
		{0, 0},
		{999, 999},
		{1234, 1230},
		{81264639, 81300000},
		{-1234, -1230},
		{time.Hour + time.Second, time.Hour},
	}
	for _, tc := range tests {
		if got := workload.Round(tc.in); got != tc.want {
			t.Errorf("Round(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
