package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/shred"
)

// The erasure routes: the reports of package shred, and an erasure, which
// needs writes and a store whose opener is a shred.Shredder (the server's
// process holds the master key).

// maxErasures bounds a listing.
const maxErasures = 1000

// erasuresJSON is the answer of GET /api/v1/erasures.
type erasuresJSON struct {
	Erasures []shred.Report `json:"erasures"`
	// Erase: the server can erase (it has the master key).
	Erase bool `json:"erase"`
}

func (s *Server) shredder() (*shred.Shredder, bool) {
	sh, ok := s.store.Config().Opener.(*shred.Shredder)
	return sh, ok
}

func (s *Server) listErasures(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r, "subject", "limit"); err != nil {
		return err
	}
	q := r.URL.Query()
	subject := q.Get("subject")
	if subject != "" {
		if err := varve.CheckName(subject); err != nil {
			return badRequest("subject %q: %v", subject, err)
		}
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxErasures {
			return badRequest("limit %q: want 1 to %d", v, maxErasures)
		}
		limit = n
	}
	rs, err := shred.Reports(r.Context(), s.store, subject, limit)
	if err != nil {
		return err
	}
	_, can := s.shredder()
	return writeJSON(w, http.StatusOK, erasuresJSON{Erasures: append([]shred.Report{}, rs...), Erase: can})
}

// eraseJSON is the body of POST /api/v1/erasures.
type eraseJSON struct {
	Subject string `json:"subject"`
	Count   bool   `json:"count"`
}

// erase erases a subject and answers its report.
func (s *Server) erase(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	var body eraseJSON
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if err := varve.CheckName(body.Subject); err != nil {
		return badRequest("subject %q: %v", body.Subject, err)
	}
	sh, ok := s.shredder()
	if !ok {
		return &apiError{status: http.StatusNotImplemented, code: "not_supported", msg: "the server has no master key: start it with VARVE_MASTER_KEY or VARVE_MASTER_KEY_FILE"}
	}
	rep, err := sh.Erase(r.Context(), s.store, body.Subject, shred.EraseOptions{Count: body.Count})
	switch {
	case errors.Is(err, shred.ErrNothingToErase):
		return &apiError{status: http.StatusNotFound, code: "nothing_to_erase", msg: "subject " + strconv.Quote(body.Subject) + " has no key: never sealed, or erased already"}
	case err != nil && rep.Position.IsZero():
		return err
	}
	// Erased, with the report recorded; a count that failed is in it.
	return writeJSON(w, http.StatusOK, rep)
}
