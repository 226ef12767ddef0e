package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/varve-go/varve"
)

// DefaultMinPositionWait is how long a read with min_position waits for
// it when the request does not say (wait=); MaxMinPositionWait the most
// it may ask for. Both are cut to the request's time.
const (
	DefaultMinPositionWait = 5 * time.Second
	MaxMinPositionWait     = time.Minute
)

// positionHeader carries the position of an append's last event in its
// answer, as deliveries carry an event's (delivery.HeaderPosition).
const positionHeader = "Varve-Position"

// waitParams are the parameters of a read that waits for a position.
var waitParams = []string{"min_position", "wait"}

// awaitPosition carries out the min_position of a read, when it has one:
// it waits with reached, for at most wait= (default
// DefaultMinPositionWait), and answers 504 "position_not_reached" when the
// position is not reached in that time. Read your writes: an append's
// position (its Varve-Position header) as the min_position of a read of a
// stream, of $all, of a projection or of a consumer.
func (s *Server) awaitPosition(r *http.Request, q url.Values, reached func(context.Context, varve.Position) error) error {
	v := q.Get("min_position")
	if v == "" {
		if q.Has("wait") {
			return badRequest("parameter wait goes with min_position")
		}
		return nil
	}
	pos, err := varve.ParsePosition(v)
	if err != nil {
		return badRequest(`parameter min_position=%q: want a position ("12" or "7:3")`, v)
	}
	d := DefaultMinPositionWait
	if w := q.Get("wait"); w != "" {
		if d, err = time.ParseDuration(w); err != nil || d <= 0 || d > MaxMinPositionWait {
			return badRequest("parameter wait=%q: want a duration from 1ms to %v (such as 2s or 500ms)", w, MaxMinPositionWait)
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	defer cancel()
	err = reached(ctx, pos)
	if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
		return &apiError{status: http.StatusGatewayTimeout, code: "position_not_reached",
			msg:    fmt.Sprintf("position %s was not reached within %v: ask again, or with a longer wait", pos, d),
			detail: map[string]any{"min_position": pos}}
	}
	return err
}
