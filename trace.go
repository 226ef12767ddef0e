package varve

import (
	"context"
	"slices"
	"time"
)

// Tracer is the hook of [Config.Tracer] that traces and measures a store's
// calls of its backend: spans, metrics, logs of slow calls. It has no
// methods of its own. [New] looks once, by type assertion, for the
// optional interfaces it implements, as pgx does with its tracers, and the
// Store then calls the hooks it found around each of its calls of the
// backend:
//
//   - [StoreTracer]: New asks it for the Tracer of this store (knowing the
//     backend's [Features]) and looks for the others on that one;
//   - [AppendTracer]: every append (Store.Append, System.Append, AppendIf,
//     AppendMulti, Snapshots.Append);
//   - [ReadTracer]: every page a read asks the backend for (ReadStream,
//     ReadAll and ReadAllPage, filtered or not, ReadQuery and
//     ReadQueryPage, Snapshots.Read);
//   - [MetadataInjector]: the metadata of appended events, such as the
//     trace context of the append.
//
// A call that the Store refuses before it reaches the backend (a bad
// argument, a closed store, a missing capability) is not traced, and
// neither are the other calls of the backend (stream info, lifecycle,
// snapshots saved or loaded, checkpoints, listings, leases). A Store
// without a Tracer, or with one that implements none of the interfaces,
// pays one nil check per call and allocates nothing for it.
//
// The hooks run on the goroutine of the call they trace, concurrently for
// concurrent calls, and must be safe for concurrent use. They must not
// modify what they are given, nor keep it past the hook.
type Tracer any

// StoreTracer is a [Tracer] whose hooks depend on the store they serve,
// such as metrics labelled with the backend's name. New calls TracerFor
// once with the backend's Features and looks for the other interfaces on
// the Tracer it returns (not on a StoreTracer that it returns in turn), so
// that one value in a shared Config serves each store with its own.
type StoreTracer interface {
	TracerFor(f Features) Tracer
}

// TraceOp names the operation of a store that a hook traces.
type TraceOp uint8

// The operations of [AppendTracer] and [ReadTracer].
const (
	// TraceAppend: Store.Append and System.Append ([Backend.Append]).
	TraceAppend TraceOp = iota + 1
	// TraceAppendIf: Store.AppendIf ([TagStore.AppendIf]).
	TraceAppendIf
	// TraceAppendMulti: Store.AppendMulti ([MultiAppender.AppendMulti]).
	TraceAppendMulti
	// TraceAppendSnapshot: Snapshots.Append
	// ([CommitSnapshotStore.AppendWithSnapshot]).
	TraceAppendSnapshot
	// TraceReadStream: a page of a stream ([Backend.ReadStream]).
	TraceReadStream
	// TraceReadAll: a page of $all ([Backend.ReadAll]), also each page
	// that the Store filters itself for a filtered read.
	TraceReadAll
	// TraceReadFiltered: a page of the events of $all that match a
	// filter, read through the backend's indexes
	// ([FilteredReader.ReadAllFiltered]).
	TraceReadFiltered
	// TraceReadQuery: a page of the events that match a query
	// ([TagStore.ReadQuery]).
	TraceReadQuery
	// TraceReadSnapshot: a stream's snapshot and the first page of its
	// events after it ([CommitSnapshotStore.ReadFromSnapshot]).
	TraceReadSnapshot
)

var traceOps = [...]string{"", "append", "append_if", "append_multi", "append_snapshot",
	"read_stream", "read_all", "read_filtered", "read_query", "read_snapshot"}

func (o TraceOp) String() string {
	if int(o) < len(traceOps) && o != 0 {
		return traceOps[o]
	}
	return "unknown"
}

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
	Op TraceOp
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
	Op TraceOp
	// Stream is the stream of TraceReadStream and TraceReadSnapshot;
	// Direction and From those of TraceReadStream.
	Stream    string
	Direction Direction
	From      Version
	// After is where a page of $all, of a filter or of a query starts.
	After Position
	// Filter is the filter of TraceReadFiltered as the backend gets it:
	// its lists sorted, with the categories that stream prefixes imply.
	Filter Filter
	// Query is the query of TraceReadQuery.
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

// Bytes returns the sum of [RecordedEvent.Size] over the page's events:
// the bytes of event data it read.
func (d TraceReadEndData) Bytes() int {
	n := 0
	for i := range d.Page {
		n += d.Page[i].Size()
	}
	return n
}

// MetadataInjector is a [Tracer] that adds to the metadata of appended
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

func newTracing(t Tracer, f Features) *tracing {
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
func (s *Store) appendTraced(ctx context.Context, op TraceOp, req AppendRequest, cond AppendCondition,
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
	d := TraceAppendStartData{Op: TraceAppendMulti, Appends: req.Appends, Checks: req.Checks}
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
