package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/subscription"
)

func (s *Server) listSubscriptions(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "prefix")
	if err != nil {
		return err
	}
	last, err := s.store.LastPosition(r.Context())
	if err != nil {
		return err
	}
	h, err := s.budget.take(r.Context(), s.lagHold())
	if err != nil {
		return err
	}
	defer h.done()
	list, err := delivery.Consumers(r.Context(), s.store, q.Get("prefix"), s.cfg.LagLimit)
	if err != nil {
		return err
	}
	truncated := len(list) == delivery.MaxConsumers
	list = slices.DeleteFunc(list, func(c delivery.Consumer) bool { return projection.Bookkeeping(c.Name) })
	return writeJSON(w, http.StatusOK, map[string]any{
		"subscriptions": list,
		"last_position": last,
		"truncated":     truncated,
		"lag_limit":     s.cfg.LagLimit,
	})
}

func (s *Server) subscription(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, waitParams...)
	if err != nil {
		return err
	}
	if err := s.awaitPosition(r, q, func(ctx context.Context, pos varve.Position) error {
		return subscription.WaitFor(ctx, s.store, r.PathValue("name"), pos)
	}); err != nil {
		return err
	}
	last, err := s.store.LastPosition(r.Context())
	if err != nil {
		return err
	}
	c, parked, err := s.known(r, true)
	if err != nil {
		return err
	}
	if parked == nil {
		parked = []delivery.ParkedEvent{}
	}
	_, _, byRunner := projection.ParseCheckpointName(c.Name)
	return writeJSON(w, http.StatusOK, map[string]any{
		"subscription":  c,
		"parked_events": parked,
		"last_position": last,
		"lag_limit":     s.cfg.LagLimit,
		// A projection's parked events replay through its runner.
		"replay_by_runner": byRunner,
	})
}

// known inspects the consumer of the request's path, which the store must
// know (404 otherwise); withLag says whether to count its lag.
func (s *Server) known(r *http.Request, withLag bool) (delivery.Consumer, []delivery.ParkedEvent, error) {
	name := r.PathValue("name")
	if err := varve.CheckName(name); err != nil {
		return delivery.Consumer{}, nil, badRequest("subscription name %q: %v", name, err)
	}
	limit := s.cfg.LagLimit
	if !withLag {
		limit = -1
	} else {
		h, err := s.budget.take(r.Context(), s.lagHold())
		if err != nil {
			return delivery.Consumer{}, nil, err
		}
		defer h.done()
	}
	c, parked, err := delivery.InspectConsumer(r.Context(), s.store, name, limit)
	if errors.Is(err, delivery.ErrUnknownConsumer) {
		err = &apiError{status: http.StatusNotFound, code: "unknown_subscription", msg: err.Error()}
	}
	return c, parked, err
}

type positionsJSON struct {
	Positions []varve.Position `json:"positions"`
	All       bool             `json:"all"`
}

// selection checks a replay or skip request: positions, or all.
func (b positionsJSON) selection(requireSome bool) (func(delivery.ParkedEvent) bool, error) {
	switch {
	case b.All && len(b.Positions) > 0:
		return nil, badRequest("give positions or all, not both")
	case b.All:
		return nil, nil
	case len(b.Positions) == 0 && requireSome:
		return nil, badRequest(`say which parked events: "positions": [...] or "all": true`)
	}
	for i, p := range b.Positions {
		if p.IsZero() {
			return nil, badRequest("positions[%d]: the start of the log is no event's position", i)
		}
	}
	return func(pe delivery.ParkedEvent) bool { return slices.Contains(b.Positions, pe.Position) }, nil
}

