package varve_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

// bare hides every optional capability of the memory backend.
type bare struct{ varve.Backend }

// blocking answers reads only when their context ends, like a server that
// went quiet.
type blocking struct {
	varve.Backend
	started chan struct{}
}

func (b blocking) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return buf, ctx.Err()
}

func (b blocking) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return buf, ctx.Err()
}

func newStore(t *testing.T, b varve.Backend, cfg varve.Config) *varve.Store {
	t.Helper()
	s, err := varve.New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestCloseEndsReadsInFlight(t *testing.T) {
	reads := map[string]func(*varve.Store) error{
		"ReadStream": func(s *varve.Store) error {
			for _, err := range s.ReadStream(context.Background(), "s-1") {
				return err
			}
			return nil
		},
		"ReadAll": func(s *varve.Store) error {
			for _, err := range s.ReadAll(context.Background(), varve.Start) {
				return err
			}
			return nil
		},
		"ReadAllPage": func(s *varve.Store) error {
			_, err := s.ReadAllPage(context.Background(), varve.Start, nil)
			return err
		},
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) {
			b := blocking{memory.New(), make(chan struct{}, 1)}
			s := newStore(t, b, varve.Config{})
			done := make(chan error, 1)
			go func() { done <- read(s) }()
			<-b.started
			s.Close()
			select {
			case err := <-done:
				if !errors.Is(err, varve.ErrClosed) {
					t.Fatalf("read interrupted by Close: %v, want ErrClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not end the read in flight")
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	ctx := context.Background()
	full := newStore(t, memory.New(), varve.Config{})
	none := newStore(t, bare{memory.New()}, varve.Config{})
	if c := full.Capabilities(); !c.Snapshots || !c.Checkpoints || !c.Watch {
		t.Fatal("memory backend: capabilities not found")
	}
	if c := none.Capabilities(); c.Snapshots || c.Checkpoints || c.Watch || none.Watch() != nil {
		t.Fatal("wrapped backend: capabilities found that it hides")
	}
	if err := none.Snapshots().Save(ctx, varve.Snapshot{Stream: "s-1"}); !errors.Is(err, varve.ErrNotSupported) {
		t.Fatalf("save snapshot without the capability: %v", err)
	}
	if _, _, err := none.Checkpoints().Load(ctx, "c"); !errors.Is(err, varve.ErrNotSupported) {
		t.Fatalf("load checkpoint without the capability: %v", err)
	}
	for _, name := range []string{"", "a\x00b", strings.Repeat("n", varve.MaxNameLen+1), "\xff"} {
		if err := full.Checkpoints().Save(ctx, name, varve.Start); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("checkpoint name %q: %v, want ErrInvalidArgument", name, err)
		}
	}
	if err := full.Checkpoints().Save(ctx, "c", varve.Position{Seq: 3}); err != nil {
		t.Fatal(err)
	}
	full.Close()
	if _, _, err := full.Checkpoints().Load(ctx, "c"); !errors.Is(err, varve.ErrClosed) {
		t.Fatalf("checkpoint of a closed store: %v", err)
	}
	select {
	case <-full.Watch():
	default:
		t.Fatal("Watch of a closed store does not fire")
	}
}

func TestSystemStreams(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, memory.New(), varve.Config{})
	if _, err := s.Append(ctx, "$parked-x", varve.Any, varve.NewEvent("T", nil)); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("append to a system stream: %v", err)
	}
	if _, err := s.System().Append(ctx, "user-1", varve.Any, varve.NewEvent("T", nil)); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("system append to a user stream: %v", err)
	}
	if _, err := s.System().Append(ctx, "$parked-x", varve.Any, varve.NewEvent("T", nil)); err != nil {
		t.Fatal(err)
	}
	for e, err := range s.ReadStream(ctx, "$parked-x") {
		if err != nil || e.Type != "T" {
			t.Fatalf("read of a system stream: %v %v", e, err)
		}
	}
	if err := s.Delete(ctx, "$parked-x", varve.Any); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("delete of a system stream: %v", err)
	}
	if err := s.System().Delete(ctx, "$parked-x", varve.Any); err != nil {
		t.Fatal(err)
	}
}

