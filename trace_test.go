package varve_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

// traced is one operation a recorder saw: its start, its end and how many
// ends it got.
type traced struct {
	append bool
	as     varve.TraceAppendStartData
	ae     varve.TraceAppendEndData
	rs     varve.TraceReadStartData
	re     varve.TraceReadEndData
	// the page's events and bytes: the page itself is the Store's after
	// the hook
	n, bytes int
	ends     int
}

type callID struct{}

// recorder is a Tracer that records every hook call; inject, when set,
// gives the metadata of appended events.
type recorder struct {
	mu     sync.Mutex
	calls  []traced
	inject func(meta []byte, limit int) []byte
	limits []int
}

func (r *recorder) TraceAppendStart(ctx context.Context, d varve.TraceAppendStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, traced{append: true, as: d})
	return context.WithValue(ctx, callID{}, len(r.calls)-1)
}

func (r *recorder) TraceAppendEnd(ctx context.Context, d varve.TraceAppendEndData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &r.calls[ctx.Value(callID{}).(int)]
	c.ae = d
	c.ends++
}

func (r *recorder) TraceReadStart(ctx context.Context, d varve.TraceReadStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, traced{rs: d})
	return context.WithValue(ctx, callID{}, len(r.calls)-1)
}

func (r *recorder) TraceReadEnd(ctx context.Context, d varve.TraceReadEndData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &r.calls[ctx.Value(callID{}).(int)]
	c.re, c.n, c.bytes = d, len(d.Page), pageBytes(d.Page)
	c.re.Page = nil
	c.ends++
}

func (r *recorder) InjectMetadata(ctx context.Context, meta []byte, limit int) []byte {
	if _, ok := ctx.Value(callID{}).(int); !ok {
		panic("InjectMetadata without the context of TraceAppendStart")
	}
	r.mu.Lock()
	r.limits = append(r.limits, limit)
	r.mu.Unlock()
	if r.inject == nil {
		return meta
	}
	return r.inject(meta, limit)
}

// take returns the calls recorded since the last take, after checking that
// each got exactly one end.
func (r *recorder) take(t *testing.T) []traced {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls, r.limits = nil, nil
	for i, c := range out {
		if c.ends != 1 {
			t.Errorf("call %d (%+v): %d ends, want 1", i, c, c.ends)
		}
	}
	return out
}

// ctxChecked is a backend whose appends and reads check that their context
// is the one the tracer's start returned.
type ctxChecked struct {
	varve.Backend
	t *testing.T
}

func (b ctxChecked) Unwrap() varve.Backend { return b.Backend }

func (b ctxChecked) check(ctx context.Context) {
	if _, ok := ctx.Value(callID{}).(int); !ok {
		b.t.Error("the backend got a context that is not the tracer's")
	}
}

func (b ctxChecked) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	b.check(ctx)
	return b.Backend.Append(ctx, req)
}

func (b ctxChecked) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	b.check(ctx)
	return b.Backend.ReadStream(ctx, q, buf)
}

func (b ctxChecked) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	b.check(ctx)
	return b.Backend.ReadAll(ctx, q, buf)
}

