package backendtest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/workload"
)

// Environment variables of RunLogScale.
const (
	// LogScaleEnv must be set (to anything) for RunLogScale to run.
	LogScaleEnv = "VARVE_LOG_SCALE"
	// LogScaleSizesEnv overrides the sizes: comma-separated event counts.
	LogScaleSizesEnv = "VARVE_LOG_SCALE_SIZES"
)

// Log scale workload: the log is filled with batches of events, each
// batch a stream of the next of logScaleCategories categories; at each
// size a window of logScaleWindow events is appended on top the same way
// and read back, through $all and by one category (10 of its batches).
const (
	logScaleCategories = 100
	logScaleBatch      = 100
	logScaleLoaders    = 4
	logScaleAppends    = 2000
	logScaleWindow     = 100_000
	logScalePage       = 512
)

// RunLogScale measures whether appends and reads stay flat as the log
// grows (issue #40 goal 7): on one store, at each of sizes events in the
// log (default 0, 1 million and 10 million), it times single-event appends
// from one writer, then appends a window of 100,000 events (in batches of
// 100, over 100 categories) and times a catch-up of $all through that
// window and a read of one category's 1,000 events in it, both starting at
// the window. (The probes and windows of the sizes before add to the log:
// 102,000 events a size.) It fills the log between sizes in batches from 4 writers
// and logs a table of the rates at each size and their ratio to the first
// size's; after each fill it calls f.Settle, if set, so that what is
// measured is the log at that size, not the work the fill left behind.
// The appends alternate, in blocks, with appends to a second store from
// f that holds nothing but the probes and windows, and their ratio is to
// that store's rate in the same blocks: a disk's flush time drifts by more
// than the log's size moves it. The reads alternate the same way with
// reads of a window appended to that second store at each size, and their
// ratio is to those; the ratio to the first size is logged too.
// Opt-in: it takes long.
//
//	VARVE_LOG_SCALE=1 go test -run TestLogScale -v -timeout 2h ./backend/sqlite/
func RunLogScale(t *testing.T, f Factory, sizes ...int) {
	if os.Getenv(LogScaleEnv) == "" {
		t.Skipf("the log scale test is opt-in: set %s=1 (and %s=0,1000000,... for other sizes)", LogScaleEnv, LogScaleSizesEnv)
	}
	sizes = scaleSizes(t, LogScaleSizesEnv, sizes)
	s := store(t, f)
	small := store(t, f)
	ctx := t.Context()
	name := s.Features().Name
	type row struct {
		size                         int
		appendRate, allRate, catRate float64
		// of the small store, beside appendRate, allRate and catRate
		smallRate, smallAll, smallCat float64
		appendP99                     time.Duration
		loadRate                      float64
	}
	var rows []row
	loaded := 0
	for _, size := range sizes {
		start := time.Now()
		if err := logFill(ctx, s, loaded, size, "load", func(n int) {
			t.Logf("%s: %d events loaded in %v", name, n, time.Since(start).Round(time.Second))
		}); err != nil {
			t.Fatal(err)
		}
		r := row{size: size}
		if size > loaded {
			r.loadRate = float64(size-loaded) / time.Since(start).Seconds()
		}
		if f.Settle != nil {
			settled := time.Now()
			if err := f.Settle(ctx, s.Backend()); err != nil {
				t.Fatalf("settle at %d events: %v", size, err)
			}
			t.Logf("%s: settled at %d events in %v", name, size, time.Since(settled).Round(time.Millisecond))
		}
		runtime.GC()
		var err error
		stream := "probe-" + strconv.Itoa(size)
		if r.appendRate, r.smallRate, r.appendP99, err = appendsBeside(ctx, s, small, stream); err != nil {
			t.Fatal(err)
		}
		// The windows: their first events' positions are where the reads start.
		w, err := logWindow(ctx, s, "window"+strconv.Itoa(size))
		if err != nil {
			t.Fatal(err)
		}
		sw, err := logWindow(ctx, small, "small"+strconv.Itoa(size))
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		all, err := logReadBeside(ctx, s, w, small, sw)
		if err != nil {
			t.Fatal(err)
		}
		r.allRate, r.smallAll = all[0], all[1]
		cat, err := logReadBeside(ctx, s, w, small, sw, varve.Filter{Categories: []string{"c7"}})
		if err != nil {
			t.Fatal(err)
		}
		r.catRate, r.smallCat = cat[0], cat[1]
		t.Logf("%s at %d events: appends %.0f/s p99 %v, $all %.0f events/s, a category %.0f events/s",
			name, size, r.appendRate, workload.Round(r.appendP99), r.allRate, r.catRate)
		t.Logf("%s at %d events: the small store beside it: appends %.0f/s, $all %.0f events/s, a category %.0f events/s",
			name, size, r.smallRate, r.smallAll, r.smallCat)
		rows = append(rows, r)
		loaded = size
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "EVENTS\tAPPENDS/S\tP99\tSMALL STORE\tRATIO\t$ALL EVENTS/S\tSMALL STORE\tRATIO\tTO FIRST\tCATEGORY EVENTS/S\tSMALL STORE\tRATIO\tTO FIRST\tLOADED/S\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%.0f\t%v\t%.0f\t%.2f\t%.0f\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%.2f\t%.2f\t%.0f\t\n", r.size,
			r.appendRate, workload.Round(r.appendP99), r.smallRate, r.appendRate/r.smallRate,
			r.allRate, r.smallAll, r.allRate/r.smallAll, r.allRate/rows[0].allRate,
			r.catRate, r.smallCat, r.catRate/r.smallCat, r.catRate/rows[0].catRate, r.loadRate)
	}
	_ = tw.Flush()
	t.Logf("The log at scale on %s: single appends (1 writer), a catch-up of $all through %d events and a read of one category's %d events among them, as the log grows (RATIO: against the small store's in the same blocks; TO FIRST: against the first size):\n%s",
		name, logScaleWindow, logScaleWindow/logScaleCategories, sb.String())
}

