package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/varve-go/varve"
)

// apiError is an error response: a status, a stable code, a message that
// names the problem, and optional details.
type apiError struct {
	status int
	code   string
	msg    string
	detail map[string]any
}

func (e *apiError) Error() string { return e.msg }

// badRequest is a 400 about one parameter or field.
func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "invalid_argument", msg: fmt.Sprintf(format, args...)}
}

// apiErr maps an error of a handler to its response: the store's sentinels
// to their statuses, the request's deadline to 504, anything else to 500.
// Store errors say what failed without secrets; they are passed on.
func (s *Server) apiErr(r *http.Request, err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var mbe *http.MaxBytesError
	var wev *varve.WrongExpectedVersionError
	msg := err.Error()
	switch {
	case errors.As(err, &mbe):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: "body_too_large", msg: fmt.Sprintf("the request body is over the server's limit of %d bytes", mbe.Limit)}
	case errors.As(err, &wev):
		return &apiError{status: http.StatusConflict, code: "wrong_expected_version", msg: msg,
			detail: map[string]any{"expected": wev.Expected.String(), "actual": wev.Actual}}
	case errors.Is(err, varve.ErrDuplicateEvent):
		return &apiError{status: http.StatusConflict, code: "duplicate_event", msg: msg}
	case errors.Is(err, varve.ErrInvalidArgument):
		return &apiError{status: http.StatusBadRequest, code: "invalid_argument", msg: msg}
	case errors.Is(err, varve.ErrStreamNotFound):
		return &apiError{status: http.StatusNotFound, code: "stream_not_found", msg: msg}
	case errors.Is(err, varve.ErrStreamDeleted):
		return &apiError{status: http.StatusGone, code: "stream_deleted", msg: msg}
	case errors.Is(err, varve.ErrNotSupported):
		return &apiError{status: http.StatusNotImplemented, code: "not_supported", msg: msg}
	case errors.Is(err, varve.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, code: "closed", msg: "the store is closed"}
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() != nil:
		return &apiError{status: http.StatusGatewayTimeout, code: "timeout", msg: "the request ran out of time: " + msg}
	case errors.Is(err, context.Canceled):
		return &apiError{status: 499, code: "canceled", msg: "the request was canceled"}
	}
	s.log.Error("request failed", "method", r.Method, "path", r.URL.EscapedPath(), "err", msg)
	return &apiError{status: http.StatusInternalServerError, code: "internal", msg: msg}
}

func writeError(w http.ResponseWriter, e *apiError) {
	body := map[string]any{"code": e.code, "message": e.msg}
	for k, v := range e.detail {
		body[k] = v
	}
	_ = writeJSON(w, e.status, map[string]any{"error": body})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}

// decodeBody decodes a JSON request body into dst: a JSON content type,
// one value, no unknown field, nothing after it.
func decodeBody(r *http.Request, dst any) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return &apiError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type", msg: "the body must be JSON (Content-Type: application/json)"}
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return bodyError(err)
		}
		return badRequest("the body holds more than one JSON value")
	}
	return nil
}

func bodyError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &apiError{status: http.StatusRequestTimeout, code: "request_timeout", msg: "the request body did not arrive within the request's time"}
	case errors.Is(err, io.EOF):
		return badRequest("the body is empty: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("the body ends inside its JSON value")
	case errors.As(err, &syn):
		return badRequest("the body is not valid JSON (at byte %d): %v", syn.Offset, err)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("the body must be a JSON object, not %s", typ.Value)
		}
		return badRequest("field %q: want %s, got %s", typ.Field, typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field %s in the body", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("the body: %v", err)
}

// params returns the query of r after checking that it holds only the
// given names, each at most once.
func params(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("the query string does not parse: %v", err)
	}
	for k, vs := range q {
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		switch {
		case !known && len(allowed) == 0:
			return nil, badRequest("unknown parameter %q: this endpoint takes none", k)
		case !known:
			return nil, badRequest("unknown parameter %q: this endpoint takes %s", k, strings.Join(allowed, ", "))
		case len(vs) > 1:
			return nil, badRequest("parameter %q given %d times", k, len(vs))
		}
	}
	return q, nil
}
