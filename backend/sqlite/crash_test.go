package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
)

// The crash test runs the test binary again as a child process (selected by
// crashEnv, intercepted in TestMain) that appends in a loop and prints a
// line for every acknowledged append. The parent kills it with SIGKILL at a
// random moment, reopens the file, and checks that every acknowledged append
// is there, whole, and that the store's invariants hold.

const crashEnv = "VARVE_SQLITE_CRASH_CHILD" // "<synchronous>:<path>"

const crashWriters = 4

// crashChild runs the child's loop if this process is one; it does not
// return then.
func crashChild() bool {
	spec := os.Getenv(crashEnv)
	if spec == "" {
		return false
	}
	mode, path, _ := strings.Cut(spec, ":")
	cfg, err := sqlite.ParseURL("sqlite://" + path + "?synchronous=" + mode)
	if err == nil {
		err = runCrashChild(cfg)
	}
	fmt.Fprintln(os.Stderr, "crash child:", err)
	os.Exit(2)
	return true
}

// batchMeta is the metadata of every event of the crash test: the versions
// of the append that wrote it.
type batchMeta struct {
	First varve.Version `json:"first"`
	Last  varve.Version `json:"last"`
}

func crashEventID(stream string, v varve.Version) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s/%d", stream, v))
}

func runCrashChild(cfg sqlite.Config) error {
	ctx := context.Background()
	b, err := sqlite.New(ctx, cfg)
	if err != nil {
		return err
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		return err
	}
	var out sync.Mutex
	errs := make(chan error, crashWriters)
	for w := range crashWriters {
		go func() {
			stream := fmt.Sprintf("crash-%d", w)
			var version varve.Version
			info, err := s.StreamInfo(ctx, stream)
			switch {
			case err == nil:
				version = info.Version
			case !errors.Is(err, varve.ErrStreamNotFound):
				errs <- err
				return
			}
			for {
				n := 1 + rand.IntN(5)
				if rand.IntN(10) == 0 {
					n = 20 + rand.IntN(80)
				}
				meta, _ := json.Marshal(batchMeta{First: version + 1, Last: version + varve.Version(n)})
				evs := make([]varve.Event, n)
				for i := range evs {
					evs[i] = varve.Event{ID: crashEventID(stream, version+varve.Version(i+1)), Type: "Crash", Data: []byte(`{}`), Metadata: meta}
				}
				res, err := s.Append(ctx, stream, varve.Exact(version), evs...)
				if err != nil {
					errs <- err
					return
				}
				version = res.LastVersion
				out.Lock()
				fmt.Fprintf(os.Stdout, "ack %s %d %d\n", stream, res.FirstVersion, res.LastVersion)
				out.Unlock()
			}
		}()
	}
	return <-errs
}

func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary several times")
	}
	for _, mode := range []sqlite.Synchronous{sqlite.SyncFull, sqlite.SyncNormal} {
		t.Run("synchronous="+mode.String(), func(t *testing.T) {
			path := tempDB(t)
			acked := map[string]varve.Version{}
			for round := range 3 {
				n := crashRound(t, mode, path, acked)
				t.Logf("round %d: %d acknowledged appends before SIGKILL", round, n)
				checkAfterCrash(t, path, acked)
			}
		})
	}
}

// crashRound runs one child until a random moment after its first
// acknowledgement, kills it and records the acknowledged versions.
func crashRound(t *testing.T, mode sqlite.Synchronous, path string, acked map[string]varve.Version) int {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+mode.String()+":"+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill := func() { once.Do(func() { _ = cmd.Process.Signal(syscall.SIGKILL) }) }
	deadline := time.AfterFunc(30*time.Second, kill)
	defer deadline.Stop()

	r := bufio.NewReader(stdout)
	count := 0
	round := map[string]varve.Version{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			// A line cut by the kill has no newline: that append was not
			// acknowledged to anyone.
			if !errors.Is(err, io.EOF) {
				t.Errorf("read child output: %v", err)
			}
			break
		}
		var stream string
		var first, last varve.Version
		if _, err := fmt.Sscanf(line, "ack %s %d %d\n", &stream, &first, &last); err != nil {
			t.Fatalf("child wrote %q: %v", line, err)
		}
		// A new child resumes after what is in the file, which may be more
		// than was acknowledged before the last kill.
		if prev, ok := round[stream]; (ok && first != prev+1) || first <= acked[stream] {
			t.Errorf("stream %s: acknowledged %d..%d after %d", stream, first, last, acked[stream])
		}
		acked[stream], round[stream] = last, last
		if count++; count == 1 {
			time.AfterFunc(time.Duration(50+rand.IntN(450))*time.Millisecond, kill)
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v\n%s", err, stderr.String())
	}
	if count == 0 {
		t.Fatalf("child acknowledged nothing before it was killed:\n%s", stderr.String())
	}
	return count
}