// TestTracerHooks: every operation of the Store that reaches the backend
// calls its hook's start once and its end once, with the operation, its
// stream or position, and the events and bytes it wrote or read; the
// backend runs under the context that the start returned.
func TestTracerHooks(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	s := newStore(t, ctxChecked{inCommits{memory.New()}, t}, varve.Config{Tracer: rec, PageSize: 2})
	plain := newStore(t, bare{memory.New()}, varve.Config{Tracer: rec, PageSize: 2})
	data := []byte(`{"n":1}`) // 7 bytes
	ev := func(typ string, tags ...string) varve.Event {
		e := varve.NewEvent(typ, data)
		e.Tags = tags
		return e
	}
	claim := varve.Query{Items: []varve.QueryItem{{Tags: []string{"user:ada"}}}}
	type want struct {
		op            string
		stream        string
		events, bytes int
		after         varve.Position
		filter        bool
	}
	for _, tc := range []struct {
		name string
		do   func() error
		want []want
	}{
		{"append", func() error {
			_, err := s.Append(ctx, "order-1", varve.NoStream, ev("A"), ev("B"), ev("C"))
			return err
		}, []want{{op: "append", stream: "order-1", events: 3, bytes: 21}}},
		{"system append", func() error {
			_, err := s.System().Append(ctx, "$parked-x", varve.Any, ev("P"))
			return err
		}, []want{{op: "append", stream: "$parked-x", events: 1, bytes: 7}}},
		{"append if", func() error {
			_, err := s.AppendIf(ctx, "users", varve.Any, varve.AppendCondition{FailIfEventsMatch: claim}, ev("Claimed", "user:ada"))
			return err
		}, []want{{op: "append_if", stream: "users", events: 1, bytes: 7}}},
		{"append multi", func() error {
			_, err := s.AppendMulti(ctx, []varve.StreamAppend{
				{Stream: "acct-1", Expected: varve.NoStream, Events: []varve.Event{ev("D")}},
				{Stream: "acct-2", Expected: varve.NoStream, Events: []varve.Event{ev("C"), ev("N")}},
			})
			return err
		}, []want{{op: "append_multi", events: 3, bytes: 21}}},
		{"append with a snapshot", func() error {
			_, err := s.Snapshots().Append(ctx, "acct-9", varve.NoStream, varve.Snapshot{Version: 1}, ev("O"))
			return err
		}, []want{{op: "append_snapshot", stream: "acct-9", events: 1, bytes: 7}}},
		{"read stream, a page at a time", func() error {
			for _, err := range s.ReadStream(ctx, "order-1") {
				if err != nil {
					return err
				}
			}
			return nil
		}, []want{{op: "read_stream", stream: "order-1", events: 2, bytes: 14}, {op: "read_stream", stream: "order-1", events: 1, bytes: 7}}},
		{"read all page", func() error {
			_, err := s.ReadAllPage(ctx, varve.Position{Seq: 1}, nil, varve.Limit(1))
			return err
		}, []want{{op: "read_all", events: 1, bytes: 7, after: varve.Position{Seq: 1}}}},
		{"filtered page through the backend", func() error {
			_, err := s.ReadAllPage(ctx, varve.Start, nil, varve.Filter{Categories: []string{"acct"}})
			return err
		}, []want{{op: "read_filtered", events: 2, bytes: 14, filter: true}}},
		{"query page", func() error {
			_, err := s.ReadQueryPage(ctx, claim, varve.Start, nil)
			return err
		}, []want{{op: "read_query", events: 1, bytes: 7}}},
		{"read from a snapshot", func() error {
			_, _, evs, err := s.Snapshots().Read(ctx, "acct-9")
			for range evs {
			}
			return err
		}, []want{{op: "read_snapshot", stream: "acct-9"}}},
		{"append, store that filters itself", func() error {
			_, err := plain.Append(ctx, "order-1", varve.NoStream, ev("A"), ev("B"), ev("C"))
			if err == nil {
				_, err = plain.Append(ctx, "acct-1", varve.NoStream, ev("D"))
			}
			return err
		}, []want{{op: "append", stream: "order-1", events: 3, bytes: 21}, {op: "append", stream: "acct-1", events: 1, bytes: 7}}},
		{"filtered page that the Store filters from pages of $all", func() error {
			page, err := plain.ReadAllPage(ctx, varve.Start, nil, varve.Filter{Categories: []string{"acct"}}, varve.Limit(1))
			if err == nil && len(page.Events) != 1 {
				return errors.New("no event in the page")
			}
			return err
		}, []want{ // pages of 1, then 2 events (the page size) until one matches
			{op: "read_all", events: 1, bytes: 7},
			{op: "read_all", events: 2, bytes: 14, after: varve.Position{Seq: 1}},
			{op: "read_all", events: 1, bytes: 7, after: varve.Position{Seq: 3}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			calls := rec.take(t)
			if len(calls) != len(tc.want) {
				t.Fatalf("%d calls, want %d: %+v", len(calls), len(tc.want), calls)
			}
			for i, w := range tc.want {
				c := calls[i]
				if c.append {
					if c.as.Op != w.op || c.as.Stream != w.stream || c.ae.Start.Op != w.op || c.ae.Events != w.events || c.ae.Bytes != w.bytes || c.ae.Err != nil {
						t.Errorf("call %d: %s of %q, end %+v; want %s of %q, %d events, %d bytes", i, c.as.Op, c.as.Stream, c.ae, w.op, w.stream, w.events, w.bytes)
					}
					continue
				}
				if c.rs.Op != w.op || c.rs.Stream != w.stream || c.rs.After != w.after || c.re.Start.Op != w.op || c.re.Err != nil ||
					(w.events > 0 && (c.n != w.events || c.bytes != w.bytes)) || c.rs.Limit == 0 || c.rs.Filter.IsZero() == w.filter {
					t.Errorf("call %d: %+v, end %+v; want %s of %q after %s, %d events, %d bytes", i, c.rs, c.re, w.op, w.stream, w.after, w.events, w.bytes)
				}
			}
		})
	}
	calls := rec.take(t)
	if len(calls) != 0 {
		t.Fatalf("%d calls left over", len(calls))
	}
}

// TestTracerErrors: the end of a failed call carries the backend's error
// and the events of the append; a call the Store refuses before the
// backend is not traced.
func TestTracerErrors(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	s := newStore(t, memory.New(), varve.Config{Tracer: rec})
	if _, err := s.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("A", nil)); err != nil {
		t.Fatal(err)
	}
	rec.take(t)
	_, err := s.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("A", nil), varve.NewEvent("B", nil))
	calls := rec.take(t)
	if !errors.Is(err, varve.ErrWrongExpectedVersion) || len(calls) != 1 || !errors.Is(calls[0].ae.Err, varve.ErrWrongExpectedVersion) ||
		calls[0].ae.Events != 2 || strings.HasPrefix(calls[0].ae.Err.Error(), "varve:") {
		t.Fatalf("conflict: %v; calls %+v", err, calls)
	}
	for range s.ReadStream(ctx, "missing") {
	}
	calls = rec.take(t)
	if len(calls) != 1 || !errors.Is(calls[0].re.Err, varve.ErrStreamNotFound) || calls[0].n != 0 {
		t.Fatalf("read of a missing stream: %+v", calls)
	}
	for _, refused := range []func() error{
		func() error { _, err := s.Append(ctx, "$system", varve.Any, varve.NewEvent("A", nil)); return err },
		func() error { _, err := s.Append(ctx, "order-2", varve.Any); return err },
		func() error {
			_, err := s.ReadAllPage(ctx, varve.Start, nil, varve.Limit(-1))
			return err
		},
	} {
		if err := refused(); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Fatalf("refused call: %v", err)
		}
	}
	if calls := rec.take(t); len(calls) != 0 {
		t.Fatalf("refused calls were traced: %+v", calls)
	}
}

