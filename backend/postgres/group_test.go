package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// withGroupCommit runs f without group commit and with it.
func withGroupCommit(t *testing.T, f func(t *testing.T, cfg postgres.Config)) {
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("GroupCommit=%v", group), func(t *testing.T) {
			cfg := config(t, testSchema)
			cfg.GroupCommit = group
			f(t, cfg)
		})
	}
}

// lockRow locks the row of stream (which must exist) in a transaction of
// its own and returns the function that ends it.
func lockRow(t *testing.T, b *postgres.Backend, connString, stream string) func() {
	t.Helper()
	ctx := context.Background()
	tx, err := testConn(t, connString).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+b.Schema()+".streams WHERE stream = $1 FOR UPDATE", stream); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := tx.Rollback(ctx); err != nil {
			t.Error(err)
		}
	}
}

// blockLanes keeps every lane of group commit busy: two appends wait for a
// locked stream row, so every append made after it returns queues for a
// group. The function it returns frees the lanes and waits for those two.
func blockLanes(t *testing.T, b *postgres.Backend, connString string) func() {
	t.Helper()
	ctx := context.Background()
	stream := fmt.Sprintf("blocker-%d", time.Now().UnixNano())
	if _, err := b.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: []varve.Event{{ID: varve.NewEventID(), Type: "E"}}}); err != nil {
		t.Fatal(err)
	}
	unlock := lockRow(t, b, connString, stream)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			_, err := b.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: []varve.Event{{ID: varve.NewEventID(), Type: "E"}}})
			errs <- err
		})
	}
	waitLoad(t, b, func(inflight, _ int) bool { return inflight == 2 })
	return func() {
		unlock()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("blocked append: %v", err)
			}
		}
	}
}

// waitLoad waits until group commit's load satisfies ok.
func waitLoad(t *testing.T, b *postgres.Backend, ok func(inflight, queued int) bool) {
	t.Helper()
	for !ok(postgres.GroupLoad(b)) {
		if t.Context().Err() != nil {
			t.Fatal("test ended")
		}
		time.Sleep(time.Millisecond)
	}
}

func event() varve.Event { return varve.Event{ID: varve.NewEventID(), Type: "E", Data: []byte(`{}`)} }

