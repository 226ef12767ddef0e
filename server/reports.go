package server

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
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
			s.log.Warn("reports unreadable", "err", err.Error())
			return &apiError{status: http.StatusInternalServerError, code: "reports_unreadable", msg: "the reports directory cannot be read (the server's log says why)"}
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

// isReport says whether name can be a report's name: an .html file at the
// top of the directory, printable UTF-8 (no NUL, no control character).
func isReport(name string) bool {
	return strings.HasSuffix(name, ".html") && fs.ValidPath(name) && path.Base(name) == name && !strings.HasPrefix(name, ".") &&
		!strings.ContainsFunc(name, unicode.IsControl)
}

// report sends one report as HTML under a sandboxing policy; the console
// shows it in a sandboxed frame. Only a regular file is opened: the file
// is looked at without following a symbolic link first, since opening a
// FIFO blocks and an os.DirFS follows a link out of its directory. A file
// that is no report is a 404; what the file system said goes to the log,
// not to the client.
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
	unreadable := func(err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return notFound
		}
		s.log.Warn("report unreadable", "report", name, "err", err.Error())
		return &apiError{status: http.StatusInternalServerError, code: "report_unreadable", msg: "report " + name + " cannot be read (the server's log says why)"}
	}
	before, err := lstat(s.cfg.Reports, name)
	if err != nil {
		return unreadable(err)
	}
	if !before.Mode().IsRegular() {
		return notFound
	}
	f, err := s.cfg.Reports.Open(name)
	if err != nil {
		return unreadable(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return unreadable(err)
	}
	// A file of the OS must be the one looked at: not a link put in its
	// place since.
	if !fi.Mode().IsRegular() || os.SameFile(before, before) && !os.SameFile(before, fi) {
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

// lstat describes the file name of fsys without following a symbolic link:
// with fs.Lstat where fsys can, else from its directory's entries, which
// do not follow links either.
func lstat(fsys fs.FS, name string) (fs.FileInfo, error) {
	if _, ok := fsys.(fs.ReadLinkFS); ok {
		return fs.Lstat(fsys, name)
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name() == name {
			return e.Info()
		}
	}
	return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
}
