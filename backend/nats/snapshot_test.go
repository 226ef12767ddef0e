package nats

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/testenv"
)

// TestSnapshotInCommitTwoProcesses: a process that meets a stream for the
// first time reads the snapshot kept in its last commit with one request,
// and two processes that keep snapshots in their commits check each
// other's expected versions as plain appends do.
func TestSnapshotInCommitTwoProcesses(t *testing.T) {
	for _, srv := range []struct{ name, url string }{{"machine", testenv.NATSURL(t)}, {"embedded", embeddedURL}} {
		t.Run(srv.name, func(t *testing.T) {
			cfg := testConfig(srv.url, uniqueName("snapcommit"))
			a := mode{}.open(t, cfg)
			ctx := ctxT(t)
			snap := func(v varve.Version, data string) varve.Snapshot {
				return varve.Snapshot{Stream: "acct-1", Version: v, SchemaVersion: 1, Data: []byte(data)}
			}
			req := func(exp varve.ExpectedVersion, n int) varve.AppendRequest {
				return varve.AppendRequest{Stream: "acct-1", Expected: exp, Events: makeEvents(n, 10), Category: "acct"}
			}
			if _, err := a.AppendWithSnapshot(ctx, req(varve.NoStream, 2), snap(2, "two")); err != nil {
				t.Fatal(err)
			}
			b := open(t, cfg)
			before := b.Requests()
			s, ok, evs, err := b.ReadFromSnapshot(ctx, "acct-1", 10, nil)
			if err != nil || !ok || s.Version != 2 || string(s.Data) != "two" || len(evs) != 0 {
				t.Fatalf("cold read: %+v ok=%v, %d events, %v", s, ok, len(evs), err)
			}
			if n := b.Requests() - before; n != 1 {
				t.Fatalf("cold read took %d requests, want 1", n)
			}
			if _, err := b.AppendWithSnapshot(ctx, req(varve.Exact(2), 1), snap(3, "three")); err != nil {
				t.Fatal(err)
			}
			// a's cached head is at version 2.
			_, err = a.AppendWithSnapshot(ctx, req(varve.Exact(2), 1), snap(3, "stale"))
			var wrong *varve.WrongExpectedVersionError
			if !errors.As(err, &wrong) || wrong.Actual != 3 {
				t.Fatalf("append on a stale head: %v, want a conflict at version 3", err)
			}
			s, ok, evs, err = a.ReadFromSnapshot(ctx, "acct-1", 10, nil)
			if err != nil || !ok || s.Version != 3 || string(s.Data) != "three" || len(evs) != 0 {
				t.Fatalf("read after the other process's append: %+v ok=%v, %d events, %v", s, ok, len(evs), err)
			}
		})
	}
}

// TestSnapshotInCommitRace: two processes increment one counter kept as
// the snapshot of its stream, each reading it with ReadFromSnapshot and
// writing it with AppendWithSnapshot at the version read, retrying on a
// conflict. Every increment is one event; in the end the snapshot is the
// number of events, at their version, whatever the interleaving.
func TestSnapshotInCommitRace(t *testing.T) {
	for _, srv := range []struct{ name, url string }{{"machine", testenv.NATSURL(t)}, {"embedded", embeddedURL}} {
		t.Run(srv.name, func(t *testing.T) {
			cfg := testConfig(srv.url, uniqueName("snaprace"))
			procs := []*Backend{mode{}.open(t, cfg), open(t, cfg)}
			const perWorker, workers = 25, 4
			ctx := ctxT(t)
			var conflicts atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				b := procs[w%len(procs)]
				wg.Go(func() {
					for done := 0; done < perWorker; {
						s, ok, evs, err := b.ReadFromSnapshot(ctx, "counter", 100, nil)
						n, v := 0, varve.Version(0)
						switch {
						case errors.Is(err, varve.ErrStreamNotFound):
						case err != nil:
							errs <- err
							return
						case ok:
							if n, err = strconv.Atoi(string(s.Data)); err != nil {
								errs <- err
								return
							}
							n, v = n+len(evs), s.Version+varve.Version(len(evs))
						default:
							n, v = len(evs), varve.Version(len(evs))
						}
						_, err = b.AppendWithSnapshot(ctx, varve.AppendRequest{Stream: "counter", Expected: varve.Exact(v), Events: makeEvents(1, 8)},
							varve.Snapshot{Stream: "counter", Version: v + 1, Data: []byte(strconv.Itoa(n + 1))})
						var wrong *varve.WrongExpectedVersionError
						switch {
						case errors.As(err, &wrong):
							conflicts.Add(1)
						case err != nil:
							errs <- err
							return
						default:
							done++
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			const total = perWorker * workers
			for _, b := range procs {
				s, ok, evs, err := b.ReadFromSnapshot(ctx, "counter", 100, nil)
				if err != nil || !ok || s.Version != total || string(s.Data) != strconv.Itoa(total) || len(evs) != 0 {
					t.Fatalf("final read: %+v ok=%v, %d events, %v; want the count %d at version %d", s, ok, len(evs), err, total, total)
				}
				all, err := b.ReadStream(ctx, varve.StreamQuery{Stream: "counter", From: 1, Limit: 2 * total}, nil)
				if err != nil || len(all) != total {
					t.Fatalf("stream holds %d events, %v; want %d", len(all), err, total)
				}
			}
			t.Logf("%d increments, %d conflicts", total, conflicts.Load())
		})
	}
}

// TestTruncateChunkedHeadWithoutChunks: a truncation over a chunked head
// commit whose chunks are gone (an operator purged them) does not wait for
// them: it truncates without carrying the snapshot on.
func TestTruncateChunkedHeadWithoutChunks(t *testing.T) {
	cfg := testConfig(embeddedURL, uniqueName("snapchunks"))
	b := mode{}.open(t, cfg)
	ctx := ctxT(t)
	req := varve.AppendRequest{Stream: "acct-1", Expected: varve.NoStream, Events: makeEvents(2, 10)}
	big := varve.Snapshot{Stream: "acct-1", Version: 2, Data: bytes.Repeat([]byte("s"), 3<<19)}
	if _, err := b.AppendWithSnapshot(ctx, req, big); err != nil {
		t.Fatal(err)
	}
	h, ok := b.streams.head("acct-1")
	if !ok || h.st.kind != kindChunked {
		t.Fatalf("head %+v (cached %v), want a chunked commit", h, ok)
	}
	if err := b.c.Purge(ctx, b.chPrefix+b.token("acct-1"), h.seq+1); err != nil {
		t.Fatal(err)
	}
	before := b.Requests()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.Truncate(tctx, "acct-1", 2); err != nil {
		t.Fatalf("truncate: %v", err)
	}
	if n := b.Requests() - before; n > 10 {
		t.Fatalf("truncate took %d requests", n)
	}
	info, err := b.StreamInfo(ctx, "acct-1")
	if err != nil || info.Version != 2 {
		t.Fatalf("after the truncation: %+v, %v", info, err)
	}
}
