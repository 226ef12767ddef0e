package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// Op performs one operation on a store and returns how many events it wrote
// or read. An Op belongs to one worker and is not safe for concurrent use.
type Op func(ctx context.Context) (events int, err error)

// Unit is what a workload's throughput counts.
type Unit string

const (
	Events Unit = "events"
	Ops    Unit = "ops"
)

// Params are the choices of one run of a workload.
type Params struct {
	// Prefix starts the name of every stream the run writes or reads; it
	// keeps runs that share a store apart.
	Prefix string
	// Events is how many events (or ops, for an Ops workload) the run is
	// asked for. Only workloads whose setup depends on it read it.
	Events int
}

// Prepared is a workload set up on a store.
type Prepared struct {
	// NewOp returns the op of one worker. Measure calls it for every worker
	// before the clock starts.
	NewOp func(worker int) Op
	// PerOp is how many units one op is meant to move, for turning a unit
	// budget into an op budget; at least 1.
	PerOp int
}

// Workload is one benchmark workload.
type Workload struct {
	// Name is the workload's name in the lab ("append-single").
	Name string
	// Bench is its Go benchmark or scale test name ("Append/Single").
	Bench string
	// About says in one line what one op does.
	About string
	// Workers is the number of goroutines that run ops.
	Workers int
	// Unit is what the throughput counts.
	Unit Unit
	// Scale marks the scale workloads, which are meant for large budgets.
	Scale bool
	// Bytes marks the storage workloads, after which a lab run reports the
	// bytes the store's size on disk grew by per event written.
	Bytes bool
	// Setup prepares the store; it is not timed.
	Setup func(ctx context.Context, s *varve.Store, p Params) (Prepared, error)
}

// Ops returns how many ops a budget of n units takes.
func (p Prepared) Ops(n int) int {
	per := max(p.PerOp, 1)
	return max((n+per-1)/per, 1)
}

// Pre-serialized payloads: an order event of 84 bytes and metadata of 149.
var (
	Payload  = []byte(`{"order_id":"ord-000123","customer":"cus-4711","amount_cents":4999,"currency":"EUR"}`)
	Metadata = []byte(`{"correlation_id":"0191d5a8-7c3e-7b2a-9f4e-3c2d1b0a9f8e","causation_id":"0191d5a8-7c3e-7b2a-9f4e-3c2d1b0a9f8f","user":"cus-4711","source":"checkout"}`)
)

const (
	// streamsPerWorker is how many streams an append workload's worker
	// rotates over: after the first round every append extends a stream.
	streamsPerWorker = 1000
	// seedStreams and seedEvents shape the streams read by the mixed,
	// stream-info and last-position workloads.
	seedStreams = 100
	seedEvents  = 10
	// writeBatch bounds the appends that setups use to fill streams.
	writeBatch = 1000
)

// Suite returns the workloads of the Go benchmark suite, in report order.
func Suite() []Workload {
	return append([]Workload{
		appendWorkload("append-single", "Append/Single", "append 1 event to one of 1,000 streams", 1, 1, streamsPerWorker, false, false),
		appendWorkload("append-batch10", "Append/Batch10", "append a batch of 10 events to one of 1,000 streams", 1, 10, streamsPerWorker, false, false),
		appendWorkload("append-batch100", "Append/Batch100", "append a batch of 100 events to one of 1,000 streams", 1, 100, streamsPerWorker, false, false),
		appendWorkload("append-metadata", "Append/WithMetadata", "append 1 event with 149 bytes of metadata", 1, 1, streamsPerWorker, true, false),
		appendWorkload("append-expected", "Append/ExpectedVersion", "append 1 event at the exact expected version of its stream", 1, 1, streamsPerWorker, false, true),
		loadWorkload("load-10", "Load/Events10", 10, "10"),
		loadWorkload("load-100", "Load/Events100", 100, "100"),
		loadWorkload("load-1000", "Load/Events1000", 1000, "1,000"),
		appendWorkload("concurrent-8", "Concurrent/Workers8", "each writer appends 1 event to one of its own 1,000 streams", 8, 1, streamsPerWorker, false, false),
		appendWorkload("concurrent-32", "Concurrent/Workers32", "each writer appends 1 event to one of its own 1,000 streams", 32, 1, streamsPerWorker, false, false),
		mixedWorkload("mixed-80r20w", "Mixed/Read80Write20", 80),
		mixedWorkload("mixed-20r80w", "Mixed/Read20Write80", 20),
		{
			Name: "stream-info", Bench: "Stream/Info", About: "StreamInfo of one of 100 streams",
			Workers: 1, Unit: Ops, Setup: streamInfoSetup,
		},
		{
			Name: "last-position", Bench: "Stream/LastPosition", About: "LastPosition of a log of 1,000 events",
			Workers: 1, Unit: Ops, Setup: lastPositionSetup,
		},
	}, filterWorkloads(false)...)
}

