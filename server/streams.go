package server

import (
	"net/http"
	"runtime/debug"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// Stream is a stream's info as the API shows it.
type Stream struct {
	Stream       string         `json:"stream"`
	Version      varve.Version  `json:"version"`
	LastPosition varve.Position `json:"last_position"`
	CreatedAt    time.Time      `json:"created_at"`
	UpdatedAt    time.Time      `json:"updated_at"`
	Deleted      bool           `json:"deleted"`
	Tombstoned   bool           `json:"tombstoned"`
	System       bool           `json:"system"`
}

// StreamOf returns i as the API shows it.
func StreamOf(i varve.StreamInfo) Stream {
	return Stream{Stream: i.Stream, Version: i.Version, LastPosition: i.LastPosition, CreatedAt: i.CreatedAt,
		UpdatedAt: i.UpdatedAt, Deleted: i.Deleted, Tombstoned: i.Tombstoned, System: len(i.Stream) > 0 && i.Stream[0] == '$'}
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	last, err := s.store.LastPosition(r.Context())
	if err != nil {
		return err
	}
	f := s.store.Features()
	version := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
			if m.Path == "github.com/varve-go/varve" && m.Version != "" {
				version = m.Version
			}
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{
		"name":          s.cfg.Name,
		"backend":       f.Name,
		"durable":       f.Durable,
		"varve_version": version,
		"last_position": last,
		"writes":        s.cfg.Writes,
		"replay":        s.cfg.Replay != nil,
		"reports":       s.cfg.Reports != nil,
		"capabilities": map[string]bool{
			"list_streams":     s.store.Capabilities().ListStreams,
			"checkpoints":      s.store.Capabilities().Checkpoints,
			"list_checkpoints": s.store.Capabilities().ListCheckpoints,
			"snapshots":        s.store.Capabilities().Snapshots,
			"watch":            s.store.Capabilities().Watch,
		},
		"limits": map[string]any{
			"max_body_bytes":    s.cfg.MaxBodyBytes,
			"max_event_size":    s.store.Config().MaxEventSize,
			"max_append_events": s.store.Config().MaxAppendEvents,
			"max_page":          MaxPageLimit,
			"max_page_bytes":    s.cfg.MaxPageBytes,
			"max_read_bytes":    s.cfg.MaxReadBytes,
		},
	})
}

func (s *Server) listStreams(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "prefix", "after", "limit", "system")
	if err != nil {
		return err
	}
	limit, err := intParam(q, "limit", DefaultPageLimit, 1, MaxPageLimit)
	if err != nil {
		return err
	}
	system, err := boolParam(q, "system")
	if err != nil {
		return err
	}
	page, err := s.store.Streams().List(r.Context(), varve.ListQuery{Prefix: q.Get("prefix"), After: q.Get("after"), Limit: limit}, system)
	if err != nil {
		return err
	}
	out := make([]Stream, len(page.Streams))
	for i, info := range page.Streams {
		out[i] = StreamOf(info)
	}
	var next *string
	if page.Next != "" {
		next = &page.Next
	}
	return writeJSON(w, http.StatusOK, map[string]any{"streams": out, "next": next})
}

func (s *Server) streamInfo(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, waitParams...)
	if err != nil {
		return err
	}
	if err := s.awaitPosition(r, q, s.store.WaitFor); err != nil {
		return err
	}
	info, err := s.store.StreamInfo(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, StreamOf(info))
}

func (s *Server) readStream(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "from", "direction", "limit", "min_position", "wait")
	if err != nil {
		return err
	}
	if err := s.awaitPosition(r, q, s.store.WaitFor); err != nil {
		return err
	}
	limit, err := intParam(q, "limit", DefaultPageLimit, 1, MaxPageLimit)
	if err != nil {
		return err
	}
	// One backend page of limit events: a second would take a budget of its
	// own past the page's share.
	opts := []varve.StreamOption{varve.Limit(limit), varve.PageSize(limit)}
	backward := false
	switch d := q.Get("direction"); d {
	case "", "forward":
	case "backward":
		backward = true
		opts = append(opts, varve.ReadBackward())
	default:
		return badRequest("parameter direction=%q: want forward or backward", d)
	}
	if from := q.Get("from"); from != "" {
		v, err := intParam(q, "from", 0, 1, int(^uint(0)>>1))
		if err != nil {
			return err
		}
		opts = append(opts, varve.From(varve.Version(v)))
	}
	opts = append(opts, varve.PageBytes(s.cfg.MaxPageBytes))
	stream := r.PathValue("id")
	h, err := s.budget.take(r.Context(), s.pageHold())
	if err != nil {
		return err
	}
	defer h.done()
	// The page ends at its limit or at the event that takes it to
	// MaxPageBytes, as a page of the store does: the store's read then
	// returns the page it read and fetches no other.
	var evs []varve.RecordedEvent
	size, full := 0, false
	for e, err := range s.store.ReadStream(r.Context(), stream, opts...) {
		if err != nil {
			return err
		}
		evs = append(evs, e)
		if size += e.Size(); size >= s.cfg.MaxPageBytes {
			full = true
			break
		}
	}
	h.keep(size)
	// The page is full: the next one starts after its last event.
	var next *varve.Version
	if n := len(evs); n > 0 && (full || n == limit) {
		v := evs[n-1].Version + 1
		if backward {
			v = evs[n-1].Version - 1
		}
		if v > 0 {
			next = &v
		}
	}
	return writePage(w, r, evs, h, map[string]any{"stream": stream, "next": next, "more": next != nil})
}

type appendJSON struct {
	Expected expectedJSON   `json:"expected_version"`
	Events   []newEventJSON `json:"events"`
}

func (s *Server) appendEvents(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	var body appendJSON
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if !body.Expected.set {
		return badRequest(`expected_version is missing: "any", "no-stream", "stream-exists" or a version number`)
	}
	if len(body.Events) == 0 {
		return badRequest("events is missing or empty")
	}
	evs := make([]varve.Event, len(body.Events))
	for i, n := range body.Events {
		e, err := n.event(i)
		if err != nil {
			return err
		}
		evs[i] = e
	}
	res, err := s.store.Append(r.Context(), r.PathValue("id"), body.Expected.v, evs...)
	if err != nil {
		return err
	}
	w.Header().Set(positionHeader, res.Position.String())
	ids := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return writeJSON(w, http.StatusCreated, map[string]any{
		"first_version": res.FirstVersion,
		"last_version":  res.LastVersion,
		"position":      res.Position,
		"ids":           ids,
	})
}
