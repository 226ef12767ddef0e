package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/workflow"
)

// The workflow routes: package workflow's operator view of the instances
// of a workflow (streams <name><separator><instance>), and its cancel and retry.

// maxWorkflows bounds a listing.
const maxWorkflows = 1000

func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "after", "limit")
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := varve.CheckName(name); err != nil {
		return badRequest("workflow %q: %v", name, err)
	}
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxWorkflows {
			return badRequest("limit %q: want 1 to %d", v, maxWorkflows)
		}
		limit = n
	}
	page, err := workflow.List(r.Context(), s.store, name, q.Get("after"), limit)
	if err != nil {
		return err
	}
	if page.Instances == nil {
		page.Instances = []workflow.Status{}
	}
	return writeJSON(w, http.StatusOK, page)
}

// instanceStream is the stream of the route's workflow instance.
func (s *Server) instanceStream(r *http.Request) (string, error) {
	stream := workflow.InstanceStream(s.store, r.PathValue("name"), r.PathValue("instance"))
	if err := varve.CheckName(stream); err != nil {
		return "", badRequest("workflow instance %q: %v", stream, err)
	}
	return stream, nil
}

func (s *Server) workflowInstance(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	stream, err := s.instanceStream(r)
	if err != nil {
		return err
	}
	st, err := workflow.Inspect(r.Context(), s.store, stream)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

// cancelWorkflowJSON is the body of a cancel.
type cancelWorkflowJSON struct {
	Reason string `json:"reason"`
}

func (s *Server) cancelWorkflow(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	stream, err := s.instanceStream(r)
	if err != nil {
		return err
	}
	var body cancelWorkflowJSON
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if err := workflowError(workflow.Cancel(r.Context(), s.store, stream, body.Reason)); err != nil {
		return err
	}
	st, err := workflow.Inspect(r.Context(), s.store, stream)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

func (s *Server) retryWorkflow(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	stream, err := s.instanceStream(r)
	if err != nil {
		return err
	}
	var body struct{}
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	f, err := workflow.Retry(r.Context(), s.store, stream)
	if err := workflowError(err); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"stream": stream, "retried": f})
}

// workflowError gives the operator's refusals their status.
func workflowError(err error) error {
	switch {
	case errors.Is(err, workflow.ErrCancelled):
		return &apiError{status: http.StatusConflict, code: "cancelled", msg: err.Error()}
	case errors.Is(err, workflow.ErrNoFailure):
		return &apiError{status: http.StatusConflict, code: "no_failure", msg: err.Error()}
	}
	return err
}
