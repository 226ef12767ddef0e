package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// The events a search reads, newest first: by default, and at most.
const (
	defaultSearchScan = 10_000
	maxSearchScan     = 1_000_000
	maxCorrelationLen = 256
)

// searchEvents finds events by id or by the correlation id of their
// metadata ("correlation_id", as package aggregate writes it). No backend
// indexes either, so it reads $all backward from before (default the
// end), at most scan events, and answers the matches (at most limit, and
// no more than a page's bytes) with next, the position to go on before,
// and end, whether it read down to the start of the log. The category,
// type and stream_prefix filter narrows what matches, not what is read.
func (s *Server) searchEvents(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "id", "correlation_id", "before", "scan", "limit", "system", "category", "type", "stream_prefix")
	if err != nil {
		return err
	}
	match, err := searchMatch(q.Get("id"), q.Get("correlation_id"))
	if err != nil {
		return err
	}
	limit, err := intParam(q, "limit", 20, 1, MaxPageLimit)
	if err != nil {
		return err
	}
	scan, err := intParam(q, "scan", defaultSearchScan, 1, maxSearchScan)
	if err != nil {
		return err
	}
	system, err := boolParam(q, "system")
	if err != nil {
		return err
	}
	at, err := beforeParam(q)
	if err != nil {
		return err
	}
	filter := filterParam(q)
	sep := s.store.Config().CategorySeparator
	// One raw page at a time, and the matches kept: two pages' share.
	h, err := s.budget.take(r.Context(), 2*s.pageHold())
	if err != nil {
		return err
	}
	defer h.done()
	var found []varve.RecordedEvent
	scanned, kept, end := 0, 0, false
	buf := make([]varve.RecordedEvent, 0, tailPage)
	for scanned < scan && len(found) < limit && kept < s.cfg.MaxPageBytes && !end {
		page, err := s.store.ReadAllPage(r.Context(), at, buf[:0], varve.ReadBackward(),
			varve.PageSize(min(tailPage, scan-scanned)), varve.PageBytes(s.cfg.MaxPageBytes))
		if err != nil {
			return err
		}
		end = !page.Full
		for i := range page.Events {
			e := &page.Events[i]
			scanned++
			at = e.Position
			if (system || !strings.HasPrefix(e.Stream, varve.SystemPrefix)) && filter.Match(e, sep) && match(e) {
				found = append(found, *e)
				kept += e.Size()
				if len(found) == limit || kept >= s.cfg.MaxPageBytes {
					end = end && i == len(page.Events)-1
					break
				}
			}
		}
		clear(page.Events)
	}
	h.keep(kept)
	var next any
	if !end {
		next = at
	}
	return writePage(w, r, found, h, map[string]any{"next": next, "end": end, "scanned": scanned})
}

// searchMatch is the test of a search: an event id, or a correlation id.
func searchMatch(id, correlation string) (func(*varve.RecordedEvent) bool, error) {
	switch {
	case (id == "") == (correlation == ""):
		return nil, badRequest("give one of id (an event id) and correlation_id")
	case id != "":
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, badRequest("parameter id=%q: want an event id (a UUID)", id)
		}
		return func(e *varve.RecordedEvent) bool { return e.ID == u }, nil
	case len(correlation) > maxCorrelationLen:
		return nil, badRequest("parameter correlation_id: longer than %d bytes", maxCorrelationLen)
	}
	needle := []byte(correlation)
	return func(e *varve.RecordedEvent) bool {
		if !bytes.Contains(e.Metadata, needle) {
			return false
		}
		var m struct {
			CorrelationID string `json:"correlation_id"`
		}
		return json.Unmarshal(e.Metadata, &m) == nil && m.CorrelationID == correlation
	}, nil
}
