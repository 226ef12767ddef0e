package backendtest

import (
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

func testSnapshots(t *testing.T, f Factory) {
	s := store(t, f)
	ss := s.Snapshots()
	if lacks(t, f, s, varve.Capabilities{Snapshots: true}) {
		t.Skipf("backend %q does not implement varve.SnapshotStore", s.Features().Name)
	}
	stream := prefix(t) + "snap"
	if _, ok, err := ss.Load(ctxFor(t), stream); err != nil || ok {
		t.Fatalf("load of a missing snapshot: ok=%v err=%v", ok, err)
	}
	// A system stream's snapshot, of a stream without events (package
	// subscription keeps what a consumer reads so), as the Store allows.
	system := varve.Snapshot{Stream: varve.SystemPrefix + prefix(t) + "sys", Version: 1, SchemaVersion: 1, Data: []byte(`{"f":1}`), TakenAt: time.Now().UTC().Truncate(time.Millisecond)}
	if err := ss.Save(ctxFor(t), system); err != nil {
		t.Fatalf("save the snapshot of a system stream without events: %v", err)
	}
	if got, ok, err := ss.Load(ctxFor(t), system.Stream); err != nil || !ok {
		t.Fatalf("load the snapshot of a system stream: ok=%v err=%v", ok, err)
	} else {
		sameSnapshot(t, "a system stream's snapshot", got, system)
	}
	for v := varve.Version(10); v <= 20; v += 10 {
		want := varve.Snapshot{Stream: stream, Version: v, SchemaVersion: 2, Data: []byte(`{"v":` + string(rune('0'+v/10)) + `}`), TakenAt: time.Now().UTC().Truncate(time.Millisecond)}
		if err := ss.Save(ctxFor(t), want); err != nil {
			t.Fatal(err)
		}
		got, ok, err := ss.Load(ctxFor(t), stream)
		if err != nil || !ok {
			t.Fatalf("load: ok=%v err=%v", ok, err)
		}
		sameSnapshot(t, "snapshot round trip", got, want)
	}
	// Deleting or tombstoning a stream drops its snapshot: a re-created
	// stream must not load the state of its previous life.
	for _, tombstone := range []bool{false, true} {
		stream := prefix(t) + "snap-del"
		mustAppend(t, s, stream, varve.NoStream, events("E", 3)...)
		if err := ss.Save(ctxFor(t), varve.Snapshot{Stream: stream, Version: 3, SchemaVersion: 1, Data: []byte("{}"), TakenAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		del := s.Delete
		if tombstone {
			del = s.Tombstone
		}
		if err := del(ctxFor(t), stream, varve.Any); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := ss.Load(ctxFor(t), stream); err != nil || ok {
			t.Fatalf("snapshot after delete (tombstone=%v): ok=%v err=%v", tombstone, ok, err)
		}
	}
}

func testCheckpoints(t *testing.T, f Factory) {
	s := store(t, f)
	cs := s.Checkpoints()
	if lacks(t, f, s, varve.Capabilities{Checkpoints: true}) {
		t.Skipf("backend %q does not implement varve.CheckpointStore", s.Features().Name)
	}
	name := prefix(t) + "sub"
	if _, ok, err := cs.Load(ctxFor(t), name); err != nil || ok {
		t.Fatalf("load of a missing checkpoint: ok=%v err=%v", ok, err)
	}
	for _, p := range []varve.Position{{Seq: 5}, {Commit: 7, Seq: 9}, {Seq: 1 << 60}} {
		if err := cs.Save(ctxFor(t), name, p); err != nil {
			t.Fatal(err)
		}
		got, ok, err := cs.Load(ctxFor(t), name)
		if err != nil || !ok || got != p {
			t.Fatalf("checkpoint round trip: got %s ok=%v err=%v, want %s", got, ok, err, p)
		}
	}
	// Any valid name is its own key: names that differ only in characters a
	// backend might escape or fold keep their own positions, up to the
	// longest name allowed.
	pfx := prefix(t)
	long := pfx + strings.Repeat("é", (varve.MaxNameLen-len(pfx))/2)
	long += strings.Repeat("z", varve.MaxNameLen-len(long))
	names := []string{pfx + "a.b", pfx + "a_b", pfx + "a/b", pfx + "a b", pfx + "A.b", pfx + "a*b", pfx + "a>b", pfx + "a%2Eb", pfx + "ä.b", long}
	for i, n := range names {
		if err := cs.Save(ctxFor(t), n, varve.Position{Seq: uint64(i + 1)}); err != nil {
			t.Fatalf("save checkpoint %q: %v", n, err)
		}
	}
	for i, n := range names {
		got, ok, err := cs.Load(ctxFor(t), n)
		if err != nil || !ok || got != (varve.Position{Seq: uint64(i + 1)}) {
			t.Fatalf("checkpoint %q: got %s ok=%v err=%v, want %d", n, got, ok, err, i+1)
		}
	}
}

func testWatch(t *testing.T, f Factory) {
	s := store(t, f)
	if lacks(t, f, s, varve.Capabilities{Watch: true}) {
		t.Skipf("backend %q does not implement varve.Watcher", s.Features().Name)
	}
	ch := s.Watch()
	mustAppend(t, s, prefix(t)+"watch", varve.NoStream, events("E", 1)...)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake-up within 10s of a commit")
	}
}
