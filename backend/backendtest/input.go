package backendtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/varve-go/varve"
)

func testBadInput(t *testing.T, f Factory) {
	s := store(t, f)
	pfx := prefix(t)
	max := s.Config().MaxEventSize
	one := func(e varve.Event) []varve.Event { return []varve.Event{e} }
	ok := varve.Event{Type: "T", Data: []byte("{}")}
	dupID := varve.NewEventID()
	cases := []struct {
		name   string
		stream string
		exp    varve.ExpectedVersion
		evs    []varve.Event
	}{
		{"empty stream id", "", varve.Any, one(ok)},
		{"stream id too long", pfx + strings.Repeat("x", 257-len(pfx)), varve.Any, one(ok)},
		{"stream id not utf8", pfx + "\xff\xfe", varve.Any, one(ok)},
		{"stream id $all", "$all", varve.Any, one(ok)},
		{"system stream id", "$" + pfx + "sys", varve.Any, one(ok)},
		{"stream id with NUL", pfx + "a\x00b", varve.Any, one(ok)},
		{"type with NUL", pfx + "t3", varve.Any, one(varve.Event{Type: "T\x00"})},
		{"no events", pfx + "none", varve.Any, nil},
		{"too many events", pfx + "many", varve.Any, make([]varve.Event, varve.DefaultMaxAppendEvents+1)},
		{"empty type", pfx + "t0", varve.Any, one(varve.Event{Data: []byte("x")})},
		{"type too long", pfx + "t1", varve.Any, one(varve.Event{Type: strings.Repeat("t", 257)})},
		{"type not utf8", pfx + "t2", varve.Any, one(varve.Event{Type: "\xc3\x28"})},
		{"data too big", pfx + "big", varve.Any, one(varve.Event{Type: "T", Data: make([]byte, max+1)})},
		{"data+metadata too big", pfx + "big2", varve.Any, one(varve.Event{Type: "T", Data: make([]byte, max/2+1), Metadata: make([]byte, max/2+1)})},
		{"bad event in a batch", pfx + "batch", varve.Any, append(events("E", 5), varve.Event{Type: ""})},
		{"duplicate ids in one append", pfx + "dup", varve.Any, []varve.Event{{ID: dupID, Type: "T"}, {ID: dupID, Type: "T"}}},
		{"invalid expected version", pfx + "exp", varve.ExpectedVersion(-7), one(ok)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.evs {
				if tc.evs[i].Type == "" && tc.name == "too many events" {
					tc.evs[i].Type = "T"
				}
			}
			_, err := s.Append(ctxFor(t), tc.stream, tc.exp, tc.evs...)
			wantErr(t, tc.name, err, varve.ErrInvalidArgument)
			if varve.CheckStreamID(tc.stream) == nil {
				_, err := s.StreamInfo(ctxFor(t), tc.stream)
				wantErr(t, "stream info after a refused append", err, varve.ErrStreamNotFound)
			}
		})
	}
	t.Run("append bytes", func(t *testing.T) {
		evs := events("E", 5)
		for i := range evs {
			evs[i].Data = make([]byte, 1000)
		}
		per := len(evs[0].Data) + len(evs[0].Metadata)
		small, err := varve.New(f.New(t), varve.Config{MaxAppendBytes: 4 * per})
		if err != nil {
			t.Fatal(err)
		}
		defer small.Close()
		stream := pfx + "bytes"
		_, err = small.Append(ctxFor(t), stream, varve.Any, evs...)
		wantErr(t, "append over MaxAppendBytes", err, varve.ErrInvalidArgument)
		_, err = small.StreamInfo(ctxFor(t), stream)
		wantErr(t, "stream info after an append over MaxAppendBytes", err, varve.ErrStreamNotFound)
		if res := mustAppend(t, small, stream, varve.NoStream, evs[:4]...); res.LastVersion != 4 {
			t.Fatalf("append of exactly MaxAppendBytes: %+v", res)
		}
	})
	t.Run("checkpoint names", func(t *testing.T) {
		cs := s.Checkpoints()
		if lacks(t, f, s, varve.Capabilities{Checkpoints: true}) {
			t.Skipf("backend %q does not implement varve.CheckpointStore", s.Features().Name)
		}
		for _, name := range []string{"", pfx + "a\x00b", pfx + strings.Repeat("n", varve.MaxNameLen+1-len(pfx)), pfx + "\xff\xfe"} {
			err := cs.Save(ctxFor(t), name, varve.Position{Seq: 1})
			wantErr(t, fmt.Sprintf("save checkpoint %q", name), err, varve.ErrInvalidArgument)
			_, _, err = cs.Load(ctxFor(t), name)
			wantErr(t, fmt.Sprintf("load checkpoint %q", name), err, varve.ErrInvalidArgument)
		}
	})
	t.Run("snapshot stream ids", func(t *testing.T) {
		ss := s.Snapshots()
		if lacks(t, f, s, varve.Capabilities{Snapshots: true}) {
			t.Skipf("backend %q does not implement varve.SnapshotStore", s.Features().Name)
		}
		for _, stream := range []string{"", pfx + "a\x00b", pfx + "\xff\xfe", varve.AllStream, pfx + strings.Repeat("x", varve.MaxStreamIDLen+1-len(pfx))} {
			err := ss.Save(ctxFor(t), varve.Snapshot{Stream: stream, Version: 1, Data: []byte("{}")})
			wantErr(t, fmt.Sprintf("save snapshot of %q", stream), err, varve.ErrInvalidArgument)
			_, _, err = ss.Load(ctxFor(t), stream)
			wantErr(t, fmt.Sprintf("load snapshot of %q", stream), err, varve.ErrInvalidArgument)
		}
	})
	t.Run("system streams", func(t *testing.T) {
		ctx := ctxFor(t)
		sys := varve.SystemPrefix + pfx + "system"
		start, err := s.LastPosition(ctx)
		if err != nil {
			t.Fatal(err)
		}
		evs := events("Sys", 3)
		res, err := s.System().Append(ctx, sys, varve.NoStream, evs...)
		if err != nil || res.LastVersion != 3 {
			t.Fatalf("system append to %q: %+v %v", sys, res, err)
		}
		got := mustRead(t, s, sys)
		if len(got) != 3 {
			t.Fatalf("read %d events of a system stream, want 3", len(got))
		}
		for i := range got {
			sameEvent(t, got[i], evs[i])
		}
		if info, err := s.StreamInfo(ctx, sys); err != nil || info.Version != 3 {
			t.Fatalf("info of a system stream: %+v %v", info, err)
		}
		if inAll := eventually(t, s, start, sys, 3); len(inAll) != 3 || inAll[0].ID != evs[0].ID {
			t.Fatalf("$all has %d events of the system stream, want 3", len(inAll))
		}
		wantErr(t, "truncate of a system stream", s.Truncate(ctx, sys, 2), varve.ErrInvalidArgument)
		wantErr(t, "delete of a system stream", s.Delete(ctx, sys, varve.Any), varve.ErrInvalidArgument)
		wantErr(t, "tombstone of a system stream", s.Tombstone(ctx, sys, varve.Any), varve.ErrInvalidArgument)
		_, err = s.System().Append(ctx, pfx+"plain", varve.Any, events("E", 1)...)
		wantErr(t, "system append to a stream without the prefix", err, varve.ErrInvalidArgument)
		if n := len(mustRead(t, s, sys)); n != 3 {
			t.Fatalf("refused calls changed the system stream: %d events", n)
		}
		if err := s.System().Truncate(ctx, sys, 3); err != nil {
			t.Fatalf("system truncate: %v", err)
		}
		if got := versions(mustRead(t, s, sys)); !equalVersions(got, []varve.Version{3}) {
			t.Fatalf("system stream after truncate before 3: %v", got)
		}
		if err := s.System().Delete(ctx, sys, varve.Exact(3)); err != nil {
			t.Fatalf("system delete: %v", err)
		}
		wantNotFound(t, s, sys)
	})
	t.Run("at the limits", func(t *testing.T) {
		id := pfx + strings.Repeat("x", varve.MaxStreamIDLen-len(pfx))
		big := varve.Event{Type: strings.Repeat("t", varve.MaxEventTypeLen), Data: make([]byte, max-10), Metadata: make([]byte, 10)}
		res := mustAppend(t, s, id, varve.NoStream, big)
		got := mustRead(t, s, id)
		if len(got) != 1 || len(got[0].Data) != max-10 || res.LastVersion != 1 {
			t.Fatalf("an event at the size limit did not round-trip")
		}
	})
	t.Run("reads", func(t *testing.T) {
		_, err := collect(s.ReadStream(ctxFor(t), ""))
		wantErr(t, "read of an empty stream id", err, varve.ErrInvalidArgument)
		_, err = collect(s.ReadStream(ctxFor(t), pfx+"x", varve.Limit(-1)))
		wantErr(t, "negative limit", err, varve.ErrInvalidArgument)
		_, err = collect(s.ReadStream(ctxFor(t), pfx+"x", varve.PageSize(-1)))
		wantErr(t, "negative page size", err, varve.ErrInvalidArgument)
		_, err = collect(s.ReadStream(ctxFor(t), pfx+"x\x00"))
		wantErr(t, "read of a stream id with NUL", err, varve.ErrInvalidArgument)
		_, err = s.StreamInfo(ctxFor(t), strings.Repeat("y", 300))
		wantErr(t, "stream info of a too long id", err, varve.ErrInvalidArgument)
		wantErr(t, "delete at an invalid version", s.Delete(ctxFor(t), pfx+"x", varve.ExpectedVersion(-9)), varve.ErrInvalidArgument)
	})
}