// TestRetryIsIdempotent: events built with NewEvent carry their ids, so a
// retry of the same append, passed one by one, writes nothing.
func TestRetryIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, memory.New(), varve.Config{})
	a, b := varve.NewEvent("A", []byte(`{}`)), varve.NewEvent("B", nil)
	first, err := s.Append(ctx, "order-1", varve.NoStream, a, b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Append(ctx, "order-1", varve.NoStream, a, b)
	if err != nil || again != first {
		t.Fatalf("retry: %+v %v, want %+v", again, err, first)
	}
	info, _ := s.StreamInfo(ctx, "order-1")
	if info.Version != 2 {
		t.Fatalf("version %d after a retry, want 2", info.Version)
	}
}

// TestErrorNamesStreamOnce: the Store names the operation and the stream;
// nothing under it repeats them.
func TestErrorNamesStreamOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, memory.New(), varve.Config{})
	if _, err := s.Append(ctx, "acct-7", varve.NoStream, varve.NewEvent("T", nil)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(ctx, "acct-7", varve.NoStream, varve.NewEvent("T", nil))
	want := `varve: append to stream "acct-7": wrong expected version: expected no-stream, actual 1`
	if err == nil || err.Error() != want {
		t.Fatalf("conflict reads %q, want %q", err, want)
	}
}

// unwrapping decorates a backend and lets its capabilities through.
type unwrapping struct{ varve.Backend }

func (u unwrapping) Unwrap() varve.Backend { return u.Backend }

// TestUnwrapper: the Store finds capabilities under a wrapper that
// implements Unwrap, down a chain of them, and not under one that does not.
func TestUnwrapper(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    varve.Backend
		want bool
	}{
		{"unwrapping", unwrapping{memory.New()}, true},
		{"chain", unwrapping{unwrapping{memory.New()}}, true},
		{"unwrapping a bare one", unwrapping{bare{memory.New()}}, false},
		{"bare", bare{unwrapping{memory.New()}}, false},
	} {
		s := newStore(t, tc.b, varve.Config{})
		c := s.Capabilities()
		got := map[string]bool{"Snapshots": c.Snapshots, "Checkpoints": c.Checkpoints, "Watch": c.Watch, "Filter": c.Filter,
			"MultiAppend": c.MultiAppend, "ListStreams": c.ListStreams, "ListCheckpoints": c.ListCheckpoints, "Tags": c.Tags, "Leases": c.Leases}
		for name, ok := range got {
			if ok != tc.want {
				t.Errorf("%s: capability %s found: %v, want %v", tc.name, name, ok, tc.want)
			}
		}
	}
}

// probed is a multi-stream appender that says whether it can append.
type probed struct {
	*memory.Backend
	can bool
}

func (p probed) MultiAppendAvailable() bool { return p.can }

// TestMultiAppendProbe: a MultiAppender whose MultiAppendAvailable says no is no
// capability, also under a wrapper, and the Store says ErrNotSupported.
func TestMultiAppendProbe(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    varve.Backend
		want bool
	}{
		{"can", probed{memory.New(), true}, true},
		{"cannot", probed{memory.New(), false}, false},
		{"cannot, wrapped", unwrapping{probed{memory.New(), false}}, false},
	} {
		s := newStore(t, tc.b, varve.Config{})
		if got := s.Capabilities().MultiAppend; got != tc.want {
			t.Errorf("%s: MultiAppend %v, want %v", tc.name, got, tc.want)
		}
		_, err := s.AppendMulti(context.Background(), []varve.StreamAppend{{Stream: "a", Expected: varve.Any, Events: []varve.Event{{Type: "E"}}}})
		if tc.want && err != nil || !tc.want && !errors.Is(err, varve.ErrNotSupported) {
			t.Errorf("%s: AppendMulti: %v", tc.name, err)
		}
	}
}

