package workflow

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/open"
)

// The environment of TestCrashChild: the stage after which it holds, the
// URL of the store and the path of the receiver's log.
const (
	crashStageEnv = "VARVE_WORKFLOW_CRASH"
	crashStoreEnv = "VARVE_WORKFLOW_CRASH_STORE"
	crashLogEnv   = "VARVE_WORKFLOW_CRASH_LOG"
)

var crashInput = uuid.MustParse("0192f1c4-0000-7000-8000-000000000001")

// fileSender appends each command id to a file, one write per line, as an
// idempotent receiver's log; afterSend runs after the write.
type fileSender struct {
	path      string
	afterSend func()
}

func (s fileSender) Send(_ context.Context, c Command) error {
	f, err := os.OpenFile(s.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(c.ID.String() + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if s.afterSend != nil {
		s.afterSend()
	}
	return nil
}

// crashStore opens the store raw names.
func crashStore(ctx context.Context, raw string) (*varve.Store, error) {
	b, err := open.Backend(ctx, raw)
	if err != nil {
		return nil, err
	}
	store, err := varve.New(b, varve.Config{})
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return store, nil
}

// crashRun appends the input (again, after a restart), has a runner handle
// it and relays the instance's commands to the receiver's log.
func crashRun(ctx context.Context, store *varve.Store, log string, afterAppend, afterSend func()) error {
	src := "crashsrc-o1"
	ev := varve.Event{ID: crashInput, Type: "OrderPlaced", Data: []byte("o1")}
	if _, err := store.Append(ctx, src, varve.Any, ev); err != nil {
		return err
	}
	r, err := NewRunner(store, orderDef("crashwf"), fileSender{path: log, afterSend: afterSend}, &fakeClock{now: t0})
	if err != nil {
		return err
	}
	for e, err := range store.ReadStream(ctx, src) {
		if err != nil {
			return err
		}
		if err := r.Handle(ctx, e); err != nil {
			return err
		}
	}
	if afterAppend != nil {
		afterAppend()
	}
	_, err = r.Relay(ctx, "o1")
	return err
}

// TestCrashChild is the child process of TestSIGKILL: it runs crashRun on
// the store and log its parent names and holds after the stage.
func TestCrashChild(t *testing.T) {
	stage := os.Getenv(crashStageEnv)
	if stage == "" {
		t.Skip("child of TestSIGKILL only")
	}
	hold := func() { fmt.Println("WF-READY"); select {} }
	var afterAppend, afterSend func()
	if stage == "append" {
		afterAppend = hold
	} else {
		afterSend = hold
	}
	ctx := context.Background()
	store, err := crashStore(ctx, os.Getenv(crashStoreEnv))
	if err != nil {
		t.Fatal(err)
	}
	err = crashRun(ctx, store, os.Getenv(crashLogEnv), afterAppend, afterSend)
	t.Fatalf("child was not killed: %v", err)
}

// TestSIGKILL kills a child process after it appended a step and before it
// sent the command, and after it sent the command and before it recorded
// it; a restarted run (which also sees the input redelivered) on the same
// store ends with the step applied once and the command delivered under
// one id. It runs on every durable backend: SQLite, and PostgreSQL and NATS
// in a schema or stream of the test's own. The memory backend is left out:
// its events die with the process.
func TestSIGKILL(t *testing.T) {
	backends := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "wf.db")) }},
		{"postgres", func(t *testing.T) string { return teststore.PostgresSchemaURL(t) }},
		{"nats", func(t *testing.T) string { return teststore.NATSStreamURL(t) }},
	}
	for _, b := range backends {
		for _, stage := range []struct {
			name  string
			sends int
		}{
			{"append", 1},
			{"send", 2},
		} {
			t.Run(b.name+"/"+stage.name, func(t *testing.T) {
				t.Parallel()
				raw := b.url(t)
				log := filepath.Join(t.TempDir(), "sent.log")
				killChild(t, stage.name, raw, log)

				ctx := context.Background()
				store, err := crashStore(ctx, raw)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = store.Close() })
				r, err := NewRunner(store, orderDef("crashwf"), nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				// The child's step is in the store, its command unsent.
				before, err := r.Load(ctx, "o1")
				if err != nil {
					t.Fatal(err)
				}
				if len(before.Inputs) != 1 || len(before.Unsent) != 1 {
					t.Fatalf("instance the child left: %d inputs, %d unsent; want 1, 1", len(before.Inputs), len(before.Unsent))
				}
				if got := sentIDs(t, log); len(got) != stage.sends-1 {
					t.Fatalf("child sent %v; want %d send(s)", got, stage.sends-1)
				}

				if err := crashRun(ctx, store, log, nil, nil); err != nil {
					t.Fatal(err)
				}
				after, err := r.Load(ctx, "o1")
				if err != nil {
					t.Fatal(err)
				}
				// One event more: the sent record, not a second step.
				if len(after.Inputs) != 1 || len(after.Unsent) != 0 || after.Version != before.Version+1 {
					t.Fatalf("instance after restart: %d inputs, %d unsent, version %d; want 1, 0, %d",
						len(after.Inputs), len(after.Unsent), after.Version, before.Version+1)
				}
				want := before.Unsent[0].ID.String()
				got := sentIDs(t, log)
				if len(got) != stage.sends {
					t.Fatalf("sends %v; want %d send(s) of %s", got, stage.sends, want)
				}
				for _, id := range got {
					if id != want {
						t.Fatalf("sends %v; want %d send(s) of %s", got, stage.sends, want)
					}
				}
			})
		}
	}
}

// sentIDs returns the command ids in the receiver's log, none if there is
// no log yet.
func sentIDs(t *testing.T, log string) []string {
	t.Helper()
	raw, err := os.ReadFile(log)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(raw))
}

// startChild starts this test binary running only the test named run, as
// a child process, with env added to this process's environment. It
// returns the child, its standard output and the buffer its standard
// error goes to (read it once the child was waited for).
func startChild(t *testing.T, run, timeout string, env ...string) (*exec.Cmd, io.ReadCloser, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.count=1", "-test.timeout="+timeout)
	cmd.Env = append(os.Environ(), env...)
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out, stderr
}

// killChild starts TestCrashChild on the store raw names, waits for its
// ready line and SIGKILLs it. The child is killed and waited also when the
// test fails first; it is done before the store's cleanup drops the store.
func killChild(t *testing.T, stage, raw, log string) {
	t.Helper()
	cmd, out, stderr := startChild(t, "TestCrashChild", "60s", crashStageEnv+"="+stage, crashStoreEnv+"="+raw, crashLogEnv+"="+log)
	kill := sync.OnceValue(func() error {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		return cmd.Wait()
	})
	t.Cleanup(func() { _ = kill() })
	ready := false
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if sc.Text() == "WF-READY" {
			ready = true
			break
		}
		t.Log("child:", sc.Text())
	}
	err := kill()
	if !ready {
		t.Fatalf("child ended before it was ready (%v): %s", err, stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && !(ws.Signaled() && ws.Signal() == syscall.SIGKILL) {
		t.Fatalf("child ended with %v, not by SIGKILL", cmd.ProcessState)
	}
}