func testClosed(t *testing.T, f Factory) {
	b := f.New(t)
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	stream := prefix(t) + "closed"
	mustAppend(t, s, stream, varve.NoStream, events("E", 1)...)
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	ctx := ctxFor(t)
	_, err = s.Append(ctx, stream, varve.Any, events("E", 1)...)
	wantErr(t, "append to a closed store", err, varve.ErrClosed)
	_, err = collect(s.ReadStream(ctx, stream))
	wantErr(t, "read of a closed store", err, varve.ErrClosed)
	_, err = s.StreamInfo(ctx, stream)
	wantErr(t, "info of a closed store", err, varve.ErrClosed)
	// The backend itself refuses work once closed, whoever calls it.
	_, err = b.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: events("E", 1)})
	wantErr(t, "append to a closed backend", err, varve.ErrClosed)
	_, err = b.ReadStream(ctx, varve.StreamQuery{Stream: stream, Limit: 10}, nil)
	wantErr(t, "read of a closed backend", err, varve.ErrClosed)
	_, err = b.ReadAll(ctx, varve.AllQuery{Limit: 10}, nil)
	wantErr(t, "read $all of a closed backend", err, varve.ErrClosed)
	_, err = b.StreamInfo(ctx, stream)
	wantErr(t, "info of a closed backend", err, varve.ErrClosed)
	if ts, ok := b.(varve.TagStore); ok {
		_, err = ts.AppendIf(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: []varve.Event{tagged("E", "closed")}}, tagCond("closed"))
		wantErr(t, "conditional append to a closed backend", err, varve.ErrClosed)
		_, _, err = ts.ReadQuery(ctx, varve.QueryRequest{Query: tagCond("closed").FailIfEventsMatch, Limit: 10}, nil)
		wantErr(t, "query read of a closed backend", err, varve.ErrClosed)
	}
	if ma, ok := b.(varve.MultiAppender); ok {
		_, err = ma.AppendMulti(ctx, varve.MultiAppendRequest{Appends: []varve.StreamAppend{{Stream: stream, Expected: varve.Any, Events: events("E", 1)}}, Categories: []string{""}})
		wantErr(t, "multi-stream append to a closed backend", err, varve.ErrClosed)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("closing a closed backend: %v", err)
	}
}