// Scale returns the scale workloads, after seed 000's scale table.
func Scale() []Workload {
	ws := []Workload{
		appendWorkload("scale-append", "SequentialAppend", "append 1 event to a single stream that grows to the whole budget", 1, 1, 1, false, false),
		appendWorkload("scale-batch100", "BatchAppend100", "append batches of 100 events to one of 1,000 streams", 1, 100, streamsPerWorker, false, false),
		appendWorkload("scale-concurrent8", "ConcurrentAppend8", "each writer appends 1 event to a stream of its own", 8, 1, 1, false, false),
		{
			Name: "scale-load", Bench: "LoadFullStream",
			About:   "read a whole stream of a tenth of the budget (at most 100,000 events)",
			Workers: 1, Unit: Events, Setup: scaleLoadSetup,
		},
		appendWorkload("scale-streams1000", "ManyStreams1000", "append 1 event to 1,000 streams in turn", 1, 1, streamsPerWorker, false, false),
	}
	ws = append(ws, filterWorkloads(true)...)
	for i := range ws {
		ws[i].Scale = true
	}
	return ws
}

// All returns every workload: the suite, the command, storage and scale
// workloads.
func All() []Workload {
	return slices.Concat(Suite(), Commands(), Storage(), Scale())
}

// Select resolves workload names and the groups "suite", "commands",
// "storage", "scale" and "all"
// into workloads, in report order and without repeats. No names selects the
// suite.
func Select(names []string) ([]Workload, error) {
	if len(names) == 0 {
		return Suite(), nil
	}
	want := map[string]bool{}
	for _, n := range names {
		switch n {
		case "suite", "commands", "storage", "scale", "all":
			for _, w := range groups()[n] {
				want[w.Name] = true
			}
			continue
		}
		if !slices.ContainsFunc(All(), func(w Workload) bool { return w.Name == n }) {
			return nil, fmt.Errorf("workload %q: not one of %v or the groups suite, commands, storage, scale, all: %w", n, Names(), varve.ErrInvalidArgument)
		}
		want[n] = true
	}
	var out []Workload
	for _, w := range All() {
		if want[w.Name] {
			out = append(out, w)
		}
	}
	return out, nil
}

func groups() map[string][]Workload {
	return map[string][]Workload{"suite": Suite(), "commands": Commands(), "storage": Storage(), "scale": Scale(), "all": All()}
}

// Names returns the names of all workloads.
func Names() []string {
	var out []string
	for _, w := range All() {
		out = append(out, w.Name)
	}
	return out
}

// appendWorkload appends batch events per op; each worker rotates over
// streams streams of its own.
func appendWorkload(name, bench, about string, workers, batch, streams int, meta, exact bool) Workload {
	return Workload{
		Name: name, Bench: bench, About: about, Workers: workers, Unit: Events,
		Setup: func(_ context.Context, s *varve.Store, p Params) (Prepared, error) {
			return Prepared{PerOp: batch, NewOp: func(w int) Op {
				return appendOp(s, streamNames(p.Prefix+"w"+strconv.Itoa(w)+"-", streams), Payload, batch, meta, exact)
			}}, nil
		},
	}
}

func appendOp(s *varve.Store, names []string, data []byte, batch int, meta, exact bool) Op {
	evs := make([]varve.Event, batch)
	for i := range evs {
		evs[i] = varve.Event{Type: "OrderPlaced", Data: data}
		if meta {
			evs[i].Metadata = Metadata
		}
	}
	var versions []varve.Version
	if exact {
		versions = make([]varve.Version, len(names))
	}
	next := 0
	return func(ctx context.Context) (int, error) {
		k := next
		if next++; next == len(names) {
			next = 0
		}
		for i := range evs {
			evs[i].ID = uuid.Nil
		}
		exp := varve.Any
		if exact {
			exp = varve.Exact(versions[k])
		}
		res, err := s.Append(ctx, names[k], exp, evs...)
		if err != nil {
			return 0, err
		}
		if exact {
			versions[k] = res.LastVersion
		}
		return batch, nil
	}
}

func streamNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = prefix + "s" + strconv.Itoa(i)
	}
	return names
}

