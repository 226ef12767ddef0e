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

// Environment variables of RunDCBScale.
const (
	// DCBScaleEnv must be set (to anything) for RunDCBScale to run.
	DCBScaleEnv = "VARVE_DCB_SCALE"
	// DCBScaleSizesEnv overrides the sizes: comma-separated event counts.
	DCBScaleSizesEnv = "VARVE_DCB_SCALE_SIZES"
)

// DCB scale workload: the log is filled with events tagged with one of
// dcbScaleTags entity tags; the measured ops are conditional appends on a
// tag of their own and reads of a tag that holds dcbScaleReadEvents events.
const (
	dcbScaleTags       = 100_000
	dcbScaleBatch      = 1000
	dcbScaleLoaders    = 4
	dcbScaleAppends    = 2000
	dcbScaleReads      = 500
	dcbScaleReadEvents = 20
)

// RunDCBScale measures whether DCB stays flat as the log grows (issue
// #38): on one store it times conditional appends (each on a tag of its
// own, so each checks the tag index of a log of the current size) and reads
// by a tag, at each of sizes events in the log (default 0, 1 million and
// 10 million), filling the log between sizes with tagged events in
// batches; it logs appends/s, reads/s, their p99, the store's bytes per
// event where the backend says its size, and the ratio of each size's
// append rate to the first's. Opt-in: it takes long.
//
//	VARVE_DCB_SCALE=1 go test -run TestDCBScale -v -timeout 2h ./backend/sqlite/
func RunDCBScale(t *testing.T, f Factory, sizes ...int) {
	if os.Getenv(DCBScaleEnv) == "" {
		t.Skipf("the DCB scale test is opt-in: set %s=1 (and %s=0,1000000,... for other sizes)", DCBScaleEnv, DCBScaleSizesEnv)
	}
	sizes = scaleSizes(t, DCBScaleSizesEnv, sizes)
	s := store(t, f)
	if !s.Capabilities().Tags {
		t.Skipf("%s keeps no tags", s.Features().Name)
	}
	ctx := t.Context()
	sizer, _ := varve.As[interface {
		Size(context.Context) (int64, error)
	}](s.Backend())
	type row struct {
		size                 int
		appendRate, readRate float64
		appendP99, readP99   time.Duration
		bytesPerEvent        float64
		loadedIn             time.Duration
		loadRate             float64
	}
	var rows []row
	loaded := 0
	for _, size := range sizes {
		start := time.Now()
		if err := dcbFill(ctx, s, loaded, size, func(n int) {
			t.Logf("%s: %d events loaded in %v", s.Features().Name, n, time.Since(start).Round(time.Second))
		}); err != nil {
			t.Fatal(err)
		}
		r := row{size: size, loadedIn: time.Since(start)}
		if size > loaded {
			r.loadRate = float64(size-loaded) / r.loadedIn.Seconds()
		}
		loaded = size
		// The load leaves garbage behind: collect it now, so that the
		// collector's work on it does not land in the measured ops.
		runtime.GC()
		var err error
		if r.appendRate, r.appendP99, err = dcbTime(dcbScaleAppends, func(i int) error {
			tag := fmt.Sprintf("probe:%d:%d", size, i)
			e := varve.NewEvent("Probed", []byte(`{"probe":true}`))
			e.Tags = []string{tag}
			_, err := s.AppendIf(ctx, "probe-"+strconv.Itoa(size), varve.Any,
				varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Tags: []string{tag}}}}}, e)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		readTag := fmt.Sprintf("read:%d", size)
		evs := make([]varve.Event, dcbScaleReadEvents)
		for i := range evs {
			evs[i] = varve.NewEvent("Read", []byte(`{}`))
			evs[i].Tags = []string{readTag}
		}
		if _, err := s.Append(ctx, "read-"+strconv.Itoa(size), varve.Any, evs...); err != nil {
			t.Fatal(err)
		}
		q := varve.Query{Items: []varve.QueryItem{{Tags: []string{readTag}}}}
		var buf []varve.RecordedEvent
		if r.readRate, r.readP99, err = dcbTime(dcbScaleReads, func(int) error {
			page, err := s.ReadQueryPage(ctx, q, varve.Start, buf[:0])
			buf = page.Events
			if err == nil && len(page.Events) != dcbScaleReadEvents {
				err = fmt.Errorf("a read of %s: %d events, want %d", readTag, len(page.Events), dcbScaleReadEvents)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if sizer != nil {
			if bytes, err := sizer.Size(ctx); err == nil && size > 0 {
				r.bytesPerEvent = float64(bytes) / float64(size)
			}
		}
		t.Logf("%s at %d events: appends %.0f/s p99 %v, reads by tag %.0f/s p99 %v", s.Features().Name, size,
			r.appendRate, workload.Round(r.appendP99), r.readRate, workload.Round(r.readP99))
		rows = append(rows, r)
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "EVENTS\tAPPENDS/S\tP99\tRATIO\tREADS/S\tP99\tBYTES/EVENT\tLOADED/S\t")
	for _, r := range rows {
		bpe := "-"
		if r.bytesPerEvent > 0 {
			bpe = fmt.Sprintf("%.0f", r.bytesPerEvent)
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%v\t%.2f\t%.0f\t%v\t%s\t%.0f\t\n", r.size, r.appendRate, workload.Round(r.appendP99),
			r.appendRate/rows[0].appendRate, r.readRate, workload.Round(r.readP99), bpe, r.loadRate)
	}
	_ = tw.Flush()
	t.Logf("DCB at scale on %s: conditional appends (one event, a tag of its own) and reads of a tag of %d events, as the log grows (RATIO: appends/s against the first size):\n%s",
		s.Features().Name, dcbScaleReadEvents, sb.String())
}

// dcbFill appends tagged events until the log holds to of them (from
// from), in batches of dcbScaleBatch from dcbScaleLoaders writers, each
// event tagged with one of dcbScaleTags entity tags.
func dcbFill(ctx context.Context, s *varve.Store, from, to int, progress func(int)) error {
	if to <= from {
		return nil
	}
	var mu sync.Mutex
	next, done := from, from
	lastLog := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, dcbScaleLoaders)
	for w := range dcbScaleLoaders {
		wg.Go(func() {
			evs := make([]varve.Event, dcbScaleBatch)
			for {
				mu.Lock()
				at := next
				n := min(dcbScaleBatch, to-at)
				next += n
				mu.Unlock()
				if n <= 0 {
					return
				}
				for i := range n {
					evs[i] = varve.NewEvent("Loaded", workload.Payload)
					evs[i].Tags = []string{"entity:" + strconv.Itoa((at+i)%dcbScaleTags)}
				}
				if _, err := s.Append(ctx, "load-"+strconv.Itoa(w)+"-"+strconv.Itoa(at/1_000_000), varve.Any, evs[:n]...); err != nil {
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

// dcbTime runs op at least n times, one after the other, and for at least
// a second (at most 100 times n ops), and returns its rate and the p99 of
// its duration: a fast backend's n ops would last a few milliseconds.
func dcbTime(n int, op func(i int) error) (float64, time.Duration, error) {
	took := make([]time.Duration, 0, n)
	start := time.Now()
	for i := 0; i < n || time.Since(start) < time.Second && i < 100*n; i++ {
		t0 := time.Now()
		if err := op(i); err != nil {
			return 0, 0, err
		}
		took = append(took, time.Since(t0))
	}
	elapsed := time.Since(start)
	slices.Sort(took)
	return float64(len(took)) / elapsed.Seconds(), took[len(took)*99/100], nil
}
