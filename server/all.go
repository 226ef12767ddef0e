package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/varve-go/varve"
)

// readAll answers a page of $all: forward after a position (default the
// start), or with direction=backward newest first before a position
// (default the end). next is where the following page starts (after it,
// or before it backward); end says that the page reached the end (the
// start, backward) of what is readable now.
func (s *Server) readAll(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "after", "before", "direction", "limit", "system", "category", "type", "stream_prefix", "min_position", "wait")
	if err != nil {
		return err
	}
	if err := s.awaitPosition(r, q, s.store.WaitFor); err != nil {
		return err
	}
	backward, err := directionParam(q)
	if err != nil {
		return err
	}
	filter := filterParam(q)
	limit, err := intParam(q, "limit", DefaultPageLimit, 1, MaxPageLimit)
	if err != nil {
		return err
	}
	system, err := boolParam(q, "system")
	if err != nil {
		return err
	}
	opts := []varve.AllOption{filter, varve.PageSize(limit), varve.PageBytes(s.cfg.MaxPageBytes)}
	var at varve.Position
	if backward {
		at, err = beforeParam(q)
		opts = append(opts, varve.ReadBackward())
	} else {
		at, err = positionParam(q, "after", varve.Start, func() (varve.Position, error) { return s.store.LastPosition(r.Context()) })
	}
	if err != nil {
		return err
	}
	h, err := s.budget.take(r.Context(), s.pageHold())
	if err != nil {
		return err
	}
	defer h.done()
	page, err := s.store.ReadAllPage(r.Context(), at, nil, opts...)
	if err != nil {
		return err
	}
	h.keep(pageBytes(page.Events))
	if !system {
		page.Events = dropSystem(page.Events, h)
	}
	return writePage(w, r, page.Events, h, map[string]any{"through": page.Through, "next": page.Through, "more": page.Full, "end": !page.Full})
}

// directionParam reads direction (forward, the default, or backward) and
// refuses the position parameter of the other direction.
func directionParam(q url.Values) (backward bool, err error) {
	switch d := q.Get("direction"); d {
	case "", "forward":
		if q.Has("before") {
			return false, badRequest("parameter before goes with direction=backward (forward pages start after a position: after)")
		}
		return false, nil
	case "backward":
		if q.Has("after") {
			return false, badRequest("parameter after goes with direction=forward (backward pages start before a position: before)")
		}
		return true, nil
	default:
		return false, badRequest(`parameter direction=%q: want "forward" or "backward"`, d)
	}
}

// beforeParam is where a backward read starts: before a position, or at
// the end of the log ("end" or no parameter: varve.Start, which a backward
// read takes as the end).
func beforeParam(q url.Values) (varve.Position, error) {
	v := q.Get("before")
	if v == "" || v == "end" {
		return varve.Start, nil
	}
	p, err := varve.ParsePosition(v)
	if err != nil || p.IsZero() {
		return p, badRequest(`parameter before=%q: want a position after the start ("12" or "7:3") or "end"`, v)
	}
	return p, nil
}

// filterParam is the filter of a read of $all: comma-separated lists of
// categories, event types and stream prefixes (none: every event). The
// store checks it: a bad one fails the read with 400.
func filterParam(q url.Values) varve.Filter {
	list := func(k string) []string {
		if v := q.Get(k); v != "" {
			return strings.Split(v, ",")
		}
		return nil
	}
	return varve.Filter{Categories: list("category"), Types: list("type"), StreamPrefixes: list("stream_prefix")}
}

// dropSystem removes the events of system streams from a page, in place,
// and gives their bytes back to h: the API, like the CLI, shows them only
// when asked (system=true).
func dropSystem(evs []varve.RecordedEvent, h *hold) []varve.RecordedEvent {
	out := evs[:0]
	for i := range evs {
		if strings.HasPrefix(evs[i].Stream, varve.SystemPrefix) {
			h.free(int64(evs[i].Size()))
			continue
		}
		out = append(out, evs[i])
	}
	clear(evs[len(out):])
	return out
}

// tailPage is how many events a live tail reads at a time (fewer when
// they reach Config.MaxPageBytes).
const tailPage = 256

