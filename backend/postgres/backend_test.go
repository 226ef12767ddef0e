package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// TestMigrateConcurrently: backends opened at once on a fresh schema
// create it once, and reopening applies nothing.
func TestMigrateConcurrently(t *testing.T) {
	cfg := config(t, fmt.Sprintf("%s_mig_%d", testSchema, time.Now().UnixNano()%1e6))
	var wg sync.WaitGroup
	backends := make([]*postgres.Backend, 4)
	errs := make([]error, len(backends))
	for i := range backends {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			backends[i], errs[i] = postgres.New(ctx, cfg)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("backend %d: %v", i, err)
		}
		t.Cleanup(func() { _ = backends[i].Close() })
	}
	var applied, distinct int
	err := backends[0].Pool().QueryRow(context.Background(), "SELECT count(*), count(DISTINCT version) FROM "+backends[0].Schema()+".schema_migrations").Scan(&applied, &distinct)
	files, _ := filepath.Glob("migrations/*.sql")
	if err != nil || applied != len(files) || distinct != applied {
		t.Fatalf("schema_migrations has %d rows, %d distinct (%v), want each of the %d migrations once", applied, distinct, err, len(files))
	}
	if _, err := backends[3].Append(context.Background(), varve.AppendRequest{
		Stream: "s", Expected: varve.NoStream, Events: []varve.Event{{ID: varve.NewEventID(), Type: "E"}},
	}); err != nil {
		t.Fatal(err)
	}
}

// TestRequests: an append, a page read and stream info cost one statement
// each; an append that the fast path declines (here an idempotent retry,
// likewise a conflict) costs a second one, the append function.
func TestRequests(t *testing.T) {
	cfg := config(t, testSchema)
	cfg.NoNotify = true
	b := open(t, cfg)
	ctx := context.Background()
	stream := fmt.Sprintf("requests-%d", time.Now().UnixNano())
	evs := []varve.Event{{ID: varve.NewEventID(), Type: "E"}, {ID: varve.NewEventID(), Type: "E"}}
	cases := []struct {
		name string
		want uint64
		op   func() error
	}{
		{"append", 1, func() error {
			_, err := b.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.NoStream, Events: evs})
			return err
		}},
		{"idempotent retry", 2, func() error {
			_, err := b.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.NoStream, Events: evs})
			return err
		}},
		{"read stream", 1, func() error {
			_, err := b.ReadStream(ctx, varve.StreamQuery{Stream: stream, Limit: 10}, nil)
			return err
		}},
		{"read $all", 1, func() error {
			_, err := b.ReadAll(ctx, varve.AllQuery{Limit: 10}, nil)
			return err
		}},
		{"stream info", 1, func() error {
			_, err := b.StreamInfo(ctx, stream)
			return err
		}},
	}
	for _, tc := range cases {
		before := b.Requests()
		if err := tc.op(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n := b.Requests() - before; n != tc.want {
			t.Fatalf("%s sent %d statements, want %d", tc.name, n, tc.want)
		}
	}
}

// TestQueryExecModes: the backend works whatever default_query_exec_mode
// the connection string asks for; reads need described statements, so the
// modes without them are upgraded.
func TestQueryExecModes(t *testing.T) {
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			cfg := config(t, testSchema)
			cfg.ConnString = withParam(cfg.ConnString, "default_query_exec_mode="+mode)
			b := open(t, cfg)
			ctx := context.Background()
			stream := fmt.Sprintf("mode-%s-%d", mode, time.Now().UnixNano())
			ev := varve.Event{ID: varve.NewEventID(), Type: "E", Data: []byte("d")}
			res, err := b.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.NoStream, Events: []varve.Event{ev}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.ReadStream(ctx, varve.StreamQuery{Stream: stream, Limit: 10}, nil)
			if err != nil || len(got) != 1 || got[0].ID != ev.ID || string(got[0].Data) != "d" {
				t.Fatalf("read stream: %+v %v", got, err)
			}
			waitForPosition(t, b, res.Position)
			before := res.Position
			before.Seq--
			all, err := b.ReadAll(ctx, varve.AllQuery{After: before, Limit: 1}, nil)
			if err != nil || len(all) != 1 || all[0].ID != ev.ID || all[0].Stream != stream {
				t.Fatalf("read $all: %+v %v", all, err)
			}
			// A conditional append on a tag: the two pipelined statements.
			tag := stream + "-tag"
			cond := varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Tags: []string{tag}}}}, After: res.Position}
			tagged := varve.Event{ID: varve.NewEventID(), Type: "E", Data: []byte("t"), Tags: []string{tag}}
			first, err := b.AppendIf(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Exact(1), Events: []varve.Event{tagged}}, cond)
			if err != nil || first.LastVersion != 2 {
				t.Fatalf("conditional append: %+v %v", first, err)
			}
			again := varve.Event{ID: varve.NewEventID(), Type: "E", Tags: []string{tag}}
			var ce *varve.AppendConditionError
			if _, err := b.AppendIf(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: []varve.Event{again}}, cond); !errors.As(err, &ce) || ce.Position != first.Position {
				t.Fatalf("append on a failed condition: %v, want the condition error at %s", err, first.Position)
			}
		})
	}
}

