package server

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
)

// maxReportBytes bounds a report the server sends.
const maxReportBytes = 64 << 20

// reportCSP lets a report show itself (its inline styles and SVG) and do
// nothing else: no script, no request, no navigation.
const reportCSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:"

type reportJSON struct {
	Name     string    `json:"name"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

func (s *Server) listReports(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	out := []reportJSON{}
	if s.cfg.Reports != nil {
		entries, err := fs.ReadDir(s.cfg.Reports, ".")
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !isReport(e.Name()) || !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			out = append(out, reportJSON{Name: e.Name(), Size: fi.Size(), Modified: fi.ModTime().UTC()})
		}
	}
	slices.SortFunc(out, func(a, b reportJSON) int { return b.Modified.Compare(a.Modified) })
	return writeJSON(w, http.StatusOK, map[string]any{"reports": out})
}

func isReport(name string) bool {
	return strings.HasSuffix(name, ".html") && fs.ValidPath(name) && path.Base(name) == name && !strings.HasPrefix(name, ".")
}

// report sends one report as HTML under a sandboxing policy; the console
// shows it in a sandboxed frame.
func (s *Server) report(w http.ResponseWriter, r *http.Request) error {
	if _, err := params(r); err != nil {
		return err
	}
	name := r.PathValue("name")
	if !isReport(name) {
		return badRequest("report %q: want the name of an .html file of the reports directory", name)
	}
	notFound := &apiError{status: http.StatusNotFound, code: "no_such_report", msg: "no report " + name}
	if s.cfg.Reports == nil {
		return notFound
	}
	f, err := s.cfg.Reports.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return notFound
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return notFound
	}
	if fi.Size() > maxReportBytes {
		return &apiError{status: http.StatusRequestEntityTooLarge, code: "report_too_large", msg: "report " + name + " is over 64 MiB"}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", reportCSP)
	w.WriteHeader(http.StatusOK)
	_, err = io.Copy(w, io.LimitReader(f, maxReportBytes))
	return err
}