func testCancelled(t *testing.T, f Factory) {
	s := store(t, f)
	stream := prefix(t) + "cancel"
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Append(ctx, stream, varve.Any, events("E", 3)...)
	wantErr(t, "append with a cancelled context", err, context.Canceled)
	_, err = collect(s.ReadStream(ctx, stream))
	wantErr(t, "read with a cancelled context", err, context.Canceled)
	// The backend honours the context itself, whoever calls it.
	b := s.Backend()
	_, err = b.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: events("E", 2)})
	wantErr(t, "backend append with a cancelled context", err, context.Canceled)
	_, err = b.ReadAll(ctx, varve.AllQuery{Limit: 10}, nil)
	wantErr(t, "backend $all read with a cancelled context", err, context.Canceled)
	if ts, ok := b.(varve.TagStore); ok {
		_, err = ts.AppendIf(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: []varve.Event{tagged("E", "cancel")}}, tagCond("cancel"))
		wantErr(t, "backend conditional append with a cancelled context", err, context.Canceled)
		_, err = ts.AppendIf(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: []varve.Event{tagged("E", "cancel")}}, varve.AppendCondition{})
		wantErr(t, "backend tagged append with a cancelled context", err, context.Canceled)
	}
	if ma, ok := b.(varve.MultiAppender); ok {
		_, err = ma.AppendMulti(ctx, varve.MultiAppendRequest{Appends: []varve.StreamAppend{{Stream: stream, Expected: varve.Any, Events: events("E", 1)}}, Categories: []string{""}})
		wantErr(t, "backend multi-stream append with a cancelled context", err, context.Canceled)
	}
	_, err = s.StreamInfo(ctxFor(t), stream)
	wantErr(t, "stream after cancelled appends", err, varve.ErrStreamNotFound)

	dl, cancel2 := context.WithDeadline(context.Background(), timeInPast)
	defer cancel2()
	_, err = s.Append(dl, stream, varve.Any, events("E", 1)...)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append past its deadline: %v", err)
	}
}

// tagCond is the condition that nothing carrying tag exists.
func tagCond(tag string) varve.AppendCondition {
	return varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Tags: []string{tag}}}}}
}