// allParked refuses a request that names a position the subscription has
// no parked event at, so that a replay or skip does all it was asked or
// nothing.
func (b positionsJSON) allParked(name, what string, parked []delivery.ParkedEvent) error {
	var missing []varve.Position
	for _, p := range b.Positions {
		if !slices.ContainsFunc(parked, func(pe delivery.ParkedEvent) bool { return pe.Position == p }) && !slices.Contains(missing, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	texts := make([]string, len(missing))
	for i, p := range missing {
		texts[i] = p.String()
	}
	return &apiError{status: http.StatusNotFound, code: "not_parked",
		msg:    fmt.Sprintf("subscription %q has no parked event at position %s: nothing was %s", name, strings.Join(texts, ", "), what),
		detail: map[string]any{"positions": missing}}
}

func (s *Server) replayParked(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	var body positionsJSON
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	match, err := body.selection(true)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	_, parked, err := s.known(r, false)
	if err != nil {
		return err
	}
	if err := body.allParked(name, "replayed", parked); err != nil {
		return err
	}
	if _, _, ok := projection.ParseCheckpointName(name); ok {
		// A projection's parked events go back through its runner.
		req, err := projection.ReplayParked(r.Context(), s.store, name, nil, body.Positions)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusAccepted, struct {
			Subscription string        `json:"subscription"`
			Request      varve.Version `json:"request"`
		}{name, req})
	}
	var sink delivery.Sink
	if s.cfg.Replay != nil {
		sink = s.cfg.Replay(name)
	}
	if sink == nil {
		return &apiError{status: http.StatusNotImplemented, code: "no_replay_sink",
			msg: fmt.Sprintf("the server has no sink to replay subscription %q to (varve serve --replay-webhook %s=URL); skip the events or replay them with `varve parked replay`", name, name)}
	}
	res, err := delivery.NewParked(s.store, name).Replay(r.Context(), sink, match)
	if err != nil {
		return err
	}
	type failed struct {
		Event delivery.ParkedEvent `json:"event"`
		Error string               `json:"error"`
	}
	out := struct {
		Replayed []delivery.ParkedEvent `json:"replayed"`
		Failed   []failed               `json:"failed"`
		Held     int                    `json:"held"`
	}{Replayed: res.Delivered, Failed: []failed{}, Held: res.Held}
	if out.Replayed == nil {
		out.Replayed = []delivery.ParkedEvent{}
	}
	for _, f := range res.Failed {
		out.Failed = append(out.Failed, failed{f.Event, f.Err.Error()})
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) skipParked(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	var body positionsJSON
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	match, err := body.selection(true)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	_, parked, err := s.known(r, false)
	if err != nil {
		return err
	}
	if err := body.allParked(name, "skipped", parked); err != nil {
		return err
	}
	skipped, err := delivery.NewParked(s.store, name).Skip(r.Context(), match)
	if err != nil {
		return err
	}
	if skipped == nil {
		skipped = []delivery.ParkedEvent{}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"skipped": skipped})
}

type resetJSON struct {
	To string `json:"to"`
}

// resetCheckpoint moves a consumer's checkpoint: to "start", "end" (the
// last position of $all) or a position no later than the end.
func (s *Server) resetCheckpoint(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	var body resetJSON
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if body.To == "" {
		return badRequest(`field "to" is missing: "start", "end" or a position`)
	}
	name := r.PathValue("name")
	before, _, err := s.known(r, false)
	if err != nil {
		return err
	}
	last, err := s.store.LastPosition(r.Context())
	if err != nil {
		return err
	}
	to, err := ResetTarget(body.To, last)
	if err != nil {
		return badRequest("field \"to\": %v", err)
	}
	if err := s.store.Checkpoints().Save(r.Context(), name, to); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"subscription": name, "from": before.Checkpoint, "to": to})
}

// ResetTarget parses where a checkpoint is moved to: "start", "end" (last)
// or a position no later than last, since a checkpoint past the end of
// $all would skip the events written up to it.
func ResetTarget(to string, last varve.Position) (varve.Position, error) {
	switch to {
	case "start":
		return varve.Start, nil
	case "end":
		return last, nil
	}
	p, err := varve.ParsePosition(to)
	if err != nil {
		return p, fmt.Errorf(`%q: want "start", "end" or a position ("12", "7:3")`, to)
	}
	if last.Less(p) {
		return p, fmt.Errorf("position %s is after the end of $all (%s): a checkpoint there would skip the events written up to it", p, last)
	}
	return p, nil
}
