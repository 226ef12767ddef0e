package subscription_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
)

// childEnv makes the test binary a child process of a test (see TestMain):
// it runs children[kind] on the store at VARVE_CHILD_STORE, writing what
// it handles to the file at VARVE_CHILD_LOG, until it is killed or gets
// SIGTERM.
const childEnv = "VARVE_CHILD"

// children are the kinds of child process, by the tests that start them.
var children = map[string]func(ctx context.Context, s *varve.Store, log *os.File) error{
	"active":    activeChild,    // TestRunActiveKilled
	"segmented": segmentedChild, // TestSegmentedKilled
	"paused":    pausedChild,    // TestPausedHolder
	"beating":   beatingChild,   // TestHeartbeatKilled
}

func runChild(kind string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := func() error {
		child := children[kind]
		if child == nil {
			return fmt.Errorf("no child process of kind %q", kind)
		}
		s, err := open.Store(ctx, os.Getenv("VARVE_CHILD_STORE"), varve.Config{})
		if err != nil {
			return err
		}
		defer s.Close()
		log, err := os.OpenFile(os.Getenv("VARVE_CHILD_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer log.Close()
		return child(ctx, s, log)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startChild starts the test binary as a child of kind over storeURL,
// logging to logPath.
func startChild(t *testing.T, kind, storeURL, logPath string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+kind, "VARVE_CHILD_STORE="+storeURL, "VARVE_CHILD_LOG="+logPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}
