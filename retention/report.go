package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/varve-go/varve"
)

// Bounds of a report's lists.
const (
	MaxReportTruncations = 100
	MaxReportProblems    = 10
	maxProblemLen        = 500
)

// Report is what one pass of a [Scavenger] did, kept as a [RunType] event
// of [RunsStream].
type Report struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Holder is the scavenger's Config.Holder.
	Holder string `json:"holder"`
	// Rules is the number of policies the pass applied.
	Rules int `json:"rules"`
	// Streams is the number of streams with a policy the pass looked at;
	// Truncated of them it truncated, removing Removed events.
	Streams   int   `json:"streams"`
	Truncated int   `json:"truncated"`
	Removed   int64 `json:"removed"`
	// Truncations are the first MaxReportTruncations truncations, by
	// stream.
	Truncations []Truncation `json:"truncations,omitempty"`
	// ReadBytes is the event data and metadata read to find age cuts.
	ReadBytes int64 `json:"read_bytes"`
	// Reclaimed is the bytes the backend gave back to the file system
	// ([SpaceReclaimer]); 0 where it does not say.
	Reclaimed int64 `json:"reclaimed"`
	// Incomplete: the pass stopped before it was done, its budget spent
	// (Config.MaxRemove, Config.MaxReadBytes) or its lease lost; the next
	// pass goes on.
	Incomplete bool `json:"incomplete"`
	// Errors counts the streams and targets the pass failed on; Problems
	// are the first MaxReportProblems errors' texts.
	Errors   int      `json:"errors"`
	Problems []string `json:"problems,omitempty"`
	// Position is where the report was recorded in $all; zero for a
	// report that was not recorded.
	Position varve.Position `json:"position"`
}

// Truncation is one stream's truncation in a pass: the events below
// Before are gone, Removed of them by this pass.
type Truncation struct {
	Stream  string        `json:"stream"`
	Before  varve.Version `json:"before"`
	Removed int64         `json:"removed"`
}

// problem counts err in the report and keeps its text while there is
// room.
func (r *Report) problem(err error) {
	r.Errors++
	if len(r.Problems) < MaxReportProblems {
		text := err.Error()
		if len(text) > maxProblemLen {
			text = text[:maxProblemLen] + "…"
		}
		r.Problems = append(r.Problems, text)
	}
}

// LastReport returns the report of the last pass recorded in store; ok is
// false when no pass was.
func LastReport(ctx context.Context, store *varve.Store) (r Report, ok bool, err error) {
	for e, err := range store.ReadStream(ctx, RunsStream, varve.ReadBackward(), varve.Limit(1)) {
		if errors.Is(err, varve.ErrStreamNotFound) {
			break
		}
		if err != nil {
			return Report{}, false, fmt.Errorf("retention: read the last report: %w", err)
		}
		r, err := ParseReport(e)
		if err != nil {
			return Report{}, false, fmt.Errorf("retention: read the last report: %w", err)
		}
		return r, true, nil
	}
	return Report{}, false, nil
}

// ParseReport returns the report of a RunType event of RunsStream.
func ParseReport(e varve.RecordedEvent) (Report, error) {
	var r Report
	if e.Stream != RunsStream || e.Type != RunType {
		return r, fmt.Errorf("%w: %s@%d (%s) is not a report of %s", varve.ErrInvalidArgument, e.Stream, e.Version, e.Type, RunsStream)
	}
	if err := json.Unmarshal(e.Data, &r); err != nil {
		return r, fmt.Errorf("%s@%d: %w", e.Stream, e.Version, err)
	}
	r.Position = e.Position
	return r, nil
}