// scaleSizes returns the sizes of env, else sizes, else 0, 1 and 10
// million, sorted.
func scaleSizes(t *testing.T, env string, sizes []int) []int {
	if v := os.Getenv(env); v != "" {
		sizes = nil
		for _, part := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want event counts", env, v)
			}
			sizes = append(sizes, n)
		}
	}
	if len(sizes) == 0 {
		sizes = []int{0, 1_000_000, 10_000_000}
	}
	slices.Sort(sizes)
	return sizes
}

// logFill appends events until the count from from reaches to, in batches
// of logScaleBatch from logScaleLoaders writers, each batch to a stream of
// the next of logScaleCategories categories: a window of 100,000 events
// holds 10 batches of each category.
func logFill(ctx context.Context, s *varve.Store, from, to int, tag string, progress func(int)) error {
	var mu sync.Mutex
	next, done := from, from
	lastLog := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, logScaleLoaders)
	for w := range logScaleLoaders {
		wg.Go(func() {
			evs := make([]varve.Event, logScaleBatch)
			for {
				mu.Lock()
				at := next
				n := min(logScaleBatch, to-at)
				next += max(n, 0)
				mu.Unlock()
				if n <= 0 {
					return
				}
				for i := range n {
					evs[i] = varve.NewEvent("Loaded", workload.Payload)
				}
				// Each batch is a stream of the next category in turn.
				stream := "c" + strconv.Itoa((at/logScaleBatch)%logScaleCategories) + "-" + tag + "-" + strconv.Itoa(w)
				if _, err := s.Append(ctx, stream, varve.Any, evs[:n]...); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				done += n
				if time.Since(lastLog) > 30*time.Second {
					lastLog = time.Now()
					progress(done)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// window is a stretch of the log that a read goes through: after from,
// through last.
type window struct{ from, last varve.Position }

// logWindow appends a window of logScaleWindow events to s the way
// logFill does and waits until it can be read.
func logWindow(ctx context.Context, s *varve.Store, tag string) (window, error) {
	from, err := s.LastPosition(ctx)
	if err != nil {
		return window{}, err
	}
	if err := logFill(ctx, s, 0, logScaleWindow, tag, func(int) {}); err != nil {
		return window{}, err
	}
	last, err := s.LastPosition(ctx)
	if err != nil {
		return window{}, err
	}
	return window{from, last}, s.WaitFor(ctx, last)
}

// logReadBeside reads the window w of s and the window sw of small in
// turn, each at least three times and together for at least a second, and
// returns each one's rate from the median time of a read. A read of $all
// must find the whole window; one filtered by a category, that
// category's share of it.
func logReadBeside(ctx context.Context, s *varve.Store, w window, small *varve.Store, sw window, opts ...varve.AllOption) ([2]float64, error) {
	want := logScaleWindow
	if len(opts) > 0 {
		want = logScaleWindow / logScaleCategories
	}
	var took [2][]time.Duration
	var rates [2]float64
	// One buffer for each store's reads, made before the clock runs: a
	// page's buffer made per read added 6-32 µs to a read of 1,000 events
	// on memory (20 µs without it), by whether the heap had the memory at
	// hand.
	bufs := [2][]varve.RecordedEvent{make([]varve.RecordedEvent, 0, logScalePage), make([]varve.RecordedEvent, 0, logScalePage)}
	for start := time.Now(); len(took[0]) < 3 || time.Since(start) < time.Second && len(took[0]) < 1000; {
		for k, read := range []struct {
			st *varve.Store
			w  window
		}{{s, w}, {small, sw}} {
			n, d, err := logReadOnce(ctx, read.st, read.w.from, read.w.last, bufs[k], opts...)
			if err != nil {
				return rates, err
			}
			if n != want {
				return rates, fmt.Errorf("a read after %v through %v: %d events, want %d", read.w.from, read.w.last, n, want)
			}
			took[k] = append(took[k], d)
		}
	}
	for k := range took {
		slices.Sort(took[k])
		rates[k] = float64(want) / took[k][len(took[k])/2].Seconds()
	}
	return rates, nil
}

func logReadOnce(ctx context.Context, s *varve.Store, from, last varve.Position, buf []varve.RecordedEvent, opts ...varve.AllOption) (int, time.Duration, error) {
	start := time.Now()
	n := 0
	after := from
	for {
		page, err := s.ReadAllPage(ctx, after, buf[:0], append(opts, varve.PageSize(logScalePage))...)
		if err != nil {
			return n, 0, err
		}
		buf = page.Events
		for _, e := range page.Events {
			if last.Less(e.Position) {
				return n, time.Since(start), nil
			}
			n++
		}
		if !page.Full || !page.Through.Less(last) {
			return n, time.Since(start), nil
		}
		after = page.Through
	}
}

// appendsBeside times single-event appends to stream on s and on small in
// turn, ten blocks each of logScaleAppends/10, so that both meet the same
// moments of the machine; it returns each one's rate and the p99 of s.
func appendsBeside(ctx context.Context, s, small *varve.Store, stream string) (rate, smallRate float64, p99 time.Duration, err error) {
	const blocks = 10
	// Both stores' appends are timed one by one, though only s's p99 is
	// reported: timing only s's made it pay alone for the clock reads (on
	// memory, half its rate).
	took := [2][]time.Duration{make([]time.Duration, 0, logScaleAppends), make([]time.Duration, 0, logScaleAppends)}
	var spent [2]time.Duration
	for range blocks {
		for k, st := range []*varve.Store{s, small} {
			start := time.Now()
			for range logScaleAppends / blocks {
				t0 := time.Now()
				if _, err := st.Append(ctx, stream, varve.Any, varve.NewEvent("Probed", workload.Payload)); err != nil {
					return 0, 0, 0, err
				}
				took[k] = append(took[k], time.Since(t0))
			}
			spent[k] += time.Since(start)
		}
	}
	slices.Sort(took[0])
	n := float64(blocks * (logScaleAppends / blocks))
	return n / spent[0].Seconds(), n / spent[1].Seconds(), took[0][len(took[0])*99/100], nil
}
