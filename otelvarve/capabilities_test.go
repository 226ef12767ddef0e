package otelvarve

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

// TestCapabilitySpans: on every backend, the capabilities it has are
// traced and measured through the tracer: a multi-stream append, a
// conditional append that commits and one whose condition fails, a query
// read and a filtered read; appended events carry the trace context of
// their span. Capabilities a backend lacks stay absent (the Store refuses
// them) and give no span.
func TestCapabilitySpans(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		tel := newTelemetry(t)
		b := k.Backend(t)
		name := b.Features().Name
		s, err := varve.New(b, varve.Config{Tracer: NewTracer(tel.opts()...)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		traced := func(e varve.RecordedEvent, span string) {
			t.Helper()
			sc, ok := SpanContextFromEvent(e)
			spans := tel.ended(span)
			if !ok || len(spans) == 0 || sc.TraceID() != spans[0].SpanContext().TraceID() {
				t.Errorf("%s@%d: trace context %v (ok %v), want that of the %s span", e.Stream, e.Version, sc.TraceID(), ok, span)
			}
		}
		spanAttrs := func(span string, i int, want map[attribute.Key]string) {
			t.Helper()
			spans := tel.ended(span)
			if len(spans) <= i {
				t.Fatalf("%d %s spans, want more than %d", len(spans), span, i)
			}
			got := attrs(spans[i].Attributes())
			for key, v := range want {
				if got[key] != v {
					t.Errorf("%s span %d: %s = %q, want %q", span, i, key, got[key], v)
				}
			}
		}

		if s.Capabilities().MultiAppend {
			_, err := s.AppendMulti(ctx, []varve.StreamAppend{
				{Stream: "acct-1", Expected: varve.NoStream, Events: []varve.Event{varve.NewEvent("Debited", nil)}},
				{Stream: "acct-2", Expected: varve.NoStream, Events: []varve.Event{varve.NewEvent("Credited", nil), varve.NewEvent("Noted", nil)}},
			}, varve.StreamCheck{Stream: "acct-3", Expected: varve.NoStream})
			if err != nil {
				t.Fatal(err)
			}
			spanAttrs(SpanAppendMulti, 0, map[attribute.Key]string{AttrBackend: name, AttrStreams: `["acct-1","acct-2"]`, AttrChecks: "1", AttrOutcome: "ok", AttrBatchSize: "3"})
			for ev, err := range s.ReadStream(ctx, "acct-2") {
				if err != nil {
					t.Fatal(err)
				}
				traced(ev, SpanAppendMulti)
			}
			ms := tel.collect(t)
			if n, _ := histCount(t, ms, "varve.append_multi.duration", map[attribute.Key]string{AttrBackend: name, AttrOutcome: "ok", AttrBatchSize: "2-10"}); n != 1 {
				t.Errorf("varve.append_multi.duration: %d measurements, want 1", n)
			}
		} else if len(tel.ended(SpanAppendMulti)) != 0 {
			t.Error("a multi-stream append span on a backend without them")
		}

		if s.Capabilities().Tags {
			claim := varve.Query{Items: []varve.QueryItem{{Types: []string{"Claimed"}, Tags: []string{"user:ada"}}}}
			ev := varve.NewEvent("Claimed", nil)
			ev.Tags = []string{"user:ada"}
			res, err := s.AppendIf(ctx, "users", varve.Any, varve.AppendCondition{FailIfEventsMatch: claim}, ev)
			if err != nil {
				t.Fatal(err)
			}
			readable(t, s, res.Position)
			again := varve.NewEvent("Claimed", nil)
			again.Tags = []string{"user:ada"}
			_, err = s.AppendIf(ctx, "users", varve.Any, varve.AppendCondition{FailIfEventsMatch: claim}, again)
			if !errors.Is(err, varve.ErrAppendConditionFailed) {
				t.Fatalf("second claim: %v, want a failed condition", err)
			}
			spanAttrs(SpanAppendIf, 0, map[attribute.Key]string{AttrBackend: name, AttrStream: "users", AttrQueryItems: "1", AttrOutcome: "ok", AttrBatchSize: "1"})
			spanAttrs(SpanAppendIf, 1, map[attribute.Key]string{AttrOutcome: "conflict"})
			page, err := s.ReadQueryPage(ctx, claim, varve.Start, nil)
			if err != nil || len(page.Events) != 1 {
				t.Fatalf("query read: %d events, %v", len(page.Events), err)
			}
			traced(page.Events[0], SpanAppendIf)
			spanAttrs(SpanReadQuery, 0, map[attribute.Key]string{AttrBackend: name, AttrQueryItems: "1", AttrOutcome: "ok"})
			ms := tel.collect(t)
			if n, _ := histCount(t, ms, "varve.append_if.duration", map[attribute.Key]string{AttrBackend: name, AttrOutcome: "conflict"}); n != 1 {
				t.Errorf("varve.append_if.duration with a failed condition: %d measurements, want 1", n)
			}
			if got := sum(t, ms, "varve.events.read", map[attribute.Key]string{AttrBackend: name, AttrRead: "query"}); got < 1 {
				t.Errorf("varve.events.read of queries: %d", got)
			}
		} else if len(tel.ended(SpanAppendIf))+len(tel.ended(SpanReadQuery)) != 0 {
			t.Error("DCB spans on a backend without them")
		}

		if s.Capabilities().Filter {
			res, err := s.Append(ctx, "order-9", varve.Any, varve.NewEvent("Placed", nil))
			if err != nil {
				t.Fatal(err)
			}
			readable(t, s, res.Position)
			before := len(tel.ended(SpanReadAll))
			page, err := s.ReadAllPage(ctx, varve.Start, nil, varve.Filter{Categories: []string{"order"}})
			if err != nil || len(page.Events) != 1 {
				t.Fatalf("filtered read: %d events, %v", len(page.Events), err)
			}
			spans := tel.ended(SpanReadAll)
			if len(spans) <= before {
				t.Fatal("no span of the filtered read")
			}
			spanAttrs(SpanReadAll, before, map[attribute.Key]string{AttrBackend: name, AttrCategories: `["order"]`})
			ms := tel.collect(t)
			if n, _ := histCount(t, ms, "varve.read_all.duration", map[attribute.Key]string{AttrBackend: name, AttrFiltered: "true"}); n < 1 {
				t.Errorf("varve.read_all.duration of filtered reads: %d measurements", n)
			}
		}
	})
}

