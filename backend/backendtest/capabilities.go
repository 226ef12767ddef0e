package backendtest

import (
	"bytes"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

func testSnapshots(t *testing.T, f Factory) {
	s := store(t, f)
	if !s.Features().Snapshots {
		t.Skipf("backend %q does not declare Features.Snapshots", s.Features().Name)
	}
	ss, ok := s.Backend().(varve.SnapshotStore)
	if !ok {
		t.Fatalf("backend declares Snapshots but does not implement varve.SnapshotStore")
	}
	stream := prefix(t) + "snap"
	if _, ok, err := ss.LoadSnapshot(ctxFor(t), stream); err != nil || ok {
		t.Fatalf("load of a missing snapshot: ok=%v err=%v", ok, err)
	}
	for v := varve.Version(10); v <= 20; v += 10 {
		want := varve.Snapshot{Stream: stream, Version: v, SchemaVersion: 2, Data: []byte(`{"v":` + string(rune('0'+v/10)) + `}`), TakenAt: time.Now().UTC().Truncate(time.Millisecond)}
		if err := ss.SaveSnapshot(ctxFor(t), want); err != nil {
			t.Fatal(err)
		}
		got, ok, err := ss.LoadSnapshot(ctxFor(t), stream)
		if err != nil || !ok {
			t.Fatalf("load: ok=%v err=%v", ok, err)
		}
		if got.Stream != want.Stream || got.Version != want.Version || got.SchemaVersion != want.SchemaVersion || !bytes.Equal(got.Data, want.Data) || !got.TakenAt.Equal(want.TakenAt) {
			t.Fatalf("snapshot round trip:\n got %+v\nwant %+v", got, want)
		}
	}
	// Deleting or tombstoning a stream drops its snapshot: a re-created
	// stream must not load the state of its previous life.
	for _, tombstone := range []bool{false, true} {
		stream := prefix(t) + "snap-del"
		mustAppend(t, s, stream, varve.NoStream, events("E", 3)...)
		if err := ss.SaveSnapshot(ctxFor(t), varve.Snapshot{Stream: stream, Version: 3, SchemaVersion: 1, Data: []byte("{}"), TakenAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		del := s.Delete
		if tombstone {
			del = s.Tombstone
		}
		if err := del(ctxFor(t), stream, varve.Any); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := ss.LoadSnapshot(ctxFor(t), stream); err != nil || ok {
			t.Fatalf("snapshot after delete (tombstone=%v): ok=%v err=%v", tombstone, ok, err)
		}
	}
}

func testCheckpoints(t *testing.T, f Factory) {
	s := store(t, f)
	if !s.Features().Checkpoints {
		t.Skipf("backend %q does not declare Features.Checkpoints", s.Features().Name)
	}
	cs, ok := s.Backend().(varve.CheckpointStore)
	if !ok {
		t.Fatalf("backend declares Checkpoints but does not implement varve.CheckpointStore")
	}
	name := prefix(t) + "sub"
	if _, ok, err := cs.LoadCheckpoint(ctxFor(t), name); err != nil || ok {
		t.Fatalf("load of a missing checkpoint: ok=%v err=%v", ok, err)
	}
	for _, p := range []varve.Position{{Seq: 5}, {Commit: 7, Seq: 9}, {Seq: 1 << 60}} {
		if err := cs.SaveCheckpoint(ctxFor(t), name, p); err != nil {
			t.Fatal(err)
		}
		got, ok, err := cs.LoadCheckpoint(ctxFor(t), name)
		if err != nil || !ok || got != p {
			t.Fatalf("checkpoint round trip: got %s ok=%v err=%v, want %s", got, ok, err, p)
		}
	}
}

func testWatch(t *testing.T, f Factory) {
	s := store(t, f)
	if !s.Features().Watch {
		t.Skipf("backend %q does not declare Features.Watch", s.Features().Name)
	}
	w, ok := s.Backend().(varve.Watcher)
	if !ok {
		t.Fatalf("backend declares Watch but does not implement varve.Watcher")
	}
	ch := w.Watch()
	mustAppend(t, s, prefix(t)+"watch", varve.NoStream, events("E", 1)...)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake-up within 10s of a commit")
	}
}
