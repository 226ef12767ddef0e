package nats

import (
	"errors"
	"testing"

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
