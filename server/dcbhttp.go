package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/varve-go/varve"
)

// The dcb.events HTTP interface, in the shapes of the default adapter of
// the DCB community's test suite (libraries/benchmark in the dcb-events
// repository): GET {base}/read?query=<json>&options=<json> answers a JSON
// array of {type, tags, data, position}; POST {base}/append with {events,
// condition: {failIfEventsMatch, after}} answers {durationInMicroseconds,
// appendConditionFailed}. The base is /api/v1/dcb. Positions are JSON
// numbers, so the interface needs a backend that numbers its positions
// (varve.PositionNumbers: memory, SQLite, PostgreSQL; docs/server.md); event
// data is a string, stored as its bytes; the events of system streams are
// left out. The suite's adapter sends no bearer token: give it one as a
// URL's password (Basic authentication),
// BASE_URI=http://varve:<token>@host:port/api/v1/dcb.

// dcbShards spreads the interface's appends over this many streams
// ("dcb-0" ...), so that unrelated writers do not queue on one stream.
const dcbShards = 16

// dcbQueryJSON is a query of the interface: {"items": [{"types", "tags"}]}.
type dcbQueryJSON struct {
	Items []struct {
		Types []string `json:"types"`
		Tags  []string `json:"tags"`
	} `json:"items"`
}

func (q dcbQueryJSON) query() varve.Query {
	var out varve.Query
	for _, it := range q.Items {
		out.Items = append(out.Items, varve.QueryItem{Types: it.Types, Tags: it.Tags})
	}
	return out
}

// dcbPositions refuses the interface on a store without tags or without
// position numbers: its positions would not fit a JSON number.
func (s *Server) dcbPositions() error {
	c := s.store.Capabilities()
	if !c.Tags {
		return &apiError{status: http.StatusNotImplemented, code: "not_supported", msg: "the store keeps no tags: the DCB interface needs a backend with dynamic consistency boundaries"}
	}
	if !c.PositionNumbers {
		return &apiError{status: http.StatusNotImplemented, code: "not_supported",
			msg: fmt.Sprintf("the DCB interface's positions are JSON numbers, and %s does not number its positions", s.store.Features().Name)}
	}
	return nil
}

// successor returns the position right after p: the events before it are
// those at or before p.
func successor(p varve.Position) varve.Position {
	if p.Seq == math.MaxUint64 {
		return varve.Position{Commit: p.Commit + 1}
	}
	return varve.Position{Commit: p.Commit, Seq: p.Seq + 1}
}

