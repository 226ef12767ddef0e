package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/projection"
)

// MaxProjections bounds the projections one listing inspects.
const MaxProjections = 200

func (s *Server) listProjections(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	names, err := projection.List(r.Context(), s.store)
	if err != nil {
		return err
	}
	truncated := len(names) > MaxProjections
	names = names[:min(len(names), MaxProjections)]
	h, err := s.budget.take(r.Context(), s.lagHold())
	if err != nil {
		return err
	}
	defer h.done()
	out := make([]projection.Info, 0, len(names))
	for _, n := range names {
		info, err := projection.Inspect(r.Context(), s.store, n)
		if err != nil {
			return err
		}
		out = append(out, info)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"projections": out, "truncated": truncated})
}

// knownProjection inspects the projection of the request's path, which
// the store must know (404 otherwise).
func (s *Server) knownProjection(r *http.Request) (projection.Info, error) {
	name := r.PathValue("name")
	if len(name) > projection.MaxNameLen || varve.CheckName(name) != nil {
		return projection.Info{}, badRequest("projection name %q: 1 to %d bytes of a valid name", name, projection.MaxNameLen)
	}
	h, err := s.budget.take(r.Context(), s.lagHold())
	if err != nil {
		return projection.Info{}, err
	}
	defer h.done()
	info, err := projection.Inspect(r.Context(), s.store, name)
	if err != nil {
		return info, err
	}
	if len(info.Versions) == 0 && info.Current == 0 && !info.Paused && info.Failure == nil && info.Parked == 0 {
		return info, &apiError{status: http.StatusNotFound, code: "unknown_projection", msg: fmt.Sprintf("the store knows no projection %q: no checkpoint and no control stream", name)}
	}
	return info, nil
}

func (s *Server) projectionInfo(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, waitParams...)
	if err != nil {
		return err
	}
	if err := s.awaitPosition(r, q, func(ctx context.Context, pos varve.Position) error {
		return projection.WaitFor(ctx, s.store, r.PathValue("name"), pos)
	}); err != nil {
		return err
	}
	info, err := s.knownProjection(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, info)
}

// versionJSON is the body of a rebuild or a promotion.
type versionJSON struct {
	Version int `json:"version"`
}

// controlProjection carries out an operator's request on a projection:
// pause, resume, rebuild (of a version) or promote (a version to
// current). Runners follow the first three within their ControlPoll.
func (s *Server) controlProjection(what string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if _, err := params(r); err != nil {
			return err
		}
		var body versionJSON
		if what == "rebuild" || what == "promote" {
			if err := decodeBody(r, &body); err != nil {
				return err
			}
		}
		info, err := s.knownProjection(r)
		if err != nil {
			return err
		}
		if what == "rebuild" || what == "promote" {
			known := false
			for _, v := range info.Versions {
				known = known || v.Version == body.Version
			}
			if !known {
				return badRequest("version %d: projection %q has no such version", body.Version, info.Name)
			}
		}
		ctx := r.Context()
		switch what {
		case "pause":
			err = projection.Pause(ctx, s.store, info.Name)
		case "resume":
			err = projection.Resume(ctx, s.store, info.Name)
		case "rebuild":
			err = projection.Rebuild(ctx, s.store, info.Name, body.Version)
		case "promote":
			err = projection.SetCurrent(ctx, s.store, info.Name, body.Version)
		}
		if err != nil {
			return err
		}
		out := map[string]any{"projection": info.Name, "requested": what}
		if body.Version > 0 {
			out["version"] = body.Version
		}
		return writeJSON(w, http.StatusOK, out)
	}
}
