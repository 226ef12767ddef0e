package lab

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
)

// Mix is a read/write mix in percent, as in "90/10".
type Mix struct{ Read, Write int }

func (m Mix) String() string { return fmt.Sprintf("%d/%d", m.Read, m.Write) }

// ParseMixes parses "100/0,90/10,...".
func ParseMixes(s string) ([]Mix, error) {
	var out []Mix
	for _, part := range strings.Split(s, ",") {
		r, w, ok := strings.Cut(strings.TrimSpace(part), "/")
		ri, err1 := strconv.Atoi(r)
		wi, err2 := strconv.Atoi(w)
		if !ok || err1 != nil || err2 != nil || ri < 0 || wi < 0 || ri+wi != 100 {
			return nil, fmt.Errorf("mix %q: want READ/WRITE percentages adding up to 100: %w", part, varve.ErrInvalidArgument)
		}
		out = append(out, Mix{ri, wi})
	}
	return out, nil
}

// MatrixConfig configures a concurrency matrix run.
type MatrixConfig struct {
	// Store is the URL of the store to open, Label its name in reports.
	Store, Label string
	Streams      int           // streams written before the run, one event each
	Mixes        []Mix         // read/write mixes
	Workers      []int         // goroutine counts
	Duration     time.Duration // per cell
	// Rate caps the ops per second of a cell over its workers; 0 means no
	// cap.
	Rate float64
	// Progress, if set, gets a line per finished cell.
	Progress io.Writer
}

