package workflow

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/subscription"
)

// The environment of TestPauseChild: the URL of the store, the path of the
// receiver's log and the path of the file whose creation resumes it.
const (
	pauseStoreEnv = "VARVE_WORKFLOW_PAUSE_STORE"
	pauseLogEnv   = "VARVE_WORKFLOW_PAUSE_LOG"
	pauseGoEnv    = "VARVE_WORKFLOW_PAUSE_GO"
)

// recorder prints the appends the child makes once resumed (its report of
// its late append), and holds its lease calls after it resumed until that
// append is made: the late append comes before the child learns that it
// lost the lease, which after SIGCONT is up to the scheduler.
type recorder struct {
	varve.Backend
	*late
}

// late is the child's state: resumed after the pause, the late append
// reported, and the context of the step it was paused in.
type late struct {
	resumed, appended atomic.Bool
	step              atomic.Pointer[context.Context]
}

func (r recorder) Unwrap() varve.Backend { return r.Backend }

func (r recorder) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	res, err := r.Backend.Append(ctx, req)
	if r.resumed.Load() && !r.appended.Swap(true) {
		outcome := "ok"
		switch {
		case errors.Is(err, varve.ErrWrongExpectedVersion):
			outcome = "conflict"
		case err != nil:
			outcome = strings.ReplaceAll(err.Error(), " ", "_")
		}
		fmt.Printf("WF-APPEND %s %d %s\n", req.Stream, res.FirstVersion, outcome)
	}
	return res, err
}

func (r recorder) leases(ctx context.Context) (varve.LeaseStore, error) {
	for r.resumed.Load() && !r.appended.Load() {
		var step <-chan struct{}
		if c := r.step.Load(); c != nil {
			step = (*c).Done()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-step:
			// The step ended before its append reached the backend: the
			// process learnt of the loss first (its checkpoint save, say)
			// and gave the step up.
			if !r.appended.Swap(true) {
				fmt.Println("WF-APPEND - 0 abandoned")
			}
		case <-time.After(5 * time.Millisecond):
		}
	}
	l, _ := varve.As[varve.LeaseStore](r.Backend)
	return l, nil
}

func (r recorder) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (varve.Lease, error) {
	l, err := r.leases(ctx)
	if err != nil {
		return varve.Lease{}, err
	}
	return l.AcquireLease(ctx, name, holder, ttl)
}

func (r recorder) ReleaseLease(ctx context.Context, name, holder string, token uint64) error {
	l, err := r.leases(ctx)
	if err != nil {
		return err
	}
	return l.ReleaseLease(ctx, name, holder, token)
}

func (r recorder) SaveCheckpointFenced(ctx context.Context, name string, pos varve.Position, lease string, token uint64) error {
	l, err := r.leases(ctx)
	if err != nil {
		return err
	}
	return l.SaveCheckpointFenced(ctx, name, pos, lease, token)
}

func (r recorder) ListLeases(ctx context.Context, prefix string) ([]varve.Lease, error) {
	l, err := r.leases(ctx)
	if err != nil {
		return nil, err
	}
	return l.ListLeases(ctx, prefix)
}

var pauseRun = RunConfig{Filter: varve.Filter{Categories: []string{"pausesrc"}}, Tick: 20 * time.Millisecond,
	Lease: subscription.Lease{TTL: time.Second}}

