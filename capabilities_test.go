package varve_test

import (
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

// TestStoreCapabilities: Store.Capabilities reports what the backend and
// the backends it wraps implement, no more.
func TestStoreCapabilities(t *testing.T) {
	mem := varve.Capabilities{Watch: true, Filter: true, Tags: true, PositionNumbers: true, MultiAppend: true, Snapshots: true,
		Checkpoints: true, ListCheckpoints: true, ListStreams: true, Leases: true, Keys: true}
	noMulti := mem
	noMulti.MultiAppend = false
	inline := mem
	inline.SnapshotsInCommits = true
	for _, tc := range []struct {
		name string
		b    varve.Backend
		want varve.Capabilities
	}{
		{"memory", memory.New(), mem},
		{"bare", bare{memory.New()}, varve.Capabilities{}},
		{"unwrapping", unwrapping{unwrapping{memory.New()}}, mem},
		{"bare under unwrapping", unwrapping{bare{memory.New()}}, varve.Capabilities{}},
		{"multi-append probe says no", unwrapping{probed{memory.New(), false}}, noMulti},
		{"snapshots in commits", unwrapping{inCommits{memory.New()}}, inline},
		{"a wrapper keeps snapshots itself", ownSnapshots{Backend: memory.New(), inner: inCommits{memory.New()}}, mem},
	} {
		s := newStore(t, tc.b, varve.Config{})
		if got := s.Capabilities(); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestAs(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    varve.Backend
		want bool
	}{
		{"itself", memory.New(), true},
		{"down a chain", unwrapping{unwrapping{memory.New()}}, true},
		{"hidden by a wrapper without Unwrap", unwrapping{bare{memory.New()}}, false},
	} {
		if _, ok := varve.As[varve.Watcher](tc.b); ok != tc.want {
			t.Errorf("%s: As[Watcher] found %v, want %v", tc.name, ok, tc.want)
		}
	}
}