// inCommits keeps snapshots "in commits" the simple way (an append, then
// the snapshot), enough to drive the Store's side of the capability.
type inCommits struct{ *memory.Backend }

func (b inCommits) AppendWithSnapshot(ctx context.Context, req varve.AppendRequest, snap varve.Snapshot) (varve.AppendResult, error) {
	res, err := b.Append(ctx, req)
	if err == nil {
		err = b.SaveSnapshot(ctx, snap)
	}
	return res, err
}

func (b inCommits) ReadFromSnapshot(ctx context.Context, stream string, limit int, buf []varve.RecordedEvent) (varve.Snapshot, bool, []varve.RecordedEvent, error) {
	s, ok, err := b.LoadSnapshot(ctx, stream)
	if err != nil {
		return s, ok, buf, err
	}
	buf, err = b.ReadStream(ctx, varve.StreamQuery{Stream: stream, From: s.Version + 1, Limit: limit}, buf)
	return s, ok, buf, err
}

// ownSnapshots wraps a backend and keeps snapshots itself (in the wrapped
// backend here, but the Store cannot know).
type ownSnapshots struct {
	varve.Backend
	inner inCommits
}

func (o ownSnapshots) Unwrap() varve.Backend { return o.inner }

func (o ownSnapshots) SaveSnapshot(ctx context.Context, s varve.Snapshot) error {
	return o.inner.SaveSnapshot(ctx, s)
}

func (o ownSnapshots) LoadSnapshot(ctx context.Context, stream string) (varve.Snapshot, bool, error) {
	return o.inner.LoadSnapshot(ctx, stream)
}

// TestSnapshotsInCommits: the Store offers a backend's snapshots in commits
// through wrappers that let them through, not when a wrapper keeps
// snapshots of its own; Snapshots.Read pages on after the backend's first
// page.
func TestSnapshotsInCommits(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		b    varve.Backend
		want bool
	}{
		{"backend", inCommits{memory.New()}, true},
		{"unwrapping", unwrapping{inCommits{memory.New()}}, true},
		{"wrapper with snapshots of its own", func() varve.Backend {
			b := inCommits{memory.New()}
			return unwrapping{ownSnapshots{b, b}}
		}(), false},
		{"memory", memory.New(), false},
	} {
		s := newStore(t, tc.b, varve.Config{})
		if got := s.Capabilities().SnapshotsInCommits; got != tc.want {
			t.Errorf("%s: InCommits %v, want %v", tc.name, got, tc.want)
		}
		_, err := s.Snapshots().Append(ctx, "acct-1", varve.NoStream, varve.Snapshot{Version: 1}, varve.NewEvent("T", nil))
		if tc.want && err != nil || !tc.want && !errors.Is(err, varve.ErrNotSupported) {
			t.Errorf("%s: Append: %v", tc.name, err)
		}
	}
	s := newStore(t, inCommits{memory.New()}, varve.Config{})
	evs := make([]varve.Event, 7)
	for i := range evs {
		evs[i] = varve.NewEvent("T", nil)
	}
	if _, err := s.Snapshots().Append(ctx, "acct-2", varve.NoStream, varve.Snapshot{Version: 2}, evs[:2]...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "acct-2", varve.Exact(2), evs[2:]...); err != nil {
		t.Fatal(err)
	}
	for _, page := range []int{1, 2, 5, 6} {
		snap, ok, seq, err := s.Snapshots().Read(ctx, "acct-2", varve.PageSize(page))
		if err != nil || !ok || snap.Version != 2 {
			t.Fatalf("page %d: snapshot %+v ok=%v, %v", page, snap, ok, err)
		}
		var got []varve.Version
		for e, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, e.Version)
		}
		if !slices.Equal(got, []varve.Version{3, 4, 5, 6, 7}) {
			t.Fatalf("page %d: versions %v after the snapshot, want 3..7", page, got)
		}
	}
}