// fill writes n events to stream in batches.
func fill(ctx context.Context, s *varve.Store, stream string, n int) error {
	evs := make([]varve.Event, min(n, writeBatch))
	for done := 0; done < n; {
		k := min(n-done, len(evs))
		for i := range evs[:k] {
			evs[i] = varve.Event{Type: "OrderPlaced", Data: Payload}
		}
		if _, err := s.Append(ctx, stream, varve.Any, evs[:k]...); err != nil {
			return fmt.Errorf("fill %q with %d events: %w", stream, n, err)
		}
		done += k
	}
	return nil
}

// readAll reads a whole stream and checks its length.
func readAll(ctx context.Context, s *varve.Store, stream string, want int) (int, error) {
	n := 0
	for _, err := range s.ReadStream(ctx, stream) {
		if err != nil {
			return n, err
		}
		n++
	}
	if n != want {
		return n, fmt.Errorf("read %d events of %q, want %d", n, stream, want)
	}
	return n, nil
}

func loadWorkload(name, bench string, n int, count string) Workload {
	return Workload{
		Name: name, Bench: bench, About: "read a whole stream of " + count + " events",
		Workers: 1, Unit: Events,
		Setup: func(ctx context.Context, s *varve.Store, p Params) (Prepared, error) {
			return loadSetup(ctx, s, p.Prefix+"load", n)
		},
	}
}

func loadSetup(ctx context.Context, s *varve.Store, stream string, n int) (Prepared, error) {
	if err := fill(ctx, s, stream, n); err != nil {
		return Prepared{}, err
	}
	return Prepared{PerOp: n, NewOp: func(int) Op {
		return func(ctx context.Context) (int, error) { return readAll(ctx, s, stream, n) }
	}}, nil
}

// scaleLoadLength is the length of the stream scale-load reads for a budget.
func scaleLoadLength(budget int) int { return min(max(budget/10, 1), 100_000) }

func scaleLoadSetup(ctx context.Context, s *varve.Store, p Params) (Prepared, error) {
	return loadSetup(ctx, s, p.Prefix+"load", scaleLoadLength(p.Events))
}

// seed writes the streams the mixed and stream workloads read.
func seed(ctx context.Context, s *varve.Store, prefix string) ([]string, error) {
	names := streamNames(prefix+"seed-", seedStreams)
	for _, n := range names {
		if err := fill(ctx, s, n, seedEvents); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func mixedWorkload(name, bench string, readPct int) Workload {
	return Workload{
		Name: name, Bench: bench,
		About:   fmt.Sprintf("%d%% of ops read one of 100 streams of 10 events, %d%% append 1 event", readPct, 100-readPct),
		Workers: 8, Unit: Ops,
		Setup: func(ctx context.Context, s *varve.Store, p Params) (Prepared, error) {
			read, err := seed(ctx, s, p.Prefix)
			if err != nil {
				return Prepared{}, err
			}
			return Prepared{PerOp: 1, NewOp: func(w int) Op {
				rng := rand.New(rand.NewPCG(uint64(readPct), uint64(w)))
				write := appendOp(s, streamNames(p.Prefix+"w"+strconv.Itoa(w)+"-", streamsPerWorker), Payload, 1, false, false)
				return func(ctx context.Context) (int, error) {
					if rng.IntN(100) < readPct {
						return readAll(ctx, s, read[rng.IntN(len(read))], seedEvents)
					}
					return write(ctx)
				}
			}}, nil
		},
	}
}

func streamInfoSetup(ctx context.Context, s *varve.Store, p Params) (Prepared, error) {
	names, err := seed(ctx, s, p.Prefix)
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{PerOp: 1, NewOp: func(int) Op {
		next := 0
		return func(ctx context.Context) (int, error) {
			info, err := s.StreamInfo(ctx, names[next])
			if err != nil {
				return 0, err
			}
			if info.Version != seedEvents {
				return 0, fmt.Errorf("stream %q at version %d, want %d", names[next], info.Version, seedEvents)
			}
			next = (next + 1) % len(names)
			return 0, nil
		}
	}}, nil
}

func lastPositionSetup(ctx context.Context, s *varve.Store, p Params) (Prepared, error) {
	if _, err := seed(ctx, s, p.Prefix); err != nil {
		return Prepared{}, err
	}
	return Prepared{PerOp: 1, NewOp: func(int) Op {
		return func(ctx context.Context) (int, error) {
			pos, err := s.LastPosition(ctx)
			if err != nil {
				return 0, err
			}
			if pos.IsZero() {
				return 0, fmt.Errorf("last position is the start of a log of %d events", seedStreams*seedEvents)
			}
			return 0, nil
		}
	}}, nil
}
