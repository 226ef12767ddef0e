package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/retention"
)

// The retention routes: the policies of package retention and the last
// pass of its scavenger; setting and removing a policy needs writes. The
// server runs no scavenger: a process of the application does, or varve
// retention run.

// retentionJSON is the answer of GET /api/v1/retention.
type retentionJSON struct {
	Policies   []retention.Rule  `json:"policies"`
	LastReport *retention.Report `json:"last_report"`
	// Categories: the store lists its streams, which category policies
	// need.
	Categories bool `json:"categories"`
}

func (s *Server) getRetention(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	rules, err := retention.List(r.Context(), s.store)
	if err != nil {
		return err
	}
	out := retentionJSON{Policies: append([]retention.Rule{}, rules...), Categories: s.store.Capabilities().ListStreams}
	last, ok, err := retention.LastReport(r.Context(), s.store)
	if err != nil {
		return err
	}
	if ok {
		out.LastReport = &last
	}
	return writeJSON(w, http.StatusOK, out)
}

// policyJSON is the body of PUT /api/v1/retention: the target and its
// policy, max_age a Go duration ("720h").
type policyJSON struct {
	Stream         string        `json:"stream"`
	Category       string        `json:"category"`
	MaxAge         string        `json:"max_age"`
	MaxCount       int64         `json:"max_count"`
	TruncateBefore varve.Version `json:"truncate_before"`
	AllowEmpty     bool          `json:"allow_empty"`
}

// putRetention gives a target a policy, replacing the one it had, and
// answers the policy as kept.
func (s *Server) putRetention(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	var body policyJSON
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	p := retention.Policy{MaxCount: body.MaxCount, TruncateBefore: body.TruncateBefore, AllowEmpty: body.AllowEmpty}
	if body.MaxAge != "" {
		age, err := time.ParseDuration(body.MaxAge)
		if err != nil || age <= 0 {
			return badRequest("max_age %q: want a positive Go duration, such as \"720h\"", body.MaxAge)
		}
		p.MaxAge = age
	}
	target := retention.Target{Stream: body.Stream, Category: body.Category}
	if err := retention.Set(r.Context(), s.store, target, p); err != nil {
		return err
	}
	rules, err := retention.List(r.Context(), s.store)
	if err != nil {
		return fmt.Errorf("set, but reading the policies after it failed: %w", err)
	}
	for _, rule := range rules {
		if rule.Target == target {
			return writeJSON(w, http.StatusOK, rule)
		}
	}
	return noPolicy(target)
}

// deleteRetention takes the policy of ?stream= or ?category= away.
func (s *Server) deleteRetention(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "stream", "category")
	if err != nil {
		return err
	}
	target := retention.Target{Stream: q.Get("stream"), Category: q.Get("category")}
	if (target.Stream == "") == (target.Category == "") {
		return badRequest("give the parameter stream or category, one of them")
	}
	if err := retention.Remove(r.Context(), s.store, target); errors.Is(err, retention.ErrNoPolicy) {
		return noPolicy(target)
	} else if err != nil {
		return err
	}
	kind, name := "stream", target.Stream
	if target.Category != "" {
		kind, name = "category", target.Category
	}
	return writeJSON(w, http.StatusOK, map[string]string{kind: name, "action": "removed"})
}

func noPolicy(target retention.Target) error {
	return &apiError{status: http.StatusNotFound, code: "no_policy", msg: fmt.Sprintf("%s has no retention policy", target)}
}
