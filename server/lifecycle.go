package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/varve-go/varve"
)

// The lifecycle routes: truncate, delete and tombstone a stream (writes
// enabled). Each answers the stream's info as read after the change, the
// same JSON as GET /api/v1/streams/{id}. The store refuses system streams;
// the server refuses them first, with 403 "system_stream".

// truncateJSON is the body of a truncate: the first version to keep.
type truncateJSON struct {
	Before json.RawMessage `json:"before"`
}

// truncateStream removes the events below body.before; the stream keeps its
// version. A before past the end removes them all.
func (s *Server) truncateStream(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	stream := r.PathValue("id")
	if err := refuseSystem(stream, "truncate"); err != nil {
		return err
	}
	var body truncateJSON
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	before, err := parseBefore(body.Before)
	if err != nil {
		return err
	}
	if err := s.store.Truncate(r.Context(), stream, before); err != nil {
		return err
	}
	return s.writeStream(w, r, stream)
}

// deleteStream deletes a stream (a later append starts it afresh at version
// 1) or, with tombstone=true, tombstones it for good, if it is at
// expected_version (default any). A never-written stream can be
// tombstoned, which reserves its id, as in the library and the CLI.
func (s *Server) deleteStream(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "expected_version", "tombstone")
	if err != nil {
		return err
	}
	tombstone, err := boolParam(q, "tombstone")
	if err != nil {
		return err
	}
	expected := varve.Any
	if q.Has("expected_version") {
		if expected, err = parseExpected(q.Get("expected_version")); err != nil {
			return err
		}
	}
	stream := r.PathValue("id")
	action := "delete"
	if tombstone {
		action = "tombstone"
	}
	if err := refuseSystem(stream, action); err != nil {
		return err
	}
	if tombstone {
		err = s.store.Tombstone(r.Context(), stream, expected)
	} else {
		err = s.store.Delete(r.Context(), stream, expected)
	}
	if err != nil {
		return err
	}
	return s.writeStream(w, r, stream)
}

// writeStream answers 200 with the stream's info.
func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, stream string) error {
	info, err := s.store.StreamInfo(r.Context(), stream)
	if err != nil {
		return fmt.Errorf("done, but reading the stream's info after it failed: %w", err)
	}
	return writeJSON(w, http.StatusOK, StreamOf(info))
}

// refuseSystem refuses a system stream with 403: its records are varve's
// own ($all is left to the store, which says it is no stream).
func refuseSystem(stream, action string) error {
	if stream == varve.AllStream || !strings.HasPrefix(stream, varve.SystemPrefix) {
		return nil
	}
	return &apiError{status: http.StatusForbidden, code: "system_stream",
		msg: fmt.Sprintf("stream %q is a system stream (ids beginning with %q are varve's own records): the API does not %s it", stream, varve.SystemPrefix, action)}
}

// parseBefore parses a truncate's before: a JSON integer, at least 1.
func parseBefore(raw json.RawMessage) (varve.Version, error) {
	if raw == nil {
		return 0, badRequest("before is missing: want the first version to keep, a number from 1")
	}
	n, err := strconv.ParseUint(string(raw), 10, 63)
	if err != nil || n < 1 {
		return 0, badRequest("before %s: want the first version to keep, a number from 1", raw)
	}
	return varve.Version(n), nil
}
