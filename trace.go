package varve

import (
	"context"
	"slices"
	"time"
)

// StoreTracer is a [Config.Tracer] whose hooks depend on the store they serve,
// such as metrics labelled with the backend's name. New calls TracerFor
// once with the backend's Features and looks for the other interfaces on
// the Tracer it returns (not on a StoreTracer that it returns in turn), so
// that one value in a shared Config serves each store with its own.
type StoreTracer interface {
	TracerFor(f Features) any
}

// The operations that [AppendTracer] and [ReadTracer] see, in the Op
// field of their data, named as OpenTelemetry's db.operation.name would
// name them:
//
//   - "append": Store.Append and System.Append ([Backend.Append]);
//   - "append_if": Store.AppendIf ([TagStore.AppendIf]);
//   - "append_multi": Store.AppendMulti ([MultiAppender.AppendMulti]);
//   - "append_snapshot": Snapshots.Append
//     ([CommitSnapshotStore.AppendWithSnapshot]);
//   - "read_stream": a page of a stream ([Backend.ReadStream]);
//   - "read_all": a page of $all ([Backend.ReadAll]), also each page that
//     the Store filters itself for a filtered read;
//   - "read_filtered": a page of the events of $all that match a filter,
//     read through the backend's indexes ([FilteredReader.ReadAllFiltered]);
//   - "read_query": a page of the events that match a query
//     ([TagStore.ReadQuery]);
//   - "read_snapshot": a stream's snapshot and the first page of its
//     events after it ([CommitSnapshotStore.ReadFromSnapshot]).
const (
	opAppend         = "append"
	opAppendIf       = "append_if"
	opAppendMulti    = "append_multi"
	opAppendSnapshot = "append_snapshot"
	opReadStream     = "read_stream"
	opReadAll        = "read_all"
	opReadFiltered   = "read_filtered"
	opReadQuery      = "read_query"
	opReadSnapshot   = "read_snapshot"
)

// AppendTracer traces the appends of a store.
type AppendTracer interface {
	// TraceAppendStart is called when an append that the Store validated
	// is about to reach the backend. The context it returns is the one the
	// Store passes to the [MetadataInjector], the backend and
	// TraceAppendEnd.
	TraceAppendStart(ctx context.Context, data TraceAppendStartData) context.Context
	// TraceAppendEnd is called once after each TraceAppendStart, when the
	// backend has returned (or the MetadataInjector's metadata was
	// refused).
	TraceAppendEnd(ctx context.Context, data TraceAppendEndData)
}

// TraceAppendStartData describes an append.
type TraceAppendStartData struct {
	// Op is "append", "append_if", "append_multi" or "append_snapshot".
	Op string
	// Stream, Expected and Events are those of an append to one stream,
	// the events as the caller passed them (every id set).
	Stream   string
	Expected ExpectedVersion
	Events   []Event
	// Appends and Checks are the parts of a multi-stream append.
	Appends []StreamAppend
	Checks  []StreamCheck
	// Condition is the condition of AppendIf.
	Condition AppendCondition
}

// TraceAppendEndData is the outcome of an append.
type TraceAppendEndData struct {
	// Start is what TraceAppendStart was given.
	Start TraceAppendStartData
	// Events and Bytes count the events of the append (of every part) and
	// the sum of len(Data)+len(Metadata) over them, with the metadata as
	// written, whether the append committed or not.
	Events, Bytes int
	// Result is the result of an append to one stream, Results those of
	// the parts of a multi-stream append.
	Result  AppendResult
	Results []AppendResult
	// Duration is the time of the backend's call.
	Duration time.Duration
	// Err is the backend's error (not yet wrapped by the Store), or the
	// [ErrInvalidArgument] that refused the MetadataInjector's metadata.
	Err error
}

