package backendtest

import (
	"context"
	"errors"
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
		_, err = collect(s.ReadStream(ctxFor(t), pfx+"x", varve.PageSize(0)))
		wantErr(t, "page size 0", err, varve.ErrInvalidArgument)
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
	_, err = s.StreamInfo(ctxFor(t), stream)
	wantErr(t, "stream after cancelled appends", err, varve.ErrStreamNotFound)

	dl, cancel2 := context.WithDeadline(context.Background(), timeInPast)
	defer cancel2()
	_, err = s.Append(dl, stream, varve.Any, events("E", 1)...)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append past its deadline: %v", err)
	}
}
