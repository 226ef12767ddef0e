package backendtest

import (
	"testing"

	"github.com/varve-go/varve"
)

func testTruncate(t *testing.T, f Factory) {
	s := store(t, f)
	pfx := prefix(t)
	stream := pfx + "trunc"
	start, err := s.LastPosition(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, stream, varve.NoStream, events("E", 10)...)
	if err := s.Truncate(ctxFor(t), stream, 4); err != nil {
		t.Fatal(err)
	}
	if got := versions(mustRead(t, s, stream)); !equalVersions(got, seqVersions(4, 10)) {
		t.Fatalf("after truncate before 4: %v", got)
	}
	if got := versions(mustRead(t, s, stream, varve.ReadBackward())); !equalVersions(got, seqVersions(10, 4)) {
		t.Fatalf("backward after truncate before 4: %v", got)
	}
	if got := versions(eventually(t, s, start, pfx, 7)); !equalVersions(got, seqVersions(4, 10)) {
		t.Fatalf("$all after truncate: %v", got)
	}
	info, err := s.StreamInfo(ctxFor(t), stream)
	if err != nil || info.Version != 10 {
		t.Fatalf("truncate changed the version: %+v %v", info, err)
	}
	if err := s.Truncate(ctxFor(t), stream, 2); err != nil {
		t.Fatalf("truncating less than before: %v", err)
	}
	if res := mustAppend(t, s, stream, varve.Exact(10), events("E", 1)...); res.LastVersion != 11 {
		t.Fatalf("append after truncate: %+v", res)
	}
	if err := s.Truncate(ctxFor(t), stream, 100); err != nil {
		t.Fatalf("truncate past the end: %v", err)
	}
	if got := mustRead(t, s, stream); len(got) != 0 {
		t.Fatalf("truncated past the end, still %d events", len(got))
	}
	wantErr(t, "truncate of a missing stream", s.Truncate(ctxFor(t), pfx+"missing", 3), varve.ErrStreamNotFound)
}

func testDelete(t *testing.T, f Factory) {
	s := store(t, f)
	pfx := prefix(t)
	stream := pfx + "del"
	start, err := s.LastPosition(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	old := events("Old", 3)
	mustAppend(t, s, stream, varve.NoStream, old...)
	// $all offers the events before the delete, so that their absence
	// after it says something.
	if got := eventually(t, s, start, pfx, 3); len(got) != 3 {
		t.Fatalf("$all has %d events of the stream before the delete, want 3", len(got))
	}
	wantErr(t, "delete at a stale version", s.Delete(ctxFor(t), stream, varve.Exact(2)), varve.ErrWrongExpectedVersion)
	if err := s.Delete(ctxFor(t), stream, varve.Exact(3)); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, s, stream)
	info, err := s.StreamInfo(ctxFor(t), stream)
	if err != nil || !info.Deleted || info.Tombstoned || info.Version != 0 {
		t.Fatalf("info of a deleted stream: %+v %v", info, err)
	}
	if got := readAllPrefix(t, s, start, pfx); len(got) != 0 {
		t.Fatalf("$all still has %d events of a deleted stream", len(got))
	}
	_, err = s.Append(ctxFor(t), stream, varve.Exact(3), events("E", 1)...)
	wantErr(t, "append at the old version", err, varve.ErrWrongExpectedVersion)
	fresh := events("New", 2)
	if res := mustAppend(t, s, stream, varve.NoStream, fresh...); res.FirstVersion != 1 || res.LastVersion != 2 {
		t.Fatalf("append after delete starts afresh: %+v", res)
	}
	got := mustRead(t, s, stream)
	if len(got) != 2 || got[0].ID != fresh[0].ID {
		t.Fatalf("stream after re-creation: %d events", len(got))
	}
	info, err = s.StreamInfo(ctxFor(t), stream)
	if err != nil || info.Deleted || info.Version != 2 {
		t.Fatalf("info after re-creation: %+v %v", info, err)
	}
	if err := s.Delete(ctxFor(t), stream, varve.Any); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, stream, varve.Any, events("Again", 1)...)
	wantErr(t, "delete of a missing stream", s.Delete(ctxFor(t), pfx+"missing", varve.Any), varve.ErrStreamNotFound)
}

func testTombstone(t *testing.T, f Factory) {
	s := store(t, f)
	pfx := prefix(t)
	stream := pfx + "tomb"
	start, err := s.LastPosition(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, stream, varve.NoStream, events("E", 4)...)
	if got := eventually(t, s, start, pfx, 4); len(got) != 4 {
		t.Fatalf("$all has %d events of the stream before the tombstone, want 4", len(got))
	}
	if err := s.Tombstone(ctxFor(t), stream, varve.Exact(4)); err != nil {
		t.Fatal(err)
	}
	for _, exp := range []varve.ExpectedVersion{varve.Any, varve.NoStream, varve.StreamExists, varve.Exact(4)} {
		_, err := s.Append(ctxFor(t), stream, exp, events("E", 1)...)
		wantErr(t, "append to a tombstone at "+exp.String(), err, varve.ErrStreamDeleted)
	}
	_, err = collect(s.ReadStream(ctxFor(t), stream))
	wantErr(t, "read of a tombstone", err, varve.ErrStreamDeleted)
	info, err := s.StreamInfo(ctxFor(t), stream)
	if err != nil || !info.Deleted || !info.Tombstoned {
		t.Fatalf("info of a tombstone: %+v %v", info, err)
	}
	wantErr(t, "truncate of a tombstone", s.Truncate(ctxFor(t), stream, 2), varve.ErrStreamDeleted)
	wantErr(t, "delete of a tombstone", s.Delete(ctxFor(t), stream, varve.Any), varve.ErrStreamDeleted)
	if got := readAllPrefix(t, s, start, pfx); len(got) != 0 {
		t.Fatalf("$all still has %d events of a tombstone", len(got))
	}
	// Tombstoning a stream that never existed reserves its name.
	never := pfx + "never"
	if err := s.Tombstone(ctxFor(t), never, varve.Any); err != nil {
		t.Fatalf("tombstone of a new stream: %v", err)
	}
	_, err = s.Append(ctxFor(t), never, varve.NoStream, events("E", 1)...)
	wantErr(t, "append to a tombstoned new stream", err, varve.ErrStreamDeleted)
}
