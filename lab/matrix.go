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
	"text/tabwriter"
	"time"

	"github.com/varve-go/varve"
)

// Mix is a read/write mix in percent, as in "90/10".
type Mix struct{ Read, Write int }

func (m Mix) String() string { return fmt.Sprintf("%d%%-%d%%", m.Read, m.Write) }

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

// ParseInts parses "1,2,4".
func ParseInts(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want a positive integer: %w", part, varve.ErrInvalidArgument)
		}
		out = append(out, n)
	}
	return out, nil
}

// MatrixConfig configures a concurrency matrix run.
type MatrixConfig struct {
	Store    string
	Streams  int           // streams written before the run, one event each
	Mixes    []Mix         // read/write mixes
	Procs    []int         // goroutine counts
	Duration time.Duration // per cell
	// Progress, if set, gets a line per finished cell.
	Progress io.Writer
}

// MatrixCell is one (mix, goroutines) measurement.
type MatrixCell struct {
	Mix       string  `json:"mix"`
	ReadPct   int     `json:"read_pct"`
	Procs     int     `json:"procs"`
	Reads     int64   `json:"reads"`
	Writes    int64   `json:"writes"`
	Errors    int64   `json:"errors"`
	Seconds   float64 `json:"seconds"`
	ReadRate  float64 `json:"read_rate"`
	WriteRate float64 `json:"write_rate"`
}

