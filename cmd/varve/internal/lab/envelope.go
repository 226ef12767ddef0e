package lab

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"runtime"
	"strconv"
	"time"

	"github.com/varve-go/varve/cmd/varve/internal/termtext"
)

// SchemaVersion is the version of the JSON envelope; it changes when a
// field changes meaning or goes away.
const SchemaVersion = 1

// Envelope is the one JSON document every command prints with --json. Its
// durations are integers in nanoseconds, in keys that end in _ns.
type Envelope struct {
	SchemaVersion int           `json:"schema_version"`
	Command       string        `json:"command"`
	Varve         string        `json:"varve_version"`
	Started       time.Time     `json:"started"`
	Finished      time.Time     `json:"finished"`
	Elapsed       time.Duration `json:"elapsed_ns"`
	// Interrupted is set when a signal stopped the run: the results are
	// what was measured until then.
	Interrupted bool `json:"interrupted"`
	// ExitCode is the code the process exits with.
	ExitCode int `json:"exit_code"`
	// Config holds the command's settings as they took effect.
	Config any `json:"config"`
	// Stores are the stores the command used, redacted, with the version
	// of their server or engine.
	Stores  []StoreInfo `json:"stores"`
	Machine MachineInfo `json:"machine"`
	// Results are what the command measured, one row per measured thing
	// (or, for parked, one per parked event).
	Results any `json:"results"`
	// Details holds what a command reports beyond its rows (bench's
	// baselines, soak's memory samples and verdict).
	Details any           `json:"details,omitempty"`
	Checks  []CheckResult `json:"checks"`
	// Errors are the errors of the run, in the order they happened.
	Errors []string `json:"errors"`
}

// StoreInfo describes a store of a run.
type StoreInfo struct {
	Name    string `json:"name"`
	URL     string `json:"url"`
	Backend string `json:"backend"`
	// ServerVersion is the version of the server or embedded engine;
	// empty when unknown.
	ServerVersion string `json:"server_version"`
	// Namespace is the schema or stream made for the run, and Kept whether
	// it was left in place.
	Namespace string `json:"namespace,omitempty"`
	Kept      bool   `json:"kept,omitempty"`
}

// Info describes t; version is the server's, when known.
func (t *Target) Info(version string) StoreInfo {
	return StoreInfo{Name: t.Label, URL: t.Display, Backend: t.Backend, ServerVersion: version, Namespace: t.Namespace, Kept: t.Namespace != "" && t.Keep}
}

// Row is one measured thing of a run: a workload on a store, a cell of the
// matrix, a delivery run. Every command reports its rows in this shape, so
// checks and CSV work the same on all of them.
type Row struct {
	Store string `json:"store"`
	// Name says what was measured: "append-single", "50/50 reads x 8
	// workers", "http 10ms x 25 workers".
	Name string `json:"name"`
	// Unit is what Count and Rate count: events, ops, reads, writes,
	// cycles, deliveries, commands.
	Unit    string        `json:"unit"`
	Count   int64         `json:"count"`
	Rate    float64       `json:"rate_per_sec"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Latency Latency       `json:"latency"`
	// Ratio is the command's ratio when it has one: throughput over the
	// baseline (bench, loadtest), efficiency (deliver-bench), the share of
	// the mix's best rate (matrix).
	Ratio  *float64 `json:"ratio,omitempty"`
	Errors int64    `json:"errors"`
	// Stopped says why the measurement ended: budget, duration,
	// interrupted or error.
	Stopped string `json:"stopped"`
	Error   string `json:"error,omitempty"`
	// Detail holds what the command knows beyond the shared fields.
	Detail any `json:"detail,omitempty"`
}

// Label names the row in messages.
func (r Row) Label() string {
	if r.Store == "" {
		return r.Name
	}
	return r.Store + " " + r.Name
}

func ratioPtr(f float64) *float64 { return &f }

// NewEnvelope starts the envelope of a run of command.
func NewEnvelope(command string) *Envelope {
	return &Envelope{SchemaVersion: SchemaVersion, Command: command, Varve: varveVersion(), Started: time.Now(),
		Machine: Machine(), Results: []Row{}, Checks: []CheckResult{}, Errors: []string{}, Stores: []StoreInfo{}}
}

// Finish stamps the end of the run.
func (e *Envelope) Finish() {
	e.Finished = time.Now()
	e.Elapsed = e.Finished.Sub(e.Started)
}

// AddError records an error of the run, scrubbed of secrets.
func (e *Envelope) AddError(err error) {
	if err != nil {
		e.Errors = append(e.Errors, Scrub(err.Error()))
	}
}

// Rows returns the measured rows; nil when the results are not rows.
func (e *Envelope) Rows() []Row {
	rows, _ := e.Results.([]Row)
	return rows
}

// WriteJSON writes the envelope, indented, with the text of stores and
// remote parties exact and safe on a terminal (termtext.JSON).
func (e *Envelope) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(termtext.JSONWriter(w))
	enc.SetIndent("", "  ")
	return enc.Encode(e)
}

// CSVHeader is the header of the CSV of every command's rows.
var CSVHeader = []string{"command", "store", "name", "unit", "count", "rate_per_sec", "elapsed_ns", "ratio", "errors",
	"samples", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns", "few_samples", "stopped", "error"}

// WriteRowsCSV writes rows as CSV with CSVHeader, their text escaped for a
// terminal (termtext.Escape).
func (e *Envelope) WriteRowsCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(CSVHeader)
	for _, r := range rows {
		ratio := ""
		if r.Ratio != nil {
			ratio = strconv.FormatFloat(*r.Ratio, 'g', 6, 64)
		}
		l := r.Latency
		d := func(x time.Duration) string { return strconv.FormatInt(int64(x), 10) }
		esc := termtext.Escape
		_ = cw.Write([]string{esc(e.Command), esc(r.Store), esc(r.Name), esc(r.Unit), strconv.FormatInt(r.Count, 10), strconv.FormatFloat(r.Rate, 'f', 3, 64),
			d(r.Elapsed), ratio, strconv.FormatInt(r.Errors, 10), strconv.FormatInt(l.Samples, 10), d(l.P50), d(l.P90), d(l.P99), d(l.P999),
			d(l.Max), d(l.Mean), strconv.FormatBool(l.FewSamples), esc(r.Stopped), esc(r.Error)})
	}
	cw.Flush()
	return cw.Error()
}

// Machine describes where a run happened.
type MachineInfo struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
}

// Machine returns the current machine's description.
func Machine() MachineInfo {
	return MachineInfo{CPU: cpuModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// ServerVersion returns the version of the server or engine behind a store
// URL: PostgreSQL's server_version, the NATS server's version, the SQLite
// library's; empty for memory or when it cannot be read.
func ServerVersion(ctx context.Context, t *Target) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := serverVersion(ctx, t.Backend, t.URL)
	if err != nil {
		return ""
	}
	return v
}
