// Package migrate reads the embedded SQL migrations of the SQL backends:
// files named <version>_<name>.sql, applied in version order. Applying them
// is each backend's own business (its locking and bookkeeping differ).
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one migration file.
type Migration struct {
	Version int64
	Name    string // the file's name
	SQL     string
}

// Load returns the migrations in dir of fsys, sorted by version. Every file
// ending in .sql must start with a distinct version number and "_".
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	ms := make([]Migration, 0, len(names))
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: the name must start with a version number and _", name)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(body)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return int(a.Version - b.Version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s have the same version", ms[i-1].Name, ms[i].Name)
		}
	}
	return ms, nil
}