// TestSnapshotInCommitSpans: on a backend that keeps snapshots in commits,
// the traced Store offers them, an append with a snapshot is
// traced as an append (its events carry the span's trace context) and a
// read from the snapshot as a stream read.
func TestSnapshotInCommitSpans(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		b := k.Backend(t)
		if _, ok := b.(varve.CommitSnapshotStore); !ok {
			t.Skipf("backend %q keeps no snapshots in commits", b.Features().Name)
		}
		ctx := context.Background()
		tel := newTelemetry(t)
		s, err := varve.New(b, varve.Config{Tracer: NewTracer(tel.opts()...)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if !s.Capabilities().SnapshotsInCommits {
			t.Fatal("the traced store does not keep snapshots in commits")
		}
		if _, err := s.Snapshots().Append(ctx, "acct-1", varve.NoStream, varve.Snapshot{Version: 1, Data: []byte("{}")}, varve.NewEvent("Opened", nil)); err != nil {
			t.Fatal(err)
		}
		appends := tel.ended(SpanAppend)
		if len(appends) != 1 || attrs(appends[0].Attributes())[AttrStream] != "acct-1" {
			t.Fatalf("%d append spans, want 1 of acct-1", len(appends))
		}
		reads := len(tel.ended(SpanReadStream))
		snap, ok, evs, err := s.Snapshots().Read(ctx, "acct-1")
		if err != nil || !ok || snap.Version != 1 {
			t.Fatalf("read: %+v %v %v", snap, ok, err)
		}
		for range evs {
			t.Fatal("events after the snapshot at the stream's version")
		}
		if n := len(tel.ended(SpanReadStream)); n != reads+1 {
			t.Fatalf("%d read spans after the read, want %d", n, reads+1)
		}
		for e, err := range s.ReadStream(ctx, "acct-1") {
			if err != nil {
				t.Fatal(err)
			}
			if sc, ok := SpanContextFromEvent(e); !ok || sc.TraceID() != appends[0].SpanContext().TraceID() {
				t.Errorf("event's trace context %v (ok %v), want the append span's", sc.TraceID(), ok)
			}
		}

		// Over a wrapper that keeps snapshots itself, the store keeps
		// none in commits, with the tracer as without it.
		own := ownSnapshots{Backend: k.Backend(t), snaps: map[string]varve.Snapshot{}}
		s2, err := varve.New(own, varve.Config{Tracer: NewTracer(tel.opts()...)})
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		if s2.Capabilities().SnapshotsInCommits {
			t.Fatal("snapshots in commits offered past a wrapper that keeps snapshots itself")
		}
		if err := s2.Snapshots().Save(ctx, varve.Snapshot{Stream: "acct-1", Version: 1}); err != nil || len(own.snaps) != 1 {
			t.Fatalf("save: %v; the wrapper holds %d snapshots, want 1", err, len(own.snaps))
		}
	})
}

// ownSnapshots wraps a backend and keeps snapshots itself.
type ownSnapshots struct {
	varve.Backend
	snaps map[string]varve.Snapshot
}

func (o ownSnapshots) Unwrap() varve.Backend { return o.Backend }

func (o ownSnapshots) SaveSnapshot(_ context.Context, s varve.Snapshot) error {
	o.snaps[s.Stream] = s
	return nil
}

func (o ownSnapshots) LoadSnapshot(_ context.Context, stream string) (varve.Snapshot, bool, error) {
	s, ok := o.snaps[stream]
	return s, ok, nil
}
