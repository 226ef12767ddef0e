package server

import (
	_ "embed"
	"net/http"
)

// openAPIDoc describes the API in OpenAPI 3.1; TestOpenAPI holds it to
// the routes the server registers.
//
//go:embed openapi.json
var openAPIDoc []byte

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(openAPIDoc)
	return err
}