// checkAfterCrash reopens the database and checks it: every acknowledged
// append is there, appends are whole, streams and $all agree.
func checkAfterCrash(t *testing.T, path string, acked map[string]varve.Version) {
	t.Helper()
	b := open(t, sqlite.Config{Path: path})
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	total := 0
	byPosition := map[varve.Position]varve.RecordedEvent{}
	for w := range crashWriters {
		stream := fmt.Sprintf("crash-%d", w)
		var evs []varve.RecordedEvent
		for e, err := range s.ReadStream(ctx, stream) {
			if err != nil {
				t.Fatalf("read %s: %v", stream, err)
			}
			evs = append(evs, e)
		}
		if n := varve.Version(len(evs)); n < acked[stream] {
			t.Fatalf("stream %s has %d events, %d were acknowledged", stream, n, acked[stream])
		}
		var batch batchMeta
		for i, e := range evs {
			v := varve.Version(i + 1)
			if e.Version != v || e.ID != crashEventID(stream, v) {
				t.Fatalf("stream %s: event %d has version %d, id %s", stream, i, e.Version, e.ID)
			}
			if err := json.Unmarshal(e.Metadata, &batch); err != nil {
				t.Fatalf("stream %s version %d: metadata %q: %v", stream, v, e.Metadata, err)
			}
			if v < batch.First || v > batch.Last {
				t.Fatalf("stream %s version %d is outside its append %d..%d", stream, v, batch.First, batch.Last)
			}
			if i > 0 && !evs[i-1].Position.Less(e.Position) {
				t.Fatalf("stream %s: positions not increasing at version %d", stream, v)
			}
			byPosition[e.Position] = e
		}
		if len(evs) > 0 && batch.Last != evs[len(evs)-1].Version {
			t.Fatalf("stream %s ends at version %d inside an append of %d..%d: a partial batch", stream, len(evs), batch.First, batch.Last)
		}
		info, err := s.StreamInfo(ctx, stream)
		if len(evs) > 0 && (err != nil || info.Version != evs[len(evs)-1].Version || info.LastPosition != evs[len(evs)-1].Position) {
			t.Fatalf("stream %s: info %+v %v disagrees with its last event", stream, info, err)
		}
		total += len(evs)
	}
	all := 0
	last := varve.Start
	for e, err := range s.ReadAll(ctx, varve.Start) {
		if err != nil {
			t.Fatalf("read $all: %v", err)
		}
		if !last.Less(e.Position) {
			t.Fatalf("$all: position %s after %s", e.Position, last)
		}
		last = e.Position
		if se, ok := byPosition[e.Position]; !ok || se.ID != e.ID || se.Stream != e.Stream {
			t.Fatalf("$all has %s/%d at %s, not found at that position in its stream", e.Stream, e.Version, e.Position)
		}
		all++
	}
	if all != total {
		t.Fatalf("$all has %d events, the streams %d", all, total)
	}
	if lp, err := s.LastPosition(ctx); err != nil || lp != last {
		t.Fatalf("last position %s %v, $all ends at %s", lp, err, last)
	}
	integrityCheck(t, path)
}

// integrityCheck runs PRAGMA integrity_check on a separate connection.
func integrityCheck(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check of %s: %q %v", path, res, err)
	}
}