// ReadTracer traces the pages that a store's reads ask the backend for:
// an iterator calls it once per page.
type ReadTracer interface {
	// TraceReadStart is called when a page is about to be read. The
	// context it returns is the one the Store passes to the backend and to
	// TraceReadEnd.
	TraceReadStart(ctx context.Context, data TraceReadStartData) context.Context
	// TraceReadEnd is called once after each TraceReadStart.
	TraceReadEnd(ctx context.Context, data TraceReadEndData)
}

// TraceReadStartData describes the read of a page.
type TraceReadStartData struct {
	// Op is "read_stream", "read_all", "read_filtered", "read_query" or
	// "read_snapshot".
	Op string
	// Stream is the stream of read_stream and read_snapshot; From that of
	// read_stream; Direction that of read_stream and read_all.
	Stream    string
	Direction Direction
	From      Version
	// After is where a page of $all, of a filter or of a query starts
	// (the position a backward page of $all is before).
	After Position
	// Filter is the filter of read_filtered as the backend gets it:
	// its lists sorted, with the categories that stream prefixes imply.
	Filter Filter
	// Query is the query of read_query.
	Query Query
	// Limit and MaxBytes bound the page, in events and in bytes of event
	// data (0: no byte bound).
	Limit, MaxBytes int
}

// TraceReadEndData is the outcome of the read of a page.
type TraceReadEndData struct {
	// Start is what TraceReadStart was given.
	Start TraceReadStartData
	// Page is the events read, as the backend returned them (none when Err
	// is set); the hook must not modify them nor keep them.
	Page []RecordedEvent
	// Duration is the time of the backend's call.
	Duration time.Duration
	// Err is the backend's error, not yet wrapped by the Store.
	Err error
}

// MetadataInjector is a [Config.Tracer] that adds to the metadata of appended
// events; package otelvarve stores the W3C trace context of the append
// there. For each event of an append that reaches the backend, after
// TraceAppendStart, the Store calls InjectMetadata with the context that
// TraceAppendStart returned (ctx itself without an AppendTracer), the
// event's metadata and the most bytes of metadata the event may have:
// MaxEventSize less the event's data, and no more than what keeps the
// append within MaxAppendBytes. The Store stores what it returns (the
// metadata itself: no change). It changes a copy of the events, never the
// caller's slice, and does not read the metadata: any bytes are stored as
// they are. Metadata longer than the limit fails the append with
// [ErrInvalidArgument], before the backend sees it. An idempotent retry of
// an append stores nothing new, whatever the metadata of its events.
type MetadataInjector interface {
	InjectMetadata(ctx context.Context, meta []byte, limit int) []byte
}

// tracing is the hooks a Store found on its Tracer; a Store without any
// has none (nil).
type tracing struct {
	app  AppendTracer
	read ReadTracer
	meta MetadataInjector
}

func newTracing(t any, f Features) *tracing {
	if st, ok := t.(StoreTracer); ok {
		t = st.TracerFor(f)
	}
	var tr tracing
	tr.app, _ = t.(AppendTracer)
	tr.read, _ = t.(ReadTracer)
	tr.meta, _ = t.(MetadataInjector)
	if tr == (tracing{}) {
		return nil
	}
	return &tr
}

func (t *tracing) startAppend(ctx context.Context, d TraceAppendStartData) context.Context {
	if t.app != nil {
		return t.app.TraceAppendStart(ctx, d)
	}
	return ctx
}

func (t *tracing) endAppend(ctx context.Context, d TraceAppendEndData) {
	if t.app != nil {
		t.app.TraceAppendEnd(ctx, d)
	}
}