// MatrixCell is one (mix, workers) measurement.
type MatrixCell struct {
	Mix       string        `json:"mix"`
	ReadPct   int           `json:"read_pct"`
	Workers   int           `json:"workers"`
	Reads     int64         `json:"reads"`
	Writes    int64         `json:"writes"`
	Errors    int64         `json:"errors"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	ReadRate  float64       `json:"read_rate"`
	WriteRate float64       `json:"write_rate"`
	// ReadLatency and WriteLatency are the latencies of the point reads and
	// writes (waits for the rate cap excluded).
	ReadLatency  Latency `json:"read_latency"`
	WriteLatency Latency `json:"write_latency"`
	// Share is the cell's total rate over the best total rate of its mix.
	Share      float64 `json:"share_of_best"`
	FirstError string  `json:"first_error,omitempty"`
}

// MatrixReport is the result of a matrix run.
type MatrixReport struct {
	Store    string        `json:"store"`
	Streams  int           `json:"streams"`
	Duration time.Duration `json:"duration_per_cell_ns"`
	Rate     float64       `json:"rate"`
	Machine  MachineInfo   `json:"machine"`
	Cells    []MatrixCell  `json:"cells"`
	// Interrupted: the cells are the ones measured before the stop; the
	// last may have only its first half.
	Interrupted bool `json:"interrupted"`
}

// randTable is pre-generated randomness shared by the workers, so the run
// measures the store and not the random generator.
type randTable struct {
	streams []uint32 // random stream indexes
	ops     []uint8  // random percentiles 0..99
}

func newRandTable(streams int) randTable {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(42, 1024))
	t := randTable{streams: make([]uint32, n), ops: make([]uint8, n)}
	for i := range n {
		t.streams[i] = uint32(r.IntN(streams))
		t.ops[i] = uint8(r.IntN(100))
	}
	return t
}

// RunMatrix fills the store with cfg.Streams streams, then measures point
// reads (the last event of a random stream) and point writes (an append to a
// random stream) for every mix and worker count. When ctx ends it returns
// the cells measured so far with an error that wraps ctx's.
func RunMatrix(ctx context.Context, cfg MatrixConfig) (MatrixReport, error) {
	rep := MatrixReport{Store: cfg.Label, Streams: cfg.Streams, Duration: cfg.Duration, Rate: cfg.Rate, Machine: Machine()}
	if rep.Store == "" {
		rep.Store = Redact(cfg.Store)
	}
	if cfg.Streams <= 0 || len(cfg.Mixes) == 0 || len(cfg.Workers) == 0 || cfg.Duration <= 0 || cfg.Rate < 0 {
		return rep, fmt.Errorf("matrix: streams, mixes, workers and duration must be set: %w", varve.ErrInvalidArgument)
	}
	for _, n := range cfg.Workers {
		if n <= 0 {
			return rep, fmt.Errorf("matrix: %d workers: %w", n, varve.ErrInvalidArgument)
		}
	}
	s, err := Open(ctx, cfg.Store)
	if err != nil {
		return rep, err
	}
	defer s.Close()
	names := make([]string, cfg.Streams)
	for i := range names {
		names[i] = "matrix-" + strconv.Itoa(i)
	}
	if err := fillStreams(ctx, s, names, cfg.Progress); err != nil {
		if ctx.Err() != nil {
			rep.Interrupted = true
			return rep, fmt.Errorf("matrix interrupted while filling the store: %w", context.Cause(ctx))
		}
		return rep, err
	}
	table := newRandTable(cfg.Streams)
	// Every write grows the store, and a larger store is slower, so cells
	// measured later in a mix would look worse. Each cell is measured twice,
	// half the duration each, once in a pass through the worker counts and
	// once in a pass back (A B C ... C B A), and the two are added up: a
	// steady drift then weighs on every cell alike.
	half := cfg.Duration / 2
	for _, mix := range cfg.Mixes {
		cells := make([]*cellRun, len(cfg.Workers))
		order := make([]int, 0, 2*len(cfg.Workers))
		for i := range cfg.Workers {
			order = append(order, i)
		}
		for i := len(cfg.Workers) - 1; i >= 0; i-- {
			order = append(order, i)
		}
		for _, i := range order {
			if ctx.Err() != nil {
				break
			}
			runtime.GC() // each measurement starts from a collected heap, not the previous one's garbage
			if cells[i] == nil {
				cells[i] = newCellRun(mix, cfg.Workers[i])
			}
			cells[i].run(ctx, s, names, table, half, cfg.Rate)
		}
		var done []MatrixCell
		for _, c := range cells {
			if c != nil && c.elapsed > 0 {
				done = append(done, c.cell())
			}
		}
		best := 0.0
		for _, c := range done {
			best = max(best, c.ReadRate+c.WriteRate)
		}
		for _, c := range done {
			if best > 0 {
				c.Share = (c.ReadRate + c.WriteRate) / best
			}
			rep.Cells = append(rep.Cells, c)
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "matrix: %s x %d workers: %.0f reads/s, %.0f writes/s\n", mix, c.Workers, c.ReadRate, c.WriteRate)
			}
		}
		if ctx.Err() != nil {
			rep.Interrupted = true
			return rep, fmt.Errorf("matrix interrupted: %w", context.Cause(ctx))
		}
	}
	return rep, nil
}

func fillStreams(ctx context.Context, s *varve.Store, names []string, progress io.Writer) error {
	const workers = 8
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	data := []byte(`{"v":0}`)
	for range workers {
		wg.Go(func() {
			evs := make([]varve.Event, 1)
			for {
				i := next.Add(1) - 1
				if i >= int64(len(names)) || ctx.Err() != nil {
					return
				}
				evs[0] = varve.Event{Type: "Seeded", Data: data}
				if _, err := s.Append(ctx, names[i], varve.Any, evs...); err != nil {
					errs <- fmt.Errorf("matrix: fill stream %s: %w", names[i], err)
					return
				}
				if progress != nil && (i+1)%100_000 == 0 {
					fmt.Fprintf(progress, "matrix: filled %d of %d streams\n", i+1, len(names))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// cellRun accumulates the measurements of one cell.
type cellRun struct {
	mix                 Mix
	workers             int
	reads, writes, errs int64
	elapsed             time.Duration
	readH, writeH       *hdrhistogram.Histogram
	firstErr            string
}

func newCellRun(mix Mix, workers int) *cellRun {
	return &cellRun{mix: mix, workers: workers, readH: NewHistogram(), writeH: NewHistogram()}
}

// run measures the cell for d and adds what it saw.
func (c *cellRun) run(ctx context.Context, s *varve.Store, names []string, t randTable, d time.Duration, perSec float64) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	pace := newPaced(ctx, perSec, d)
	defer pace.stop()
	data := []byte(`{"v":1}`)
	for p := range c.workers {
		wg.Go(func() {
			var r, w, e int64
			var first error
			rh, wh := NewHistogram(), NewHistogram()
			evs := make([]varve.Event, 1)
			readOpts := []varve.StreamOption{varve.ReadBackward(), varve.Limit(1)}
			i := (p * 7919) % len(t.ops)
			<-start
			for !stop.Load() {
				if ok, _ := pace.wait(); !ok {
					break
				}
				i++
				if i == len(t.ops) {
					i = 0
				}
				name := names[t.streams[i]]
				t0 := time.Now()
				var err error
				if int(t.ops[i]) < c.mix.Read {
					for _, rerr := range s.ReadStream(ctx, name, readOpts...) {
						if rerr != nil && err == nil {
							err = rerr
						}
					}
					_ = rh.RecordValue(int64(time.Since(t0)))
					r++
				} else {
					evs[0] = varve.Event{Type: "Written", Data: data}
					_, err = s.Append(ctx, name, varve.Any, evs...)
					_ = wh.RecordValue(int64(time.Since(t0)))
					w++
				}
				if err != nil && ctx.Err() == nil {
					e++
					if first == nil {
						first = err
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			c.reads += r
			c.writes += w
			c.errs += e
			c.readH.Merge(rh)
			c.writeH.Merge(wh)
			if first != nil && c.firstErr == "" {
				c.firstErr = Scrub(first.Error())
			}
		})
	}
	began := time.Now()
	close(start)
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	timer.Stop()
	stop.Store(true)
	wg.Wait()
	c.elapsed += time.Since(began)
}

func (c *cellRun) cell() MatrixCell {
	sec := c.elapsed.Seconds()
	return MatrixCell{
		Mix: c.mix.String(), ReadPct: c.mix.Read, Workers: c.workers,
		Reads: c.reads, Writes: c.writes, Errors: c.errs, Elapsed: c.elapsed,
		ReadRate: float64(c.reads) / sec, WriteRate: float64(c.writes) / sec,
		ReadLatency: LatencyOf(c.readH), WriteLatency: LatencyOf(c.writeH), FirstError: c.firstErr,
	}
}

// PrintMatrix writes a row per cell: the read and write rates and
// latencies, then per mix how the largest worker count holds up against
// the mix's best rate.
func PrintMatrix(w io.Writer, rep MatrixReport) error {
	fmt.Fprintf(w, "matrix on %s: %s streams, %v per cell\n", rep.Store, GroupDigits(float64(rep.Streams)), rep.Duration)
	if rep.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the cells below are what was measured before the stop.")
	}
	t := textTable{header: []string{"MIX", "WORKERS", "READS/S", "READ P50", "P90", "P99", "MAX", "N", "WRITES/S", "WRITE P50", "P90", "P99", "MAX", "N", "SHARE", "ERRORS"}, left: 1}
	few := false
	for _, c := range rep.Cells {
		row := []string{c.Mix, strconv.Itoa(c.Workers), GroupDigits(c.ReadRate)}
		row = append(row, c.ReadLatency.Cells()...)
		row = append(row, GroupDigits(c.WriteRate))
		row = append(row, c.WriteLatency.Cells()...)
		row = append(row, fmt.Sprintf("%.2f", c.Share), GroupDigits(float64(c.Errors)))
		t.add(row...)
		few = few || c.ReadLatency.FewSamples && c.ReadLatency.Samples > 0 || c.WriteLatency.FewSamples && c.WriteLatency.Samples > 0
	}
	var b strings.Builder
	t.write(&b)
	if few {
		b.WriteString(FewSamplesNote + "\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for _, h := range Holdup(rep.Cells) {
		fmt.Fprintf(w, "%s: %d workers run at %.2fx the best rate (%s ops/s at %d)\n", h.Mix, h.Workers, h.Ratio, GroupDigits(h.Best), h.BestWorkers)
	}
	for _, c := range rep.Cells {
		if c.FirstError != "" {
			fmt.Fprintf(w, "%s x %d workers: %d errors, the first: %s\n", c.Mix, c.Workers, c.Errors, termtext.Escape(c.FirstError))
		}
	}
	return nil
}

// Hold is how a mix's total rate at its largest worker count compares to
// its best rate.
type Hold struct {
	Mix         string
	Workers     int
	Ratio       float64
	Best        float64
	BestWorkers int
}

// Holdup computes a Hold per mix.
func Holdup(cells []MatrixCell) []Hold {
	var out []Hold
	for i := 0; i < len(cells); {
		j := i
		h := Hold{Mix: cells[i].Mix}
		for ; j < len(cells) && cells[j].Mix == cells[i].Mix; j++ {
			if rate := cells[j].ReadRate + cells[j].WriteRate; rate > h.Best {
				h.Best, h.BestWorkers = rate, cells[j].Workers
			}
		}
		last := cells[j-1]
		h.Workers = last.Workers
		if h.Best > 0 {
			h.Ratio = (last.ReadRate + last.WriteRate) / h.Best
		}
		out = append(out, h)
		i = j
	}
	return out
}

// MatrixDetail is what a matrix row holds beyond the shared fields.
type MatrixDetail struct {
	Mix     string `json:"mix"`
	ReadPct int    `json:"read_pct"`
	Workers int    `json:"workers"`
	Op      string `json:"op"`
}

// Rows returns a row per cell and op (reads, writes); a mix without reads
// or writes has no row for them. Each row's ratio is the cell's share of
// its mix's best rate.
func (rep MatrixReport) Rows() []Row {
	rows := []Row{}
	for _, c := range rep.Cells {
		for _, op := range []struct {
			unit  string
			n     int64
			rate  float64
			l     Latency
			share int
		}{{"reads", c.Reads, c.ReadRate, c.ReadLatency, c.ReadPct}, {"writes", c.Writes, c.WriteRate, c.WriteLatency, 100 - c.ReadPct}} {
			if op.share == 0 {
				continue
			}
			rows = append(rows, Row{Store: rep.Store, Name: fmt.Sprintf("%s %s, %d %s", c.Mix, op.unit, c.Workers, plural(c.Workers, "worker")), Unit: op.unit,
				Count: op.n, Rate: op.rate, Elapsed: c.Elapsed, Latency: op.l, Ratio: ratioPtr(c.Share), Errors: c.Errors,
				Stopped: "duration", Error: c.FirstError, Detail: MatrixDetail{Mix: c.Mix, ReadPct: c.ReadPct, Workers: c.Workers, Op: op.unit}})
		}
	}
	if rep.Interrupted && len(rows) > 0 {
		rows[len(rows)-1].Stopped = "interrupted"
	}
	return rows
}