// TestPauseChild is the child process of TestRunPausedProcess: it runs
// the workflow under the lease as holder "a" and, when it is about to
// append the due timer's firing, says so and waits for the go file.
func TestPauseChild(t *testing.T) {
	raw := os.Getenv(pauseStoreEnv)
	if raw == "" {
		t.Skip("child of TestRunPausedProcess only")
	}
	ctx := context.Background()
	b, err := open.Backend(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	st := &late{}
	store, err := varve.New(recorder{Backend: b, late: st}, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(store, orderDef("pausewf"), fileSender{path: os.Getenv(pauseLogEnv)}, &fakeClock{now: t0.Add(11 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	r.beforeAppend = func(ctx context.Context, _ string, in Input) {
		if in.Timer == "" || st.resumed.Load() {
			return
		}
		st.step.Store(&ctx)
		fmt.Println("WF-HOOKED")
		for {
			if _, err := os.Stat(os.Getenv(pauseGoEnv)); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		st.resumed.Store(true)
	}
	cfg := pauseRun
	cfg.Lease.Holder = "a"
	t.Fatalf("Run returned: %v", r.Run(ctx, cfg))
}

// TestRunPausedProcess: a process holding a workflow's lease is stopped
// with SIGSTOP after it decided a due timer and before its append, and
// stays stopped past its lease; this process takes the lease and fires
// the timer; the first, continued with SIGCONT, makes its late append,
// which the store refuses or answers with the first firing. The timer
// fired once and the compensation was sent under one id. On PostgreSQL and
// NATS, in a schema or stream of the test's own. Not on memory, which
// processes do not share, nor on SQLite: there a process stopped inside a
// write transaction (a checkpoint save, a lease renewal: any of its
// goroutines) holds the file's write lock, and the other's writes fail
// with SQLITE_BUSY after its busy timeout (seen in 4 of 8 runs), so the
// other cannot take over; TestRunTimerHolderPausedPastLease covers the
// engine there with an in-process pause.
func TestRunPausedProcess(t *testing.T) {
	for _, b := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"postgres", func(t *testing.T) string { return teststore.PostgresSchemaURL(t) }},
		{"nats", func(t *testing.T) string { return teststore.NATSStreamURL(t) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			pausedProcess(t, b.url(t))
		})
	}
}

func pausedProcess(t *testing.T, raw string) {
	ctx := context.Background()
	dir := t.TempDir()
	log, goFile := filepath.Join(dir, "sent.log"), filepath.Join(dir, "go")
	store, err := crashStore(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	clock := &fakeClock{now: t0}
	r, err := NewRunner(store, orderDef("pausewf"), fileSender{path: log}, clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, "pausesrc-o1", varve.NoStream, varve.NewEvent("OrderPlaced", []byte("o1"))); err != nil {
		t.Fatal(err)
	}
	for e, err := range store.ReadStream(ctx, "pausesrc-o1") {
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Relay(ctx, "o1"); err != nil {
		t.Fatal(err)
	}

	cmd, out, stderr := startChild(t, "TestPauseChild", "120s", pauseStoreEnv+"="+raw, pauseLogEnv+"="+log, pauseGoEnv+"="+goFile)
	reaped := sync.OnceFunc(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	t.Cleanup(reaped) // before the store's schema or stream is dropped
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	next := func(prefix string) string {
		t.Helper()
		for l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
			t.Log("child:", l)
		}
		reaped()
		t.Fatalf("the child ended before it said %s; its stderr:\n%s", prefix, stderr.String())
		return ""
	}
	next("WF-HOOKED")
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	clock.Add(11 * time.Minute)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	cfg := pauseRun
	cfg.Lease.Holder = "b"
	go func() { done <- r.Run(rctx, cfg) }()
	eventually(t, "this process to fire the timer", func() bool {
		select {
		case err := <-done:
			t.Fatalf("this process's Run ended: %v", err)
		default:
		}
		inst, err := r.Load(ctx, "o1")
		return err == nil && inst.State.Status == "cancelled" && len(inst.Unsent) == 0
	})
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	lateAppend := strings.Fields(next("WF-APPEND"))
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	reaped()
	fired := varve.Version(0)
	for e, err := range store.ReadStream(ctx, r.Stream("o1"), varve.From(2)) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == TypeInbox {
			fired = e.Version
			break
		}
	}
	// The late append is answered with the first firing, or refused; or
	// the child learnt of the loss first and gave the step up.
	switch l := lateAppend; {
	case len(l) == 4 && l[1] == r.Stream("o1") && l[3] == "ok" && l[2] == fmt.Sprint(fired):
	case len(l) == 4 && l[1] == r.Stream("o1") && l[3] == "conflict":
	case len(l) == 4 && (l[3] == "abandoned" || strings.HasSuffix(l[3], "context_canceled")):
	default:
		t.Fatalf("the child's late append: %v; want the firing at version %d returned, a conflict, or the step given up", l, fired)
	}
	t.Logf("the child's late append: %v (the firing is at version %d)", lateAppend, fired)
	if n := (&fixture{store: store}).count(t, r.Stream("o1"), TypeInbox); n != 2 {
		t.Fatalf("%d inbox records, want 2 (the order, the timer once)", n)
	}
	distinct := map[string]bool{}
	for _, id := range sentIDs(t, log) {
		distinct[id] = true
	}
	if len(distinct) != 2 {
		t.Fatalf("%d distinct commands sent, want 2 (TakePayment, Refund): %v", len(distinct), sentIDs(t, log))
	}
}