// MatrixReport is the result of a matrix run.
type MatrixReport struct {
	Store    string       `json:"store"`
	Streams  int          `json:"streams"`
	Duration string       `json:"duration_per_cell"`
	Machine  MachineInfo  `json:"machine"`
	Cells    []MatrixCell `json:"cells"`
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
// random stream) for every mix and goroutine count. A cancelled context
// stops the run and returns the cells measured so far.
func RunMatrix(ctx context.Context, cfg MatrixConfig) (MatrixReport, error) {
	rep := MatrixReport{Store: Redact(cfg.Store), Streams: cfg.Streams, Duration: cfg.Duration.String(), Machine: Machine()}
	if cfg.Streams <= 0 || len(cfg.Mixes) == 0 || len(cfg.Procs) == 0 || cfg.Duration <= 0 {
		return rep, fmt.Errorf("matrix: streams, mixes, procs and duration must be set: %w", varve.ErrInvalidArgument)
	}
	urls, removeTemp, err := ExpandTemp(cfg.Store)
	defer removeTemp()
	if err != nil {
		return rep, err
	}
	s, err := Open(ctx, urls[0])
	if err != nil {
		return rep, err
	}
	defer s.Close()
	names := make([]string, cfg.Streams)
	for i := range names {
		names[i] = "matrix-" + strconv.Itoa(i)
	}
	if err := fillStreams(ctx, s, names, cfg.Progress); err != nil {
		return rep, err
	}
	table := newRandTable(cfg.Streams)
	// Every write grows the store, and a larger store is slower, so cells
	// measured later in a mix would look worse. Each cell is measured twice,
	// half the duration each, once in a pass through the goroutine counts
	// and once in a pass back (A B C ... C B A), and the two are added up:
	// a steady drift then weighs on every cell alike.
	half := cfg.Duration / 2
	for _, mix := range cfg.Mixes {
		cells := make([]MatrixCell, len(cfg.Procs))
		order := make([]int, 0, 2*len(cfg.Procs))
		for i := range cfg.Procs {
			order = append(order, i)
		}
		for i := len(cfg.Procs) - 1; i >= 0; i-- {
			order = append(order, i)
		}
		for _, i := range order {
			if ctx.Err() != nil {
				return rep, nil
			}
			runtime.GC() // each measurement starts from a collected heap, not the previous one's garbage
			c := runCell(ctx, s, names, table, mix, cfg.Procs[i], half)
			cells[i] = addCells(cells[i], c)
		}
		for _, c := range cells {
			rep.Cells = append(rep.Cells, c)
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "matrix: %s x %d goroutines: %.0f reads/s, %.0f writes/s\n", mix, c.Procs, c.ReadRate, c.WriteRate)
			}
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

func runCell(ctx context.Context, s *varve.Store, names []string, t randTable, mix Mix, procs int, d time.Duration) MatrixCell {
	var stop atomic.Bool
	var reads, writes, errs atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	data := []byte(`{"v":1}`)
	for p := range procs {
		wg.Go(func() {
			var r, w, e int64
			evs := make([]varve.Event, 1)
			readOpts := []varve.ReadOption{varve.ReadBackward(), varve.Limit(1)}
			i := (p * 7919) % len(t.ops)
			<-start
			for !stop.Load() {
				i++
				if i == len(t.ops) {
					i = 0
				}
				name := names[t.streams[i]]
				if int(t.ops[i]) < mix.Read {
					for _, err := range s.ReadStream(ctx, name, readOpts...) {
						if err != nil {
							e++
						}
					}
					r++
				} else {
					evs[0] = varve.Event{Type: "Written", Data: data}
					if _, err := s.Append(ctx, name, varve.Any, evs...); err != nil {
						e++
					}
					w++
				}
			}
			reads.Add(r)
			writes.Add(w)
			errs.Add(e)
		})
	}
	began := time.Now()
	close(start)
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	stop.Store(true)
	wg.Wait()
	sec := time.Since(began).Seconds()
	return MatrixCell{
		Mix: mix.String(), ReadPct: mix.Read, Procs: procs,
		Reads: reads.Load(), Writes: writes.Load(), Errors: errs.Load(), Seconds: sec,
		ReadRate: float64(reads.Load()) / sec, WriteRate: float64(writes.Load()) / sec,
	}
}

// addCells adds two measurements of one cell.
func addCells(a, b MatrixCell) MatrixCell {
	if a.Procs == 0 {
		return b
	}
	a.Reads += b.Reads
	a.Writes += b.Writes
	a.Errors += b.Errors
	a.Seconds += b.Seconds
	a.ReadRate, a.WriteRate = float64(a.Reads)/a.Seconds, float64(a.Writes)/a.Seconds
	return a
}

// PrintMatrix writes seed 004's table, then per mix the rate at the largest
// goroutine count as a share of the mix's best rate.
func PrintMatrix(w io.Writer, rep MatrixReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WORK\tPROCS\tREAD RATE\tWRITE RATE\tERRORS\t")
	for _, c := range rep.Cells {
		fmt.Fprintf(tw, "%s\t%d\t%s txn/s\t%s txn/s\t%d\t\n", c.Mix, c.Procs, thousands(c.ReadRate), thousands(c.WriteRate), c.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, h := range Holdup(rep.Cells) {
		fmt.Fprintf(w, "%s: %d goroutines run at %.2fx the best rate (%s txn/s at %d)\n", h.Mix, h.Procs, h.Ratio, thousands(h.Best), h.BestProcs)
	}
	return nil
}

// Hold is how a mix's total rate at its largest goroutine count compares to
// its best rate.
type Hold struct {
	Mix       string
	Procs     int
	Ratio     float64
	Best      float64
	BestProcs int
}

// Holdup computes a Hold per mix.
func Holdup(cells []MatrixCell) []Hold {
	var out []Hold
	for i := 0; i < len(cells); {
		j := i
		h := Hold{Mix: cells[i].Mix}
		for ; j < len(cells) && cells[j].Mix == cells[i].Mix; j++ {
			if rate := cells[j].ReadRate + cells[j].WriteRate; rate > h.Best {
				h.Best, h.BestProcs = rate, cells[j].Procs
			}
		}
		last := cells[j-1]
		h.Procs = last.Procs
		if h.Best > 0 {
			h.Ratio = (last.ReadRate + last.WriteRate) / h.Best
		}
		out = append(out, h)
		i = j
	}
	return out
}

func thousands(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
