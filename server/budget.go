package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"golang.org/x/sync/semaphore"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

// budget is the server's byte budget (Config.MaxReadBytes): the event data
// and metadata that all responses hold at once. A response takes its share
// before it reads and gives it back as it writes; FIFO, so a large share
// is not starved by small ones.
type budget struct {
	sem  *semaphore.Weighted
	size int64
}

func newBudget(size int) *budget {
	return &budget{sem: semaphore.NewWeighted(int64(size)), size: int64(size)}
}

// hold is the share of the budget a response holds.
type hold struct {
	b *budget
	n int64
}

// take waits until n bytes of the budget are free and holds them; a share
// larger than the whole budget takes all of it. It fails with ctx's error,
// or a 503 when the request's deadline passes while it waits.
func (b *budget) take(ctx context.Context, n int) (*hold, error) {
	want := min(int64(max(n, 0)), b.size)
	if err := b.sem.Acquire(ctx, want); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &apiError{status: http.StatusServiceUnavailable, code: "busy",
				msg: "the server's read budget (MaxReadBytes) stayed in use by other responses for the request's time: try again"}
		}
		return nil, err
	}
	return &hold{b: b, n: want}, nil
}

// keep gives back what h holds over n bytes.
func (h *hold) keep(n int) { h.free(h.n - int64(max(n, 0))) }

// free gives back n bytes of h, at most what it holds.
func (h *hold) free(n int64) {
	n = min(n, h.n)
	if n <= 0 {
		return
	}
	h.n -= n
	h.b.sem.Release(n)
}

// done gives back all of h.
func (h *hold) done() { h.free(h.n) }

func pageBytes(evs []varve.RecordedEvent) int {
	n := 0
	for i := range evs {
		n += evs[i].Size()
	}
	return n
}

// pageHold is the share a page read takes before it reads: the most a page
// of at most limit bytes can hold, since its last event may cross the limit
// by up to the store's largest event.
func (s *Server) pageHold() int {
	return s.cfg.MaxPageBytes + s.store.Config().MaxEventSize
}

// lagHold is the share a count of lags takes: one page of [Lag] at a time.
func (s *Server) lagHold() int {
	return subscription.LagPageBytes + s.store.Config().MaxEventSize
}

// eventEncoder writes events as JSON, one at a time, each followed by a
// newline. It does not escape HTML: no response is HTML, and escaping could
// make an event's JSON up to six times its size.
func eventEncoder(w *bufio.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// writePage answers 200 with the JSON object {"events": [...], rest...}:
// the events are encoded one at a time, and each gives its bytes back to h
// (and its slot of evs is cleared) once written, so that a response never
// holds its page twice, as events and as JSON, and a slow client holds only
// what it has not read yet. rest holds the other members. The write may
// last until the request's deadline.
func writePage(w http.ResponseWriter, r *http.Request, evs []varve.RecordedEvent, h *hold, rest map[string]any) error {
	end, err := json.Marshal(rest)
	if err != nil {
		return err
	}
	if dl, ok := r.Context().Deadline(); ok {
		if err := http.NewResponseController(w).SetWriteDeadline(dl); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	out := bufio.NewWriterSize(w, 32<<10)
	enc := eventEncoder(out)
	_, _ = out.WriteString(`{"events":[`)
	for i := range evs {
		if i > 0 {
			_ = out.WriteByte(',')
		}
		if err := enc.Encode(EventOf(evs[i])); err != nil {
			return err
		}
		h.free(int64(evs[i].Size()))
		evs[i] = varve.RecordedEvent{}
	}
	_ = out.WriteByte(']')
	if len(end) > 2 {
		_ = out.WriteByte(',')
		_, _ = out.Write(end[1:])
	} else {
		_ = out.WriteByte('}')
	}
	_ = out.WriteByte('\n')
	return out.Flush()
}
