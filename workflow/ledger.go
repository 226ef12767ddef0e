package workflow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// ledger is what the engine's records in an instance stream say, folded
// in the stream's order: Load and Inspect both read an instance through
// it. State events are the caller's.
type ledger struct {
	stream    string
	version   varve.Version
	inputs    map[uuid.UUID]bool
	handled   int       // inbox records
	lastInput time.Time // of the last inbox record
	pending   map[string]time.Time
	out       []Command // Instance left empty
	sent      map[uuid.UUID]bool
	// failed holds the inputs that failed and are not handled since, with
	// when; lastFailed is the input of the newest failure record.
	failed     map[uuid.UUID]failure
	lastFailed uuid.UUID
	retries    map[uuid.UUID]int
	cancelled  bool
	reason     string
}

type failure struct {
	rec failedRec
	at  time.Time
}

func newLedger(stream string) *ledger {
	return &ledger{stream: stream, inputs: map[uuid.UUID]bool{}, pending: map[string]time.Time{}, sent: map[uuid.UUID]bool{},
		failed: map[uuid.UUID]failure{}, retries: map[uuid.UUID]int{}}
}

// add folds e into the ledger; it reports false for a state event, which
// it leaves to the caller.
func (l *ledger) add(e *varve.RecordedEvent) (bool, error) {
	l.version = e.Version
	var err error
	switch e.Type {
	case TypeInbox:
		var rec inboxRec
		if err = json.Unmarshal(e.Data, &rec); err == nil {
			l.inputs[rec.Input] = true
			l.handled++
			l.lastInput = e.RecordedAt
			delete(l.failed, rec.Input)
			delete(l.pending, rec.Timer)
		}
	case TypeFailed, TypeRetryRequested:
		var rec failedRec
		if err = json.Unmarshal(e.Data, &rec); err == nil {
			switch {
			case l.inputs[rec.Input]:
			case e.Type == TypeFailed:
				l.failed[rec.Input] = failure{rec: rec, at: e.RecordedAt}
				l.lastFailed = rec.Input
			default:
				l.retries[rec.Input]++
			}
		}
	case TypeCancelled:
		var rec cancelRec
		if err = json.Unmarshal(e.Data, &rec); err == nil {
			l.cancelled, l.reason = true, rec.Reason
		}
	case TypeOutbox, TypeSent:
		var rec outboxRec
		if err = json.Unmarshal(e.Data, &rec); err == nil {
			if e.Type == TypeOutbox {
				l.out = append(l.out, Command{ID: rec.ID, Type: rec.Type, Data: rec.Data})
			} else {
				l.sent[rec.ID] = true
			}
		}
	case TypeTimer, TypeTimerCancel:
		var rec timerRec
		if err = json.Unmarshal(e.Data, &rec); err == nil {
			if e.Type == TypeTimer {
				l.pending[rec.ID] = rec.Due
			} else {
				delete(l.pending, rec.ID)
			}
		}
	default:
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("workflow: %s@%d: %w", l.stream, e.Version, err)
	}
	return true, nil
}

// done ends the fold: a cancelled instance has no pending timer.
func (l *ledger) done() {
	if l.cancelled {
		clear(l.pending)
	}
}

// unsent returns the commands not recorded as sent, of instance; none
// for a cancelled instance.
func (l *ledger) unsent(instance string) []Command {
	if l.cancelled {
		return nil
	}
	var out []Command
	for _, c := range l.out {
		if !l.sent[c.ID] {
			c.Instance = instance
			out = append(out, c)
		}
	}
	return out
}

// lastError is the newest failure whose input is not handled since.
func (l *ledger) lastError() *Failure {
	f, ok := l.failed[l.lastFailed]
	if !ok {
		return nil
	}
	return &Failure{Input: f.rec.Input, Type: f.rec.Type, Timer: f.rec.Timer, Error: f.rec.Error, At: f.at}
}