// sendPage writes the events of a page as server-sent events to out, and
// gives each event's bytes back to h (clearing its slot) once written.
func (s *Server) sendPage(out *bufio.Writer, enc *json.Encoder, evs []varve.RecordedEvent, h *hold) (int, error) {
	for i := range evs {
		fmt.Fprintf(out, "id: %s\nevent: event\ndata: ", evs[i].Position)
		if err := enc.Encode(EventOf(evs[i])); err != nil {
			return i, err
		}
		if err := out.WriteByte('\n'); err != nil {
			return i, err
		}
		h.free(int64(evs[i].Size()))
		evs[i] = varve.RecordedEvent{}
	}
	return len(evs), nil
}

// tail follows $all as Server-Sent Events: an "event" event per event of
// the log, whose id is its position, so that a client that reconnects
// with Last-Event-ID resumes after the last event it got, and a comment
// every Config.Heartbeat while nothing happens. It starts after the
// position of the after parameter (default: the end of the log) or of
// Last-Event-ID. Each follower reads $all itself, woken by the store's
// Watch (or polling): the order and completeness of its events are the
// store's guarantee for any reader. A client that stops reading is
// dropped when a write has waited Config.RequestTimeout.
func (s *Server) tail(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "after", "system", "category", "type", "stream_prefix")
	if err != nil {
		return err
	}
	filter := filterParam(q)
	system, err := boolParam(q, "system")
	if err != nil {
		return err
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		q.Set("after", id)
	}
	shuttingDown := &apiError{status: http.StatusServiceUnavailable, code: "shutting_down", msg: "the server is shutting down"}
	if s.life.Err() != nil {
		return shuttingDown
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	startCtx, startCancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer startCancel()
	after, err := positionParam(q, "after", varve.Position{}, func() (varve.Position, error) { return s.store.LastPosition(startCtx) })
	if err == nil && q.Get("after") == "" {
		after, err = s.store.LastPosition(startCtx)
	}
	if s.life.Err() != nil {
		return shuttingDown // a Close during the start cancels its read
	}
	if err != nil {
		return err
	}
	if n := s.followers.Add(1); n > int64(s.cfg.MaxFollowers) {
		s.followers.Add(-1)
		return &apiError{status: http.StatusServiceUnavailable, code: "too_many_followers", msg: fmt.Sprintf("the server already serves %d live tails, its limit", s.cfg.MaxFollowers)}
	}
	defer s.followers.Add(-1)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := bufio.NewWriterSize(w, 32<<10)
	flush := func() error {
		if err := rc.SetWriteDeadline(time.Now().Add(s.cfg.RequestTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	start, _ := json.Marshal(map[string]any{"after": after})
	fmt.Fprintf(out, "retry: 2000\nevent: start\ndata: %s\n\n", start)
	if err := flush(); err != nil {
		return nil
	}
	heartbeat := time.NewTicker(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	var poll *time.Timer
	buf := make([]varve.RecordedEvent, 0, tailPage)
	enc := eventEncoder(out)
	for {
		watch := s.store.Watch()
		held, err := s.budget.take(ctx, s.pageHold())
		if err != nil {
			return nil // the tail ends
		}
		page, err := s.store.ReadAllPage(ctx, after, buf[:0], filter, varve.PageSize(tailPage), varve.PageBytes(s.cfg.MaxPageBytes))
		if err != nil {
			held.done()
			if ctx.Err() == nil {
				e := s.apiErr(r, err)
				msg, _ := json.Marshal(map[string]string{"code": e.code, "message": e.msg})
				fmt.Fprintf(out, "event: error\ndata: %s\n\n", msg)
				_ = flush()
			}
			return nil
		}
		held.keep(pageBytes(page.Events))
		if !system {
			page.Events = dropSystem(page.Events, held)
		}
		sent, err := s.sendPage(out, enc, page.Events, held)
		if err == nil && sent > 0 {
			err = flush()
		}
		held.done()
		if err != nil {
			return nil
		}
		after = page.Through
		if page.Full {
			continue
		}
		var pollC <-chan time.Time
		if watch == nil {
			if poll == nil {
				poll = time.NewTimer(s.cfg.PollInterval)
				defer poll.Stop()
			} else {
				poll.Reset(s.cfg.PollInterval)
			}
			pollC = poll.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-watch:
		case <-pollC:
		case <-heartbeat.C:
			fmt.Fprint(out, ": keep-alive\n\n")
			if err := flush(); err != nil {
				return nil
			}
		}
	}
}
