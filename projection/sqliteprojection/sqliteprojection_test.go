package sqliteprojection_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/projection/internal/eotest"
	"github.com/varve-go/varve/projection/sqliteprojection"
	"github.com/varve-go/varve/shred"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run()) // the crash child is killed; it leaves goroutines
	}
	goleak.VerifyTestMain(m)
}

func table(version int) string { return "counts_v" + strconv.Itoa(version) }

// counts is the read model under test: events per stream, and the version
// of the last one, in a table per projection version.
func counts(onEvent func()) sqliteprojection.Handler {
	return func(ctx context.Context, tx *sql.Tx, b projection.Batch) error {
		t := table(b.Version)
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (stream TEXT PRIMARY KEY, n INTEGER NOT NULL, last INTEGER NOT NULL)`); err != nil {
			return err
		}
		for _, e := range b.Events {
			if e.Stream == shred.ErasureStream {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+t+` (stream, n, last) VALUES (?1, 1, ?2)
ON CONFLICT (stream) DO UPDATE SET n = n + 1, last = excluded.last`, e.Stream, int64(e.Version)); err != nil {
				return err
			}
			if onEvent != nil {
				onEvent()
			}
		}
		_, err := sqliteprojection.DeleteErased(ctx, tx, b, t, "stream")
		return err
	}
}

// readModel reads the read model of version and its checkpoint in one
// read transaction, so that a commit that lands in between cannot split
// them.
func readModel(t testing.TB, b *sqlite.Backend, version int) (map[string]eotest.Row, varve.Position) {
	t.Helper()
	got := map[string]eotest.Row{}
	var cp varve.Position
	err := b.ReadTx(context.Background(), func(tx *sql.Tx) error {
		var c, q int64
		err := tx.QueryRow(`SELECT commit_id, seq FROM checkpoints WHERE name = ?1`, projection.CheckpointName(eotest.Name, version)).Scan(&c, &q)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cp = varve.Position{Commit: uint64(c), Seq: uint64(q)}
		var exists int
		if err := tx.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = ?1`, table(version)).Scan(&exists); err != nil || exists == 0 {
			return err // no table yet: an empty read model
		}
		rows, err := tx.Query(`SELECT stream, n, last FROM ` + table(version))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var r eotest.Row
			if err := rows.Scan(&s, &r.N, &r.Last); err != nil {
				return err
			}
			got[s] = r
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, cp
}

func openAt(t testing.TB, cfg sqlite.Config) (*varve.Store, *sqlite.Backend) {
	t.Helper()
	b, err := sqlite.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, b
}

func openSQLite(t testing.TB) (*varve.Store, *sqlite.Backend) {
	return openAt(t, sqlite.Config{Path: filepath.Join(t.TempDir(), "varve.db")})
}

// target is the suite's hold on the read model of s, in b's file.
func target(s *varve.Store, b *sqlite.Backend) eotest.Target {
	return eotest.Target{
		Store: s,
		Projection: func(p projection.Projection, onEvent func()) (projection.Projection, error) {
			return sqliteprojection.Projection(s, p, counts(onEvent))
		},
		Commit: func() (projection.CommitFunc, error) { return sqliteprojection.Commit(s, counts(nil)) },
		ReadModel: func(t testing.TB, version int) (map[string]eotest.Row, varve.Position) {
			return readModel(t, b, version)
		},
	}
}

// suite runs the exactly-once suite on a file of its own per test: $all
// shows an event once its append returned, and positions are sequence
// numbers alone.
var suite = eotest.Factory{
	Open:          func(t testing.TB) eotest.Target { return target(openSQLite(t)) },
	SeqPositions:  true,
	CancelAppends: 40,
}

func TestBackend(t *testing.T) {
	cases := []struct {
		name  string
		store func(t *testing.T) *varve.Store
		want  error
	}{
		{"nil store", func(*testing.T) *varve.Store { return nil }, varve.ErrInvalidArgument},
		{"sqlite", func(t *testing.T) *varve.Store { s, _ := openSQLite(t); return s }, nil},
		{"memory", func(t *testing.T) *varve.Store {
			s, err := varve.New(memory.New(), varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, varve.ErrNotSupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.store(t)
			if s != nil {
				t.Cleanup(func() { _ = s.Close() })
			}
			_, err := sqliteprojection.Projection(s, projection.Projection{Name: "counts", Version: 1}, counts(nil))
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestOverlappingBatches(t *testing.T) { eotest.OverlappingBatches(t, suite) }

func TestErasures(t *testing.T) { eotest.Erasures(t, suite) }

func TestExactlyOnceUnderCancel(t *testing.T) { eotest.ExactlyOnceUnderCancel(t, suite) }

const childEnv = "SQLITEPROJECTION_CRASH_DB"

// TestCrashChild is the projection that TestExactlyOnceUnderSIGKILL kills:
// it only runs in the child process.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("runs as the child of TestExactlyOnceUnderSIGKILL")
	}
	cfg, err := sqlite.ParseURL("sqlite://" + path + "?synchronous=" + os.Getenv(childEnv+"_SYNC"))
	if err != nil {
		t.Fatal(err)
	}
	s, b := openAt(t, cfg)
	size, _ := strconv.Atoi(os.Getenv(childEnv + "_PAGE"))
	eotest.CrashChild(t, target(s, b), size)
}

// TestExactlyOnceUnderSIGKILL kills a child process running the projection
// with SIGKILL at random points, 22 times in each synchronous mode, and
// checks after each kill that the read model is exactly the fold of the
// events up to the checkpoint. The test process appends to the same file
// between kills.
func TestExactlyOnceUnderSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for i, mode := range []sqlite.Synchronous{sqlite.SyncFull, sqlite.SyncNormal} {
		t.Run(mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "varve.db")
			s, b := openAt(t, sqlite.Config{Path: path, Synchronous: mode})
			eotest.ExactlyOnceUnderSIGKILL(t, target(s, b), eotest.Kills{
				Count: 22,
				Seed:  uint64(4 + i),
				Env: func(pageSize int) []string {
					return []string{childEnv + "=" + path, childEnv + "_SYNC=" + mode.String(), childEnv + "_PAGE=" + strconv.Itoa(pageSize)}
				},
				Label: mode.String(),
			})
		})
	}
}

func TestRebuildUnderWrites(t *testing.T) { eotest.RebuildUnderWrites(t, suite) }

func TestTwoRunnersApplyOnce(t *testing.T) { eotest.TwoRunnersApplyOnce(t, suite) }
