package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/sqlite"
)

func TestMain(m *testing.M) {
	if crashChild() || watchChild() {
		return
	}
	goleak.VerifyTestMain(m)
}

// open opens a backend with cfg, closed when the test ends.
func open(t testing.TB, cfg sqlite.Config) *sqlite.Backend {
	t.Helper()
	b, err := sqlite.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open %+v: %v", cfg, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func tempDB(t testing.TB) string {
	return filepath.Join(t.TempDir(), "varve.db")
}

func TestConformance(t *testing.T) {
	cases := []struct {
		name string
		cfg  func(t testing.TB) sqlite.Config
	}{
		// Two backends over one file (the reopening reader, LeaseFence's
		// second holder) wait for each other's write lock. SQLite's busy
		// handler is not fair: beside a CPU hog, a holder saving in a tight
		// loop kept the other out past the default 5 s (SQLITE_BUSY).
		{"file/full", func(t testing.TB) sqlite.Config { return sqlite.Config{Path: tempDB(t), BusyTimeout: time.Minute} }},
		{"file/normal", func(t testing.TB) sqlite.Config {
			return sqlite.Config{Path: tempDB(t), Synchronous: sqlite.SyncNormal, BusyTimeout: time.Minute}
		}},
		{"memory", func(t testing.TB) sqlite.Config { return sqlite.Config{Path: sqlite.Memory} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var configs sync.Map // *sqlite.Backend -> sqlite.Config
			backendtest.Run(t, backendtest.Factory{
				New: func(t testing.TB) varve.Backend {
					cfg := tc.cfg(t)
					b := open(t, cfg)
					configs.Store(b, cfg)
					return b
				},
				Reopen: func(t testing.TB, b varve.Backend) varve.Backend {
					cfg, _ := configs.Load(b)
					if cfg.(sqlite.Config).Path == sqlite.Memory {
						return handle{b.(*sqlite.Backend)}
					}
					return open(t, cfg.(sqlite.Config))
				},
				Capabilities: varve.Capabilities{Watch: true, Filter: true, Tags: true, PositionNumbers: true, MultiAppend: true, Snapshots: true,
					Checkpoints: true, ListCheckpoints: true, ListStreams: true, Leases: true, Keys: true, Durable: tc.name != "memory"},
			})
		})
	}
}

// handle is another opening of an in-memory database, which lives in its
// Backend: a second handle on it, whose Close leaves it open.
type handle struct{ *sqlite.Backend }

func (handle) Close() error { return nil }

// The shared suite: the same workloads as every other backend, on a file
// database with the default (FULL) durability.
var suiteFactory = backendtest.Factory{New: func(t testing.TB) varve.Backend {
	return open(t, sqlite.Config{Path: tempDB(t)})
}}

func BenchmarkSuite(b *testing.B) { backendtest.Benchmark(b, suiteFactory) }

func TestScale(t *testing.T) {
	backendtest.RunScale(t, suiteFactory, backendtest.ScaleConfig{Events: 100_000})
}

// TestDCBScale: DCB as the log grows to 10 million events (opt-in).
func TestDCBScale(t *testing.T) { backendtest.RunDCBScale(t, suiteFactory) }