// TestPoolSize: the pool holds DefaultMaxConns connections unless the
// config or the connection string's pool_max_conns sets its size.
func TestPoolSize(t *testing.T) {
	for _, tc := range []struct {
		name  string
		param string
		conns int32
		want  int32
	}{
		{"default", "", 0, max(postgres.DefaultMaxConns, int32(runtime.NumCPU()))},
		{"Config.MaxConns", "", 5, 5},
		{"pool_max_conns", "pool_max_conns=3", 0, 3},
		{"Config.MaxConns over pool_max_conns", "pool_max_conns=3", 6, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(t, testSchema)
			if tc.param != "" {
				cfg.ConnString = withParam(cfg.ConnString, tc.param)
			}
			cfg.MaxConns = tc.conns
			if got := open(t, cfg).Pool().Config().MaxConns; got != tc.want {
				t.Fatalf("pool of %d connections, want %d", got, tc.want)
			}
		})
	}
}

// TestReadCommitted: the backend's connections run in read committed even
// when the connection string (or the server) asks for another default,
// since its conditional appends rely on a snapshot per statement.
func TestReadCommitted(t *testing.T) {
	for _, level := range []string{"repeatable%20read", "serializable"} {
		cfg := config(t, testSchema)
		cfg.ConnString = withParam(cfg.ConnString, "default_transaction_isolation="+level)
		b := open(t, cfg)
		var got string
		if err := b.Pool().QueryRow(context.Background(), "SHOW transaction_isolation").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != "read committed" {
			t.Errorf("with default_transaction_isolation=%s in the URL, the pool's connections run in %q", level, got)
		}
	}
}

// TestJIT: the backend's connections run without JIT unless the
// connection string turns it on.
func TestJIT(t *testing.T) {
	for _, tc := range []struct{ param, want string }{{"", "off"}, {"jit=on", "on"}, {"jit=off", "off"}} {
		cfg := config(t, testSchema)
		if tc.param != "" {
			cfg.ConnString = withParam(cfg.ConnString, tc.param)
		}
		var got string
		if err := open(t, cfg).Pool().QueryRow(context.Background(), "SHOW jit").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("connection string parameter %q: jit is %q, want %q", tc.param, got, tc.want)
		}
	}
}

// withParam adds a query parameter (name=value) to a connection URL.
func withParam(url, param string) string {
	if strings.Contains(url, "?") {
		return url + "&" + param
	}
	return url + "?" + param
}

// TestCancelledConnectionDropped: a connection whose statement was
// cancelled by its context (a cancel request sent to the server) is not
// used again, as the request may reach the server late and cancel a later
// statement; a connection whose statements ended is kept. With one
// connection in the pool, the backend's process id tells them apart.
func TestCancelledConnectionDropped(t *testing.T) {
	cfg := config(t, testSchema)
	cfg.MaxConns = 1
	pool := open(t, cfg).Pool()
	pid := func() int32 {
		t.Helper()
		var p int32
		if err := pool.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := pid()
	if again := pid(); again != first {
		t.Fatalf("a connection whose statement ended was replaced: process %d, then %d", first, again)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := pool.Exec(ctx, "SELECT pg_sleep(10)")
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "57014") {
		t.Fatalf("a statement cancelled after 50 ms: %v, want a cancellation", err)
	}
	if after := pid(); after == first {
		t.Fatalf("the connection of the cancelled statement (process %d) was used again", first)
	}
}

// TestCancelledConnectionsDoNotFailOthers: calls whose contexts end while
// their statements run must not make a concurrent call with a live context
// fail: the pool drops their connections, and the live call gets another.
func TestCancelledConnectionsDoNotFailOthers(t *testing.T) {
	cfg := config(t, testSchema)
	cfg.MaxConns = 1
	pool := open(t, cfg).Pool()
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, cancel := context.WithTimeout(ctx, 3*time.Millisecond)
				_, _ = pool.Exec(c, "SELECT pg_sleep(0.05)")
				cancel()
			}
		}()
	}
	var fails, n int
	var first error
	for ctx.Err() == nil {
		var one int
		n++
		if err := pool.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
			if fails++; first == nil {
				first = err
			}
		}
	}
	stop()
	wg.Wait()
	if fails > 0 {
		t.Errorf("%d of %d reads with a live context failed beside cancelled calls; first: %v",
			fails, n, first)
	}
}