// inject returns events with the metadata of the MetadataInjector, in a
// copy when it changes any; budget is what the append may still grow by,
// and shrinks by what it grew.
func (t *tracing) inject(ctx context.Context, events []Event, maxEvent int, budget *int) ([]Event, error) {
	if t.meta == nil {
		return events, nil
	}
	var out []Event
	for i := range events {
		e := &events[i]
		limit := min(maxEvent-len(e.Data), len(e.Metadata)+*budget)
		m := t.meta.InjectMetadata(ctx, e.Metadata, limit)
		if len(m) == len(e.Metadata) && (len(m) == 0 || &m[0] == &e.Metadata[0]) {
			continue
		}
		if len(m) > limit {
			return events, invalid("event %d: the tracer's metadata of %d bytes is over its limit of %d (MaxEventSize, MaxAppendBytes)", i, len(m), limit)
		}
		*budget -= len(m) - len(e.Metadata)
		if out == nil {
			out = slices.Clone(events)
		}
		out[i].Metadata = m
	}
	if out == nil {
		return events, nil
	}
	return out, nil
}

func eventBytes(events []Event) int {
	n := 0
	for i := range events {
		n += len(events[i].Data) + len(events[i].Metadata)
	}
	return n
}

// appendTraced is an append to one stream that do, the backend's call,
// carries out between the hooks of the store's tracer.
func (s *Store) appendTraced(ctx context.Context, op string, req AppendRequest, cond AppendCondition,
	do func(context.Context, AppendRequest) (AppendResult, error)) (AppendResult, error) {
	t := s.tr
	d := TraceAppendStartData{Op: op, Stream: req.Stream, Expected: req.Expected, Events: req.Events, Condition: cond}
	ctx = t.startAppend(ctx, d)
	budget := s.cfg.MaxAppendBytes - eventBytes(req.Events)
	var res AppendResult
	events, err := t.inject(ctx, req.Events, s.cfg.MaxEventSize, &budget)
	began := time.Now()
	if err == nil {
		req.Events = events
		res, err = do(ctx, req)
	}
	t.endAppend(ctx, TraceAppendEndData{Start: d, Events: len(events), Bytes: eventBytes(events), Result: res,
		Duration: time.Since(began), Err: err})
	return res, err
}

// appendMultiTraced is AppendMulti of the backend between the hooks of
// the store's tracer.
func (s *Store) appendMultiTraced(ctx context.Context, req MultiAppendRequest) ([]AppendResult, error) {
	t := s.tr
	d := TraceAppendStartData{Op: opAppendMulti, Appends: req.Appends, Checks: req.Checks}
	ctx = t.startAppend(ctx, d)
	budget := s.cfg.MaxAppendBytes
	for _, a := range req.Appends {
		budget -= eventBytes(a.Events)
	}
	var err error
	parts := req.Appends
	for i := 0; i < len(parts) && err == nil; i++ {
		var events []Event
		events, err = t.inject(ctx, parts[i].Events, s.cfg.MaxEventSize, &budget)
		if err == nil && len(events) > 0 && &events[0] != &parts[i].Events[0] {
			if &parts[0] == &req.Appends[0] {
				parts = slices.Clone(parts)
			}
			parts[i].Events = events
		}
	}
	var res []AppendResult
	began := time.Now()
	if err == nil {
		req.Appends = parts
		res, err = s.multi.AppendMulti(ctx, req)
	}
	end := TraceAppendEndData{Start: d, Results: res, Duration: time.Since(began), Err: err}
	for _, a := range parts {
		end.Events += len(a.Events)
		end.Bytes += eventBytes(a.Events)
	}
	t.endAppend(ctx, end)
	return res, err
}

// readTraced reads a page by do, the backend's call that appends it to
// buf[:before], between the hooks of the store's tracer.
func (s *Store) readTraced(ctx context.Context, d TraceReadStartData, before int,
	do func(context.Context) ([]RecordedEvent, error)) ([]RecordedEvent, error) {
	t := s.tr
	if t.read == nil {
		return do(ctx)
	}
	ctx = t.read.TraceReadStart(ctx, d)
	began := time.Now()
	out, err := do(ctx)
	end := TraceReadEndData{Start: d, Duration: time.Since(began), Err: err}
	if err == nil && len(out) > before {
		end.Page = out[before:]
	}
	t.read.TraceReadEnd(ctx, end)
	return out, err
}
