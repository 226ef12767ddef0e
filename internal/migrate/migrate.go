// Package migrate reads the embedded SQL of the SQL backends: migrations,
// files named <version>_<name>.sql applied in version order, the first of
// which is the baseline, and code, the definitions (functions, triggers)
// that a backend keeps as they are in its files rather than as history.
// Applying them is each backend's own business (its locking and
// bookkeeping differ).
package migrate

import (
	"errors"
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

// ErrBeforeBaseline is returned by Pending for a schema whose version is
// below the baseline's: it was made by migrations that have since been
// squashed into the baseline, and no migration leads from it.
var ErrBeforeBaseline = errors.New("the schema is older than the baseline of its migrations")

// Pending returns the migrations of ms (sorted, as Load returns them) that
// a schema at version current lacks. The first migration is the baseline:
// it creates the whole schema of its version, so an empty schema (version
// 0) gets it and every later one, and a schema at the baseline's version,
// however it got there, gets only the later ones. A schema between 0 and
// the baseline gets an error wrapping ErrBeforeBaseline; one at or past
// the last version lacks nothing.
func Pending(ms []Migration, current int64) ([]Migration, error) {
	if len(ms) == 0 {
		return nil, errors.New("no migrations")
	}
	if current > 0 && current < ms[0].Version {
		return nil, fmt.Errorf("%w: version %d, baseline %d", ErrBeforeBaseline, current, ms[0].Version)
	}
	i := 0
	for i < len(ms) && ms[i].Version <= current {
		i++
	}
	return ms[i:], nil
}

// Code is one file of code: definitions a backend applies as they are
// written, whatever the schema's version.
type Code struct {
	Name string // the file's name
	SQL  string
}

// LoadCode returns the files ending in .sql in dir of fsys, in name order.
func LoadCode(fsys fs.FS, dir string) ([]Code, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	cs := make([]Code, 0, len(names))
	for _, name := range names { // Glob sorts them
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		cs = append(cs, Code{Name: path.Base(name), SQL: string(body)})
	}
	return cs, nil
}