func (s *Server) dcbRead(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "query", "options")
	if err != nil {
		return err
	}
	if err := s.dcbPositions(); err != nil {
		return err
	}
	var query dcbQueryJSON
	if v := q.Get("query"); v != "" {
		if err := strictJSON(v, &query); err != nil {
			return badRequest("parameter query: %v", err)
		}
	}
	var opts struct {
		From      *uint64 `json:"from"`
		Limit     *int    `json:"limit"`
		Backwards bool    `json:"backwards"`
	}
	if v := q.Get("options"); v != "" {
		if err := strictJSON(v, &opts); err != nil {
			return badRequest("parameter options: %v", err)
		}
	}
	limit := -1
	if opts.Limit != nil {
		if *opts.Limit < 0 {
			return badRequest("options.limit: negative")
		}
		limit = *opts.Limit
	}
	vq := query.query()
	if err := vq.Check(); err != nil {
		return badRequest("parameter query: %v", err)
	}
	// from is inclusive: forward reads go on after the position of the
	// number before it, backward ones before the position after its own.
	at := varve.Start
	if opts.From != nil && (opts.Backwards || *opts.From > 0) {
		n := *opts.From
		if !opts.Backwards {
			n--
		}
		p, err := s.store.PositionOfNumber(r.Context(), n)
		if err != nil {
			return fmt.Errorf("options.from: %w", err)
		}
		at = p
		if opts.Backwards {
			at = successor(p)
		}
	}
	size := tailPage
	if !opts.Backwards && limit > 0 && limit < size {
		size = limit
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	out := bufio.NewWriterSize(w, 32<<10)
	_ = out.WriteByte('[')
	n := 0
	var last uint64 // the number of the last event written
	buf := make([]varve.RecordedEvent, 0, size)
	var pick []int
	var ps []varve.Position
	for limit != 0 {
		h, err := s.budget.take(r.Context(), s.pageHold())
		if err != nil {
			panic(http.ErrAbortHandler) // the answer has begun: cut it rather than end it as if complete
		}
		var page varve.AllPage
		if opts.Backwards {
			page, err = s.store.ReadAllPage(r.Context(), at, buf[:0], varve.ReadBackward(), varve.PageSize(size), varve.PageBytes(s.cfg.MaxPageBytes))
		} else {
			page, err = s.store.ReadQueryPage(r.Context(), vq, at, buf[:0], varve.PageSize(size), varve.PageBytes(s.cfg.MaxPageBytes))
		}
		if err != nil {
			h.done()
			s.log.Warn("dcb read failed", "err", err.Error())
			panic(http.ErrAbortHandler)
		}
		pick = pick[:0]
		for i := range page.Events {
			e := &page.Events[i]
			if !strings.HasPrefix(e.Stream, varve.SystemPrefix) && (!opts.Backwards || vq.Match(e)) {
				pick = append(pick, i)
			}
		}
		// The events are numbered a batch at a time, as many as the limit
		// leaves (usually one batch a page). An event removed since the
		// page was read may share the number of the one before it in the
		// log (see docs/server.md): it is left out, so that the numbers
		// written go strictly one way.
		for len(pick) > 0 && limit != 0 {
			k := len(pick)
			if limit > 0 {
				k = min(k, limit)
			}
			ps = ps[:0]
			for _, i := range pick[:k] {
				ps = append(ps, page.Events[i].Position)
			}
			nums, err := s.store.NumberPositions(r.Context(), ps)
			if err != nil {
				h.done()
				s.log.Warn("dcb read failed", "err", err.Error())
				panic(http.ErrAbortHandler)
			}
			for j, i := range pick[:k] {
				if n > 0 && (opts.Backwards && nums[j] >= last || !opts.Backwards && nums[j] <= last) ||
					opts.Backwards && j+1 < k && nums[j+1] == nums[j] {
					continue
				}
				e := &page.Events[i]
				if n > 0 {
					_ = out.WriteByte(',')
				}
				b, _ := json.Marshal(struct {
					Type     string   `json:"type"`
					Tags     []string `json:"tags"`
					Data     string   `json:"data"`
					Position uint64   `json:"position"`
				}{e.Type, nonNil(e.Tags), string(e.Data), nums[j]})
				if _, err := out.Write(b); err != nil {
					h.done()
					return nil
				}
				n, last = n+1, nums[j]
				if limit > 0 {
					limit--
				}
			}
			pick = pick[k:]
		}
		clear(page.Events)
		h.done()
		if !page.Full {
			break
		}
		at = page.Through
	}
	_ = out.WriteByte(']')
	_ = out.Flush()
	return nil
}

func nonNil(tags []string) []string {
	if tags == nil {
		return []string{}
	}
	return tags
}

// strictJSON decodes one JSON value of s into dst, refusing unknown fields.
func strictJSON(s string, dst any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

type dcbAppendJSON struct {
	Events []struct {
		Type string          `json:"type"`
		Tags []string        `json:"tags"`
		Data json.RawMessage `json:"data"`
	} `json:"events"`
	Condition *struct {
		FailIfEventsMatch dcbQueryJSON `json:"failIfEventsMatch"`
		After             *uint64      `json:"after"`
	} `json:"condition"`
}

func (s *Server) dcbAppend(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	if err := s.dcbPositions(); err != nil {
		return err
	}
	var body dcbAppendJSON
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if len(body.Events) == 0 {
		return badRequest("events is missing or empty")
	}
	evs := make([]varve.Event, len(body.Events))
	for i, e := range body.Events {
		data := []byte(e.Data)
		var str string
		if json.Unmarshal(e.Data, &str) == nil {
			data = []byte(str)
		}
		evs[i] = varve.Event{ID: varve.NewEventID(), Type: e.Type, Tags: e.Tags, Data: data}
	}
	h := fnv.New32a()
	h.Write(evs[0].ID[:])
	stream := "dcb-" + strconv.Itoa(int(h.Sum32()%dcbShards))
	start := time.Now()
	var err error
	if c := body.Condition; c != nil {
		cond := varve.AppendCondition{FailIfEventsMatch: c.FailIfEventsMatch.query()}
		if c.After != nil {
			if cond.After, err = s.store.PositionOfNumber(r.Context(), *c.After); err != nil {
				return fmt.Errorf("condition.after: %w", err)
			}
		}
		_, err = s.store.AppendIf(r.Context(), stream, varve.Any, cond, evs...)
	} else {
		_, err = s.store.Append(r.Context(), stream, varve.Any, evs...)
	}
	failed := errors.Is(err, varve.ErrAppendConditionFailed)
	if err != nil && !failed {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{
		"durationInMicroseconds": time.Since(start).Microseconds(),
		"appendConditionFailed":  failed,
	})
}
