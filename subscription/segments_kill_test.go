package subscription_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/internal/testenv"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/subscription"
)

const killedSegments, killedTTL = 6, 2 * time.Second

// segmentedChild runs a segmented delivery "killed": a dispatcher per
// segment held, delivering 4 at a time in per-stream order to a sink that
// logs each event with the run that delivered it (process id and the
// count of segment holds in that process).
func segmentedChild(ctx context.Context, s *varve.Store, log *os.File) error {
	pid := os.Getpid()
	var runs atomic.Int64
	cfg := subscription.Config{Name: "killed", MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond, PageSize: 16}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Lease = subscription.Lease{Holder: fmt.Sprint("pid-", pid), TTL: killedTTL, Segments: killedSegments}
	return subscription.RunWith(ctx, s, cfg, func(ctx context.Context, sub *subscription.Subscription) error {
		segment, _ := sub.Segment()
		run := fmt.Sprintf("%d.%d", pid, runs.Add(1))
		d, err := delivery.New(sub, delivery.SinkFunc(func(_ context.Context, dl delivery.Delivery) error {
			// One write(2) of a short line: whole or not at all.
			_, err := fmt.Fprintf(log, "%s %d %s %d\n", run, segment, dl.Event.Stream, dl.Event.Version)
			return err
		}), delivery.Config{Concurrency: 4, CheckpointInterval: 50 * time.Millisecond, Logger: quiet})
		if err != nil {
			return err
		}
		return d.Run(ctx)
	})
}

// killStoreURLs gives a store URL of each server backend whose data is
// its own (a PostgreSQL schema, a NATS stream and buckets, a SQLite file
// that the processes share), removed when the test ends.
func killStoreURLs(t *testing.T) map[string]string {
	var id [4]byte
	_, _ = rand.Read(id[:])
	tag := hex.EncodeToString(id[:])
	urls := map[string]string{"sqlite": "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "varve.db"))}

	raw := testenv.PostgresURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	schema := "varve_seg_" + tag
	q := u.Query()
	q.Set("varve_schema", schema)
	u.RawQuery = q.Encode()
	urls["postgres"] = u.String()
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), raw)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})

	nurl := testenv.NATSURL(t)
	stream := "VARVE_SEG_" + tag
	urls["nats"] = nurl + "?stream=" + stream + "&prefix=vseg" + tag
	t.Cleanup(func() {
		nc, err := natsgo.Connect(nurl)
		if err != nil {
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, s := range []string{stream, "KV_" + stream + "_snapshots", "KV_" + stream + "_checkpoints"} {
			if err := js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("delete test stream %s: %v", s, err)
			}
		}
	})
	return urls
}

// TestSegmentedKilled runs a delivery of 6 segments in 3 processes on
// PostgreSQL, NATS and SQLite (one file shared by the processes) while
// events are appended, and kills one process with SIGKILL every 100-400
// ms (at least 20 kills per backend), starting another in its place. At
// the end every event was handled; within each run of a segment in a
// process, each stream's events came in version order and only the
// segment's streams came; and every event handled twice was handled again
// by another run, after a fail-over (counted).
func TestSegmentedKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for kind, storeURL := range killStoreURLs(t) {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testSegmentedKilled(t, storeURL)
		})
	}
}

func testSegmentedKilled(t *testing.T, storeURL string) {
	ctx := t.Context()
	s, err := open.Store(ctx, storeURL, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logPath := filepath.Join(t.TempDir(), "handled.log")
	start := func() *exec.Cmd { return startChild(t, "segmented", storeURL, logPath) }
	procs := []*exec.Cmd{start(), start(), start()}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	const streams = 12
	events := 360 // 24 kills; VARVE_FAILOVER_EVENTS makes the run longer (make failover-long)
	if v, err := strconv.Atoi(os.Getenv("VARVE_FAILOVER_EVENTS")); err == nil && v > events {
		events = v
	}
	rng := mrand.New(mrand.NewPCG(7, uint64(time.Now().UnixNano())))
	kills := 0
	for i := range events {
		if _, err := s.Append(ctx, fmt.Sprintf("acct-%d", i%streams), varve.Any, varve.NewEvent("Moved", nil)); err != nil {
			t.Fatal(err)
		}
		if i%15 == 14 {
			k := rng.IntN(len(procs))
			_ = procs[k].Process.Kill()
			_ = procs[k].Wait()
			procs[k] = start()
			kills++
			time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		}
	}
	deadline := time.Now().Add(2 * time.Minute) // a bound on a hang, not a measured time
	var h segHandled
	for {
		if h, err = readSegHandled(logPath); err != nil {
			t.Fatal(err)
		}
		if len(h.seen) == events {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events handled after %d kills", len(h.seen), events, kills)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(h.problems) > 0 {
		t.Fatalf("%d problems, first: %v", len(h.problems), h.problems[:min(5, len(h.problems))])
	}
	t.Logf("%d events, %d kills, %d runs of a segment, %d events handled again after a fail-over (%.1f per kill)",
		len(h.seen), kills, h.runs, h.dups, float64(h.dups)/float64(kills))
	if kills < 20 {
		t.Fatalf("only %d kills", kills)
	}
}

type segHandled struct {
	seen     map[string]string // stream@version -> the run that handled it first
	dups     int
	runs     int
	problems []string
}

// readSegHandled reads the children's log.
func readSegHandled(path string) (segHandled, error) {
	h := segHandled{seen: map[string]string{}}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return h, nil
	}
	if err != nil {
		return h, err
	}
	defer f.Close()
	last := map[string]int{} // run stream -> version
	runs := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var run, stream string
		var segment, v int
		if _, err := fmt.Sscan(sc.Text(), &run, &segment, &stream, &v); err != nil {
			continue // a line cut by a kill
		}
		runs[run] = true
		key := fmt.Sprintf("%s@%d", stream, v)
		if got := subscription.SegmentOf(stream, killedSegments); got != segment {
			h.problems = append(h.problems, fmt.Sprintf("%s handled in segment %d, belongs to %d", key, segment, got))
		}
		if first, ok := h.seen[key]; ok {
			if first == run {
				h.problems = append(h.problems, key+" twice in run "+run)
			}
			h.dups++
		} else {
			h.seen[key] = run
		}
		if pv := last[run+" "+stream]; v <= pv {
			h.problems = append(h.problems, fmt.Sprintf("%s after version %d in run %s", key, pv, run))
		}
		last[run+" "+stream] = v
	}
	h.runs = len(runs)
	return h, sc.Err()
}