// TestMetadataInjector: the injector's metadata is stored with each event
// of every kind of append, within a limit that keeps the event within
// MaxEventSize and the append within MaxAppendBytes; the caller's events
// stay as they were; metadata over the limit fails the append with
// ErrInvalidArgument before the backend sees it.
func TestMetadataInjector(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{inject: func(meta []byte, limit int) []byte {
		return append(append([]byte(nil), meta...), "+t"...)
	}}
	s := newStore(t, inCommits{memory.New()}, varve.Config{Tracer: rec, MaxEventSize: 100, MaxAppendBytes: 150})
	events := []varve.Event{
		{ID: varve.NewEventID(), Type: "A", Data: make([]byte, 90), Metadata: []byte("m")},
		{ID: varve.NewEventID(), Type: "B", Data: make([]byte, 50)},
	}
	if _, err := s.Append(ctx, "order-1", varve.NoStream, events...); err != nil {
		t.Fatal(err)
	}
	if string(events[0].Metadata) != "m" || events[1].Metadata != nil {
		t.Fatalf("the caller's events changed: %q %q", events[0].Metadata, events[1].Metadata)
	}
	// Event 0 may have 100-90 bytes of metadata; event 1 what is left of
	// 150 after 90+3 (event 0 as injected) and its 50 bytes of data.
	if !equalInts(rec.limits, []int{10, 7}) {
		t.Errorf("limits %v, want [10 7]", rec.limits)
	}
	calls := rec.take(t)
	if len(calls) != 1 || calls[0].ae.Bytes != 90+3+50+2 {
		t.Fatalf("calls %+v, want one of %d bytes", calls, 90+3+50+2)
	}
	var got []string
	for e, err := range s.ReadStream(ctx, "order-1") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(e.Metadata))
	}
	if strings.Join(got, ",") != "m+t,+t" {
		t.Fatalf("stored metadata %q", got)
	}

	if _, err := s.AppendMulti(ctx, []varve.StreamAppend{
		{Stream: "acct-1", Expected: varve.NoStream, Events: []varve.Event{varve.NewEvent("D", nil)}},
		{Stream: "acct-2", Expected: varve.NoStream, Events: []varve.Event{varve.NewEvent("C", nil)}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshots().Append(ctx, "acct-3", varve.NoStream, varve.Snapshot{Version: 1}, varve.NewEvent("O", nil)); err != nil {
		t.Fatal(err)
	}
	rec.take(t)
	for _, stream := range []string{"acct-1", "acct-2", "acct-3"} {
		for e, err := range s.ReadStream(ctx, stream) {
			if err != nil || string(e.Metadata) != "+t" {
				t.Fatalf("%s: metadata %q, %v", stream, e.Metadata, err)
			}
		}
	}
	rec.take(t)

	// A hook that ignores its limit.
	rec.inject = func(meta []byte, limit int) []byte { return bytes.Repeat([]byte("x"), limit+1) }
	_, err := s.Append(ctx, "order-2", varve.NoStream, varve.NewEvent("A", nil))
	calls = rec.take(t)
	if !errors.Is(err, varve.ErrInvalidArgument) || len(calls) != 1 || !errors.Is(calls[0].ae.Err, varve.ErrInvalidArgument) {
		t.Fatalf("metadata past the limit: %v, calls %+v", err, calls)
	}
	_, err = s.AppendMulti(ctx, []varve.StreamAppend{{Stream: "acct-4", Expected: varve.NoStream, Events: []varve.Event{varve.NewEvent("D", nil)}}})
	if !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("multi-stream append with metadata past the limit: %v", err)
	}
	rec.take(t)
	for _, stream := range []string{"order-2", "acct-4"} {
		if _, err := s.StreamInfo(ctx, stream); !errors.Is(err, varve.ErrStreamNotFound) {
			t.Fatalf("%s after a refused append: %v", stream, err)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// perStore is a StoreTracer: each store gets a recorder named for its
// backend.
type perStore struct {
	mu    sync.Mutex
	names []string
	recs  []*recorder
}

func (p *perStore) TracerFor(f varve.Features) any {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names = append(p.names, f.Name)
	r := &recorder{}
	p.recs = append(p.recs, r)
	return r
}

// TestStoreTracer: New asks a StoreTracer once for the tracer of its store,
// and the hooks are those of the tracer it returns.
func TestStoreTracer(t *testing.T) {
	p := &perStore{}
	cfg := varve.Config{Tracer: p}
	a := newStore(t, memory.New(), cfg)
	b := newStore(t, memory.New(), cfg)
	if _, err := b.Append(context.Background(), "order-1", varve.NoStream, varve.NewEvent("A", nil)); err != nil {
		t.Fatal(err)
	}
	_ = a
	if len(p.names) != 2 || p.names[0] != "memory" {
		t.Fatalf("TracerFor called for %v", p.names)
	}
	if n0, n1 := len(p.recs[0].take(t)), len(p.recs[1].take(t)); n0 != 0 || n1 != 1 {
		t.Fatalf("calls %d and %d, want 0 and 1", n0, n1)
	}
	// A Tracer with no hook is no tracer.
	if _, err := varve.New(memory.New(), varve.Config{Tracer: struct{}{}}); err != nil {
		t.Fatal(err)
	}
}

// static answers appends and reads of $all and streams without
// allocating, so that what the Store allocates around them shows.
type static struct {
	varve.Backend
	page []varve.RecordedEvent
}

func (s static) Append(context.Context, varve.AppendRequest) (varve.AppendResult, error) {
	return varve.AppendResult{LastVersion: 1, Position: varve.Position{Seq: 1}}, nil
}

func (s static) ReadAll(_ context.Context, _ varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	return append(buf, s.page...), nil
}

func (s static) ReadStream(_ context.Context, _ varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	return append(buf, s.page...), nil
}

// nop implements every hook and does nothing.
type nop struct{}

func (nop) TraceAppendStart(ctx context.Context, _ varve.TraceAppendStartData) context.Context {
	return ctx
}
func (nop) TraceAppendEnd(context.Context, varve.TraceAppendEndData) {}
func (nop) TraceReadStart(ctx context.Context, _ varve.TraceReadStartData) context.Context {
	return ctx
}
func (nop) TraceReadEnd(context.Context, varve.TraceReadEndData) {}

// TestNoTracerNoAllocs: without a Tracer an append allocates nothing, and
// the hooks of a tracer that does nothing add no allocation to an append or
// a read.
func TestNoTracerNoAllocs(t *testing.T) {
	ctx := context.Background()
	b := static{Backend: memory.New(), page: make([]varve.RecordedEvent, 3)}
	events := []varve.Event{varve.NewEvent("A", []byte("{}"))}
	buf := make([]varve.RecordedEvent, 0, 8)
	measure := func(tr any) (appendAllocs, pageAllocs float64) {
		s := newStore(t, b, varve.Config{Tracer: tr})
		appendAllocs = testing.AllocsPerRun(200, func() {
			if _, err := s.Append(ctx, "order-1", varve.Any, events...); err != nil {
				t.Fatal(err)
			}
		})
		pageAllocs = testing.AllocsPerRun(200, func() {
			if _, err := s.ReadAllPage(ctx, varve.Start, buf[:0], varve.Limit(8)); err != nil {
				t.Fatal(err)
			}
		})
		return appendAllocs, pageAllocs
	}
	a0, p0 := measure(nil)
	a1, p1 := measure(nop{})
	if a0 != 0 {
		t.Errorf("an append without a tracer: %v allocations, want 0", a0)
	}
	if a1 != a0 || p1 != p0 {
		t.Errorf("with hooks that do nothing: %v and %v allocations per append and page, without a tracer %v and %v", a1, p1, a0, p0)
	}
}

// BenchmarkTracerHook measures an append and a page of $all on a backend
// that does no work, without a tracer and with hooks that do nothing.
func BenchmarkTracerHook(b *testing.B) {
	ctx := context.Background()
	back := static{Backend: memory.New(), page: make([]varve.RecordedEvent, 3)}
	events := []varve.Event{varve.NewEvent("A", []byte("{}"))}
	for _, tc := range []struct {
		name string
		tr   any
	}{{"none", nil}, {"nop", nop{}}} {
		s, err := varve.New(back, varve.Config{Tracer: tc.tr})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name+"/append", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Append(ctx, "order-1", varve.Any, events...); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/read_all_page", func(b *testing.B) {
			buf := make([]varve.RecordedEvent, 0, 8)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.ReadAllPage(ctx, varve.Start, buf[:0], varve.Limit(8)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// printer prints what a store sends its backend.
type printer struct{}

func (printer) TraceAppendStart(ctx context.Context, d varve.TraceAppendStartData) context.Context {
	return ctx
}

func (printer) TraceAppendEnd(_ context.Context, d varve.TraceAppendEndData) {
	fmt.Printf("%s %s: %d events, %d bytes, err %v\n", d.Start.Op, d.Start.Stream, d.Events, d.Bytes, d.Err)
}

func (printer) TraceReadStart(ctx context.Context, d varve.TraceReadStartData) context.Context {
	return ctx
}

func (printer) TraceReadEnd(_ context.Context, d varve.TraceReadEndData) {
	fmt.Printf("%s %s: %d events, err %v\n", d.Start.Op, d.Start.Stream, len(d.Page), d.Err)
}

// An application's tracer, here one that prints; package otelvarve has
// one for OpenTelemetry (otelvarve.NewTracer).
func ExampleConfig_tracer() {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{Tracer: printer{}})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	store.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("OrderPlaced", []byte(`{"total":40}`)))
	store.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("OrderPlaced", nil))
	for _, err := range store.ReadStream(ctx, "order-1") {
		if err != nil {
			panic(err)
		}
	}
	// Output:
	// append order-1: 1 events, 12 bytes, err <nil>
	// append order-1: 1 events, 0 bytes, err wrong expected version: expected no-stream, actual 1
	// read_stream order-1: 1 events, err <nil>
}

func pageBytes(page []varve.RecordedEvent) int {
	n := 0
	for i := range page {
		n += page[i].Size()
	}
	return n
}