// TestGroupCommit queues appends with every outcome behind busy lanes, so
// that they share one transaction, and checks that each gets what it would
// get alone: the successes commit together (one transaction id), a wrong
// expected version, a duplicate id and a tombstone get their sentinels
// without touching the others, an idempotent retry gets the first result,
// two appends to one stream go to two groups, and an append whose caller
// left while it was queued is never written.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	cfg := config(t, testSchema)
	cfg.GroupCommit = true
	b := open(t, cfg)
	pfx := fmt.Sprintf("group-%d-", time.Now().UnixNano())
	appendReq := func(stream string, exp varve.ExpectedVersion, evs ...varve.Event) varve.AppendRequest {
		return varve.AppendRequest{Stream: pfx + stream, Expected: exp, Events: evs}
	}
	// The streams the appends find.
	dup1, dup2 := event(), event()
	retry := appendReq("retry", varve.NoStream, event(), event())
	setup := []varve.AppendRequest{
		appendReq("exists", varve.NoStream, event(), event()),
		appendReq("dup", varve.NoStream, dup1, dup2),
		appendReq("tomb", varve.NoStream, event()),
		retry,
	}
	first := make([]varve.AppendResult, len(setup))
	for i, req := range setup {
		var err error
		if first[i], err = b.Append(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Delete(ctx, pfx+"tomb", varve.Any, true); err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		res varve.AppendResult
		err error
	}
	cases := []struct {
		name  string
		req   varve.AppendRequest
		check func(o outcome) error
	}{
		{"wrong version", appendReq("exists", varve.Exact(5), event()), func(o outcome) error {
			var wev *varve.WrongExpectedVersionError
			if !errors.As(o.err, &wev) || wev.Actual != 2 {
				return fmt.Errorf("got %v, want a wrong expected version at 2", o.err)
			}
			return nil
		}},
		{"duplicate", appendReq("dup", varve.Exact(2), event(), dup1), func(o outcome) error {
			if !errors.Is(o.err, varve.ErrDuplicateEvent) {
				return fmt.Errorf("got %v, want ErrDuplicateEvent", o.err)
			}
			return nil
		}},
		{"tombstone", appendReq("tomb", varve.Any, event()), func(o outcome) error {
			if !errors.Is(o.err, varve.ErrStreamDeleted) {
				return fmt.Errorf("got %v, want ErrStreamDeleted", o.err)
			}
			return nil
		}},
		{"retry", retry, func(o outcome) error {
			if o.err != nil || o.res != first[3] {
				return fmt.Errorf("got %+v, %v; want %+v", o.res, o.err, first[3])
			}
			return nil
		}},
	}
	fresh := func(n int) func(o outcome) error {
		return func(o outcome) error {
			if o.err != nil || o.res.FirstVersion != 1 || o.res.LastVersion != varve.Version(n) {
				return fmt.Errorf("got %+v, %v; want versions 1..%d", o.res, o.err, n)
			}
			return nil
		}
	}
	for i := range 6 {
		n := 1 + i%3
		evs := make([]varve.Event, n)
		for k := range evs {
			evs[k] = event()
		}
		cases = append(cases, struct {
			name  string
			req   varve.AppendRequest
			check func(o outcome) error
		}{fmt.Sprintf("fresh %d", i), appendReq(fmt.Sprintf("fresh-%d", i), varve.NoStream, evs...), fresh(n)})
	}
	pair := []varve.AppendRequest{appendReq("pair", varve.Any, event()), appendReq("pair", varve.Any, event())}

	unblock := blockLanes(t, b, cfg.ConnString)
	outcomes := make([]outcome, len(cases)+len(pair))
	var wg sync.WaitGroup
	for i, tc := range cases {
		wg.Go(func() {
			res, err := b.Append(ctx, tc.req)
			outcomes[i] = outcome{res, err}
		})
	}
	waitLoad(t, b, func(_, queued int) bool { return queued == len(cases) })
	for i, req := range pair { // in this order
		wg.Go(func() {
			res, err := b.Append(ctx, req)
			outcomes[len(cases)+i] = outcome{res, err}
		})
		waitLoad(t, b, func(_, queued int) bool { return queued == len(cases)+i+1 })
	}
	cctx, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() {
		_, err := b.Append(cctx, appendReq("left", varve.Any, event()))
		left <- err
	}()
	waitLoad(t, b, func(_, queued int) bool { return queued == len(cases)+len(pair)+1 })
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("append whose caller left: %v, want context.Canceled", err)
	}
	groups0, members0, _ := postgres.GroupStats(b)
	unblock()
	wg.Wait()

	var commit uint64
	for i, tc := range cases {
		o := outcomes[i]
		if err := tc.check(o); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.name[:5] == "fresh" && o.err == nil {
			if commit == 0 {
				commit = o.res.Position.Commit
			} else if o.res.Position.Commit != commit {
				t.Errorf("%s: committed in transaction %d, the group's first in %d", tc.name, o.res.Position.Commit, commit)
			}
		}
	}
	// Two groups may be in flight at once, so the two appends to one
	// stream, concurrent calls, commit in either order, one after the
	// other.
	p0, p1 := outcomes[len(cases)], outcomes[len(cases)+1]
	if p0.res.LastVersion > p1.res.LastVersion {
		p0, p1 = p1, p0
	}
	if p0.err != nil || p1.err != nil || p0.res.LastVersion != 1 || p1.res.LastVersion != 2 || !p0.res.Position.Less(p1.res.Position) {
		t.Errorf("two appends to one stream: %+v, %v and %+v, %v; want versions 1 and 2 in $all order", p0.res, p0.err, p1.res, p1.err)
	}
	if groups, members, _ := postgres.GroupStats(b); groups-groups0 != 2 || members-members0 != uint64(len(cases)+len(pair)) {
		t.Errorf("%d groups of %d appends, want 2 of %d", groups-groups0, members-members0, len(cases)+len(pair))
	}
	if _, err := b.StreamInfo(ctx, pfx+"left"); !errors.Is(err, varve.ErrStreamNotFound) {
		t.Errorf("stream of the append whose caller left: %v, want ErrStreamNotFound", err)
	}
	// Nothing but the successes was written.
	for _, tc := range []struct {
		stream string
		want   int
	}{{"exists", 2}, {"dup", 2}, {"retry", 2}, {"pair", 2}, {"fresh-4", 2}} {
		evs, err := b.ReadStream(ctx, varve.StreamQuery{Stream: pfx + tc.stream, From: 1, Limit: 10}, nil)
		if err != nil || len(evs) != tc.want {
			t.Errorf("%s: %d events, %v; want %d", tc.stream, len(evs), err, tc.want)
		}
	}
}

// TestGroupServerGone: when the server ends a group's session while the
// group waits in the middle, every append of the group gets an error, and
// none of them is written.
func TestGroupServerGone(t *testing.T) {
	ctx := context.Background()
	cfg := config(t, testSchema)
	cfg.GroupCommit = true
	b := open(t, cfg)
	pfx := fmt.Sprintf("gone-%d-", time.Now().UnixNano())
	if _, err := b.Append(ctx, varve.AppendRequest{Stream: pfx + "c", Expected: varve.NoStream, Events: []varve.Event{event()}}); err != nil {
		t.Fatal(err)
	}
	unlockC := lockRow(t, b, cfg.ConnString, pfx+"c")
	defer unlockC()
	unblock := blockLanes(t, b, cfg.ConnString)
	streams := []string{"a", "b", "c", "d"} // the group waits at c
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() {
			_, errs[i] = b.Append(ctx, varve.AppendRequest{Stream: pfx + s, Expected: varve.Any, Events: []varve.Event{event()}})
		})
	}
	waitLoad(t, b, func(_, queued int) bool { return queued == len(streams) })
	unblock()
	admin := testConn(t, cfg.ConnString)
	for killed := false; !killed; {
		var pid int32
		err := admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO ' || $1 || '.streams%'`, b.Schema()).Scan(&pid)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			time.Sleep(time.Millisecond)
		case err != nil:
			t.Fatal(err)
		default:
			if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil || errors.Is(err, varve.ErrWrongExpectedVersion) {
			t.Errorf("append to %s: %v, want the lost connection's error", streams[i], err)
		}
	}
	for _, s := range []string{"a", "b", "d"} {
		if _, err := b.StreamInfo(ctx, pfx+s); !errors.Is(err, varve.ErrStreamNotFound) {
			t.Errorf("stream %s after the group was lost: %v, want ErrStreamNotFound", s, err)
		}
	}
	// The backend carries on.
	if _, err := b.Append(ctx, varve.AppendRequest{Stream: pfx + "a", Expected: varve.NoStream, Events: []varve.Event{event()}}); err != nil {
		t.Fatal(err)
	}
}
