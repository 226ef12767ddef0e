package backendtest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// readFromSnapshot reads stream with Snapshots.Read and returns the
// snapshot and every event after it, failing the test on an error.
func readFromSnapshot(t testing.TB, s *varve.Store, stream string, opts ...varve.ReadOption) (varve.Snapshot, bool, []varve.RecordedEvent) {
	t.Helper()
	snap, ok, evs, err := readFromSnapshotErr(t, s, stream, opts...)
	if err != nil {
		t.Fatalf("read %q from its snapshot: %v", stream, err)
	}
	return snap, ok, evs
}

func readFromSnapshotErr(t testing.TB, s *varve.Store, stream string, opts ...varve.ReadOption) (varve.Snapshot, bool, []varve.RecordedEvent, error) {
	snap, ok, seq, err := s.Snapshots().Read(ctxFor(t), stream, opts...)
	if err != nil {
		return snap, ok, nil, err
	}
	var evs []varve.RecordedEvent
	evs, err = collect(seq)
	return snap, ok, evs, err
}

func sameSnapshot(t testing.TB, what string, got, want varve.Snapshot) {
	t.Helper()
	if got.Stream != want.Stream || got.Version != want.Version || got.SchemaVersion != want.SchemaVersion ||
		!bytes.Equal(got.Data, want.Data) || !got.TakenAt.Equal(want.TakenAt) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// deleteAndRecreate deletes stream and checks that Snapshots.Read finds
// neither it nor, once it is written again, a snapshot of its earlier life.
func deleteAndRecreate(t *testing.T, s *varve.Store, stream string, exp varve.ExpectedVersion) {
	t.Helper()
	if err := s.Delete(ctxFor(t), stream, exp); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := readFromSnapshotErr(t, s, stream)
	wantErr(t, "read of a deleted stream", err, varve.ErrStreamNotFound)
	mustAppend(t, s, stream, varve.NoStream, events("E", 1)...)
	if _, ok, got := readFromSnapshot(t, s, stream); ok || len(got) != 1 {
		t.Fatalf("a stream created again: ok=%v, %d events", ok, len(got))
	}
}

// testSnapshotRead checks Snapshots.Read on every backend with snapshots,
// and Snapshots.Append on those that keep snapshots in commits.
func testSnapshotRead(t *testing.T, f Factory) {
	s := store(t, f)
	ss := s.Snapshots()
	if lacks(t, f, s, varve.Capabilities{Snapshots: true}) {
		t.Skipf("backend %q does not implement varve.SnapshotStore", s.Features().Name)
	}
	ctx := ctxFor(t)
	pfx := prefix(t)
	snapshot := func(stream string, v varve.Version, data string) varve.Snapshot {
		return varve.Snapshot{Stream: stream, Version: v, SchemaVersion: 3, Data: []byte(data), TakenAt: time.Now().UTC().Truncate(time.Millisecond)}
	}

	t.Run("saved snapshots", func(t *testing.T) {
		stream := pfx + "saved"
		_, _, _, err := readFromSnapshotErr(t, s, stream)
		wantErr(t, "read of a missing stream", err, varve.ErrStreamNotFound)
		evs := events("E", 5)
		mustAppend(t, s, stream, varve.NoStream, evs...)
		if _, ok, got := readFromSnapshot(t, s, stream); ok || !equalVersions(versions(got), seqVersions(1, 5)) {
			t.Fatalf("without a snapshot: ok=%v, versions %v", ok, versions(got))
		}
		want := snapshot(stream, 3, `{"v":3}`)
		if err := ss.Save(ctx, want); err != nil {
			t.Fatal(err)
		}
		for _, page := range []int{0, 1, 2, 100} {
			var opts []varve.ReadOption
			if page > 0 {
				opts = append(opts, varve.PageSize(page))
			}
			snap, ok, got := readFromSnapshot(t, s, stream, opts...)
			if !ok {
				t.Fatalf("page %d: no snapshot", page)
			}
			sameSnapshot(t, "saved snapshot", snap, want)
			if !equalVersions(versions(got), seqVersions(4, 5)) {
				t.Fatalf("page %d: events after the snapshot: versions %v", page, versions(got))
			}
			sameEvent(t, got[0], evs[3])
		}
		_, _, _, err = readFromSnapshotErr(t, s, stream, varve.Limit(1))
		wantErr(t, "read with a limit", err, varve.ErrInvalidArgument)

		deleteAndRecreate(t, s, stream, varve.Any)
		if err := s.Tombstone(ctx, stream, varve.Any); err != nil {
			t.Fatal(err)
		}
		_, _, _, err = readFromSnapshotErr(t, s, stream)
		wantErr(t, "read of a tombstoned stream", err, varve.ErrStreamDeleted)
	})

	t.Run("snapshots in commits", func(t *testing.T) {
		stream := pfx + "commit"
		if lacks(t, f, s, varve.Capabilities{SnapshotsInCommits: true}) {
			_, err := ss.Append(ctx, stream, varve.NoStream, snapshot(stream, 1, "{}"), events("E", 1)...)
			wantErr(t, "append with a snapshot", err, varve.ErrNotSupported)
			t.Skipf("backend %q keeps no snapshots in commits", s.Features().Name)
		}
		for _, tc := range []struct {
			name     string
			expected varve.ExpectedVersion
			snap     varve.Snapshot
		}{
			{"expected any", varve.Any, snapshot(stream, 1, "{}")},
			{"expected to exist", varve.StreamExists, snapshot(stream, 1, "{}")},
			{"version behind", varve.NoStream, snapshot(stream, 0, "{}")},
			{"version ahead", varve.NoStream, snapshot(stream, 2, "{}")},
			{"another stream", varve.NoStream, snapshot(stream+"x", 1, "{}")},
		} {
			_, err := ss.Append(ctx, stream, tc.expected, tc.snap, events("E", 1)...)
			wantErr(t, tc.name, err, varve.ErrInvalidArgument)
		}
		wantNotFound(t, s, stream)

		after, err := s.LastPosition(ctx)
		if err != nil {
			t.Fatal(err)
		}
		evs := events("E", 2)
		first := snapshot("", 2, `{"v":2}`)
		res, err := ss.Append(ctx, stream, varve.NoStream, first, evs...)
		if err != nil {
			t.Fatal(err)
		}
		if res.FirstVersion != 1 || res.LastVersion != 2 {
			t.Fatalf("append with a snapshot: %+v", res)
		}
		first.Stream = stream
		snap, ok, got := readFromSnapshot(t, s, stream)
		if !ok || len(got) != 0 {
			t.Fatalf("after an append with a snapshot: ok=%v, %d events after it", ok, len(got))
		}
		sameSnapshot(t, "snapshot kept in the commit", snap, first)
		// The snapshot is not an event: reads of the stream and of $all
		// return the events as appended.
		stored := mustRead(t, s, stream)
		if len(stored) != 2 {
			t.Fatalf("stream holds %d events, want 2", len(stored))
		}
		for i := range stored {
			sameEvent(t, stored[i], evs[i])
		}
		// $all may hold the append back a while (PostgreSQL's horizon,
		// behind a writer of another test).
		waitForPosition(t, s, res.Position)
		if all := readAllPrefix(t, s, after, stream); len(all) != 2 || all[1].Position != res.Position {
			t.Fatalf("$all holds %d events of the stream, last at %v; want 2, last at %v", len(all), all, res.Position)
		}

		// A failed append keeps neither its events nor its snapshot; a
		// retry of the stored one returns its result and keeps nothing new.
		_, err = ss.Append(ctx, stream, varve.Exact(1), snapshot("", 2, `{"v":"bad"}`), events("E", 1)...)
		wantErr(t, "append at a wrong version", err, varve.ErrWrongExpectedVersion)
		again, err := ss.Append(ctx, stream, varve.NoStream, snapshot("", 2, `{"v":"retry"}`), evs...)
		if err != nil || again != res {
			t.Fatalf("retry: %+v, %v; want %+v", again, err, res)
		}
		snap, ok, got = readFromSnapshot(t, s, stream)
		if !ok || len(got) != 0 || len(mustRead(t, s, stream)) != 2 {
			t.Fatalf("after a failed append and a retry: ok=%v, %d events after the snapshot", ok, len(got))
		}
		sameSnapshot(t, "snapshot after a failed append and a retry", snap, first)

		// An append without a snapshot leaves the stream with the one that
		// Save saved, here none: Read returns every event.
		plain := events("P", 3)
		mustAppend(t, s, stream, varve.Exact(2), plain...)
		if _, ok, got := readFromSnapshot(t, s, stream); ok || !equalVersions(versions(got), seqVersions(1, 5)) {
			t.Fatalf("after a plain append: ok=%v, versions %v", ok, versions(got))
		}
		saved := snapshot(stream, 4, `{"v":4}`)
		if err := ss.Save(ctx, saved); err != nil {
			t.Fatal(err)
		}
		snap, ok, got = readFromSnapshot(t, s, stream, varve.PageSize(1))
		if !ok || !equalVersions(versions(got), seqVersions(5, 5)) {
			t.Fatalf("after a saved snapshot: ok=%v, versions %v", ok, versions(got))
		}
		sameSnapshot(t, "saved snapshot", snap, saved)
		sameEvent(t, got[0], plain[2])

		// A truncation keeps the snapshot kept with the stream's last
		// commit, also one that removes every event.
		small := snapshot(stream, 6, `{"v":6}`)
		if _, err := ss.Append(ctx, stream, varve.Exact(5), small, events("E", 1)...); err != nil {
			t.Fatal(err)
		}
		for _, before := range []varve.Version{4, 100} {
			if err := s.Truncate(ctx, stream, before); err != nil {
				t.Fatal(err)
			}
			snap, ok, got = readFromSnapshot(t, s, stream)
			if !ok || len(got) != 0 {
				t.Fatalf("after a truncation before %d: ok=%v, %d events", before, ok, len(got))
			}
			sameSnapshot(t, fmt.Sprintf("snapshot after a truncation before %d", before), snap, small)
		}

		// A large snapshot, beyond what one message of some servers holds.
		big := snapshot(stream, 7, string(bytes.Repeat([]byte("s"), 3<<19)))
		if _, err := ss.Append(ctx, stream, varve.Exact(6), big, events("E", 1)...); err != nil {
			t.Fatal(err)
		}
		snap, ok, got = readFromSnapshot(t, s, stream)
		if !ok || len(got) != 0 {
			t.Fatalf("after a large snapshot: ok=%v, %d events", ok, len(got))
		}
		sameSnapshot(t, "large snapshot", snap, big)
		if got := mustRead(t, s, stream); !equalVersions(versions(got), seqVersions(7, 7)) {
			t.Fatalf("stream holds versions %v, want 7 alone", versions(got))
		}
		deleteAndRecreate(t, s, stream, varve.Exact(7))
	})
}
