package workflow

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
)

const crashEnv = "VARVE_WORKFLOW_CRASH" // stage,dbpath,logpath

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

func crashRun(ctx context.Context, db, log string, afterAppend, afterSend func()) (*varve.Store, error) {
	b, err := sqlite.New(ctx, sqlite.Config{Path: db})
	if err != nil {
		return nil, err
	}
	store, err := varve.New(b, varve.Config{})
	if err != nil {
		return nil, err
	}
	src := "crashsrc-o1"
	ev := varve.Event{ID: crashInput, Type: "OrderPlaced", Data: []byte("o1")}
	if _, err := store.Append(ctx, src, varve.Any, ev); err != nil {
		return store, err
	}
	r, err := NewRunner(store, orderDef("crashwf"), fileSender{path: log, afterSend: afterSend}, &fakeClock{now: t0})
	if err != nil {
		return store, err
	}
	for e, err := range store.ReadStream(ctx, src) {
		if err != nil {
			return store, err
		}
		if err := r.Handle(ctx, e); err != nil {
			return store, err
		}
	}
	if afterAppend != nil {
		afterAppend()
	}
	_, err = r.Relay(ctx, "o1")
	return store, err
}

// TestCrashChild is the child process of TestSIGKILL.
func TestCrashChild(t *testing.T) {
	cfg := os.Getenv(crashEnv)
	if cfg == "" {
		t.Skip("child of TestSIGKILL only")
	}
	parts := strings.Split(cfg, ",")
	hold := func() { fmt.Println("WF-READY"); select {} }
	var afterAppend, afterSend func()
	if parts[0] == "append" {
		afterAppend = hold
	} else {
		afterSend = hold
	}
	_, err := crashRun(context.Background(), parts[1], parts[2], afterAppend, afterSend)
	t.Fatalf("child was not killed: %v", err)
}

// TestSIGKILL kills a child process on SQLite after it appended a step and
// before it sent the command, and after it sent the command and before it
// recorded it; a restarted run (which also sees the input redelivered) ends
// with the step applied once and the command delivered under one id.
func TestSIGKILL(t *testing.T) {
	for _, stage := range []string{"append", "send"} {
		t.Run(stage, func(t *testing.T) {
			dir := t.TempDir()
			db, log := filepath.Join(dir, "wf.db"), filepath.Join(dir, "sent.log")
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=60s")
			cmd.Env = append(os.Environ(), crashEnv+"="+stage+","+db+","+log)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ready := false
			for sc := bufio.NewScanner(out); sc.Scan(); {
				if sc.Text() == "WF-READY" {
					ready = true
					break
				}
				t.Log("child:", sc.Text())
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			if !ready {
				t.Fatal("child ended before it was ready")
			}
			ctx := context.Background()
			store, err := crashRun(ctx, db, log, nil, nil)
			if store != nil {
				defer store.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Fields(string(raw))
			distinct := map[string]bool{}
			for _, l := range lines {
				distinct[l] = true
			}
			want := map[string]int{"append": 1, "send": 2}[stage]
			if len(lines) != want || len(distinct) != 1 {
				t.Fatalf("sends %v; want %d send(s) of one id", lines, want)
			}
			r, err := NewRunner(store, orderDef("crashwf"), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := r.Load(ctx, "o1")
			if err != nil {
				t.Fatal(err)
			}
			if len(inst.Inputs) != 1 || len(inst.Unsent) != 0 {
				t.Fatalf("instance after restart: %d inputs, %d unsent; want 1, 0", len(inst.Inputs), len(inst.Unsent))
			}
		})
	}
}
