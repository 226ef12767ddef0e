package otelvarve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/subscription"
)

// lagInstruments measure how far a consumer is behind the head of $all.
type lagInstruments struct {
	events metric.Int64ObservableGauge
	age    metric.Float64ObservableGauge
	limit  int
}

func newLagInstruments(m metric.Meter, limit int) (lagInstruments, error) {
	l := lagInstruments{limit: limit}
	var err1, err2 error
	l.events, err1 = m.Int64ObservableGauge("varve.consumer.lag", metric.WithUnit("{event}"),
		metric.WithDescription("Events of $all after a consumer's checkpoint, counted up to a limit."))
	l.age, err2 = m.Float64ObservableGauge("varve.consumer.lag.time", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest event after a consumer's checkpoint; 0 when the consumer is caught up."))
	if err := errors.Join(err1, err2); err != nil {
		return l, fmt.Errorf("otelvarve: lag instruments: %w", err)
	}
	return l, nil
}

// lagPage is the page size of the reads that count a consumer's lag.
const lagPage = 512

// observe measures the lag of a consumer at checkpoint cp: it counts the
// events of $all after cp, up to the limit, reading the store's backend
// itself, past the store's tracer, so that the count makes no spans of its
// own, in pages of at most subscription.LagPageBytes of event data.
func (l lagInstruments) observe(ctx context.Context, o metric.Observer, store *varve.Store, cp varve.Position, set metric.MeasurementOption) error {
	b := store.Backend()
	var n int
	var age float64
	buf := make([]varve.RecordedEvent, 0, min(lagPage, l.limit))
	for after := cp; n < l.limit; {
		want := min(lagPage, l.limit-n)
		page, err := b.ReadAll(ctx, varve.AllQuery{After: after, Limit: want, MaxBytes: subscription.LagPageBytes}, buf[:0])
		if err != nil {
			return fmt.Errorf("otelvarve: lag after %s: %w", after, err)
		}
		if n == 0 && len(page) > 0 {
			age = max(time.Since(page[0].RecordedAt).Seconds(), 0)
		}
		n += len(page)
		spent := 0
		for i := range page {
			spent += page[i].Size()
		}
		// A page short of its count ends the log unless its byte budget
		// ended it.
		if len(page) < want && spent < subscription.LagPageBytes {
			break
		}
		after = page[len(page)-1].Position
		clear(page)
	}
	o.ObserveInt64(l.events, int64(n), set)
	o.ObserveFloat64(l.age, age, set)
	return nil
}

// ObserveConsumer exports the lag of a consumer of $all called name (a
// subscription, a projection) whose checkpoint checkpoint returns; it is
// called on the collecting goroutine, so it must be safe for concurrent
// use. The gauges varve.consumer.lag and varve.consumer.lag.time (see
// docs/observability.md) are read when the meter provider collects: each
// collection reads the events after the checkpoint, up to [WithLagLimit]
// of them. Unregister the returned registration when the consumer stops.
func ObserveConsumer(name string, store *varve.Store, checkpoint func() varve.Position, opts ...Option) (metric.Registration, error) {
	c := newConfig(opts)
	m := c.mp.Meter(ScopeName)
	lag, err := newLagInstruments(m, c.lagLimit)
	if err != nil {
		return nil, err
	}
	set := metric.WithAttributeSet(attribute.NewSet(AttrSubscription.String(name)))
	reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		return lag.observe(ctx, o, store, checkpoint(), set)
	}, lag.events, lag.age)
	if err != nil {
		return nil, fmt.Errorf("otelvarve: observe consumer %q: %w", name, err)
	}
	return reg, nil
}

// ObserveDispatcher exports the counters of a delivery dispatcher of the
// subscription sub ([delivery.Dispatcher.Stats]) and its lag behind the
// head of $all, read when the meter provider collects; every instrument
// carries varve.subscription. Unregister the returned registration when the
// dispatcher stops.
func ObserveDispatcher(sub *subscription.Subscription, d *delivery.Dispatcher, opts ...Option) (metric.Registration, error) {
	c := newConfig(opts)
	m := c.mp.Meter(ScopeName)
	lag, err := newLagInstruments(m, c.lagLimit)
	if err != nil {
		return nil, err
	}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		i, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		i, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	read := counter("varve.delivery.events.read", "{event}", "Events a dispatcher read that passed its subscription's filters.")
	delivered := counter("varve.delivery.events.delivered", "{event}", "Events a dispatcher's sink took.")
	parked := counter("varve.delivery.events.parked", "{event}", "Events a dispatcher parked.")
	attempts := counter("varve.delivery.attempts", "{attempt}", "Delivery attempts.")
	retries := counter("varve.delivery.retries", "{attempt}", "Failed delivery attempts that were scheduled again.")
	inFlight := gauge("varve.delivery.in_flight", "{attempt}", "Delivery attempts running.")
	pending := gauge("varve.delivery.pending", "{event}", "Events read and not yet delivered or parked.")
	parkedStreams := gauge("varve.delivery.parked_streams", "{stream}", "Streams held back by a parked event (per-stream order).")
	cpAge, err := m.Float64ObservableGauge("varve.delivery.checkpoint.age", metric.WithUnit("s"),
		metric.WithDescription("Time since the last save of the checkpoint while delivered events wait to be saved; 0 when every delivered event is saved."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelvarve: observe dispatcher %q: %w", sub.Name(), err)
	}
	set := metric.WithAttributeSet(attribute.NewSet(AttrSubscription.String(sub.Name())))
	store := sub.Store()
	reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		st := d.Stats()
		o.ObserveInt64(read, int64(st.Read), set)
		o.ObserveInt64(delivered, int64(st.Delivered), set)
		o.ObserveInt64(parked, int64(st.Parked), set)
		o.ObserveInt64(attempts, int64(st.Attempts), set)
		o.ObserveInt64(retries, int64(st.Retries), set)
		o.ObserveInt64(inFlight, int64(st.InFlight), set)
		o.ObserveInt64(pending, int64(st.Pending), set)
		o.ObserveInt64(parkedStreams, int64(st.ParkedStreams), set)
		age := 0.0
		if st.Checkpoint != st.Saved {
			age = time.Since(st.SavedAt).Seconds()
		}
		o.ObserveFloat64(cpAge, age, set)
		return lag.observe(ctx, o, store, st.Checkpoint, set)
	}, read, delivered, parked, attempts, retries, inFlight, pending, parkedStreams, cpAge, lag.events, lag.age)
	if err != nil {
		return nil, fmt.Errorf("otelvarve: observe dispatcher %q: %w", sub.Name(), err)
	}
	return reg, nil
}

// StatsSource is what has aggregate counters: an [aggregate.Repository] of
// any state type.
type StatsSource interface {
	Stats() aggregate.Stats
}

// ObserveRepository exports the counters of an aggregate repository
// ([aggregate.Repository.Stats]), read when the meter provider collects,
// with varve.repository set to name: among them the conflicts of its saves
// and the retries of Execute. Unregister the returned registration when the
// repository is no longer used.
func ObserveRepository(name string, r StatsSource, opts ...Option) (metric.Registration, error) {
	c := newConfig(opts)
	m := c.mp.Meter(ScopeName)
	type counter struct {
		inst metric.Int64ObservableCounter
		get  func(aggregate.Stats) uint64
	}
	var counters []counter
	var insts []metric.Observable
	var errs []error
	add := func(name, unit, desc string, get func(aggregate.Stats) uint64) {
		i, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		counters = append(counters, counter{i, get})
		insts = append(insts, i)
	}
	add("varve.aggregate.loads", "{load}", "Aggregate loads.", func(s aggregate.Stats) uint64 { return s.Loads })
	add("varve.aggregate.cache.hits", "{load}", "Loads served by the repository's cache.", func(s aggregate.Stats) uint64 { return s.CacheHits })
	add("varve.aggregate.cache.misses", "{load}", "Loads the cache could not serve.", func(s aggregate.Stats) uint64 { return s.CacheMisses })
	add("varve.aggregate.saves", "{save}", "Successful saves.", func(s aggregate.Stats) uint64 { return s.Saves })
	add("varve.aggregate.save_failures", "{save}", "Failed saves, conflicts included.", func(s aggregate.Stats) uint64 { return s.SaveFailures })
	add("varve.aggregate.conflicts", "{save}", "Saves that failed on the expected version.", func(s aggregate.Stats) uint64 { return s.Conflicts })
	add("varve.aggregate.retries", "{attempt}", "Extra attempts of Execute after a conflict.", func(s aggregate.Stats) uint64 { return s.Retries })
	add("varve.aggregate.snapshot_errors", "{error}", "Snapshots that failed to encode, decode or save.", func(s aggregate.Stats) uint64 { return s.SnapshotErrors })
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelvarve: observe repository %q: %w", name, err)
	}
	set := metric.WithAttributeSet(attribute.NewSet(AttrRepository.String(name)))
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := r.Stats()
		for _, c := range counters {
			o.ObserveInt64(c.inst, int64(c.get(st)), set)
		}
		return nil
	}, insts...)
	if err != nil {
		return nil, fmt.Errorf("otelvarve: observe repository %q: %w", name, err)
	}
	return reg, nil
}

// ProjectionSource is what has a projection's status: a
// [projection.Runner].
type ProjectionSource interface {
	Status() projection.Status
}

// ObserveProjection exports the status of a projection's runner
// ([projection.Runner.Status]), read when the meter provider collects:
// events handled and parked, the handling rate, the state (a gauge per
// state, 1 for the current one), and the lag behind the head of $all in
// events and in time from its checkpoint (as [ObserveConsumer]), with
// varve.projection and varve.projection_version. Unregister the returned
// registration when the runner stops.
func ObserveProjection(store *varve.Store, r ProjectionSource, opts ...Option) (metric.Registration, error) {
	c := newConfig(opts)
	m := c.mp.Meter(ScopeName)
	lag, err := newLagInstruments(m, c.lagLimit)
	if err != nil {
		return nil, err
	}
	var errs []error
	handled, err := m.Int64ObservableCounter("varve.projection.events.handled", metric.WithUnit("{event}"),
		metric.WithDescription("Events a projection's runner handled."))
	errs = append(errs, err)
	parked, err := m.Int64ObservableCounter("varve.projection.events.parked", metric.WithUnit("{event}"),
		metric.WithDescription("Events a projection's runner parked as poison."))
	errs = append(errs, err)
	rate, err := m.Float64ObservableGauge("varve.projection.rate", metric.WithUnit("{event}/s"),
		metric.WithDescription("Events a projection's runner handled per second over its last batches."))
	errs = append(errs, err)
	state, err := m.Int64ObservableGauge("varve.projection.state", metric.WithUnit("1"),
		metric.WithDescription("1 for the state a projection's runner is in, 0 for the others."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelvarve: observe projection: %w", err)
	}
	st := r.Status()
	base := []attribute.KeyValue{AttrProjection.String(st.Name), AttrProjectionVersion.Int(st.Version)}
	set := metric.WithAttributeSet(attribute.NewSet(base...))
	states := []projection.State{projection.Idle, projection.CatchingUp, projection.Live, projection.Paused, projection.Failed, projection.Rebuilding}
	stateSets := make([]metric.ObserveOption, len(states))
	for i, s := range states {
		stateSets[i] = metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue(nil), base...), AttrState.String(s.String()))...))
	}
	reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		st := r.Status()
		o.ObserveInt64(handled, st.Handled, set)
		o.ObserveInt64(parked, st.Parked, set)
		o.ObserveFloat64(rate, st.Rate, set)
		for i, s := range states {
			v := int64(0)
			if st.State == s {
				v = 1
			}
			o.ObserveInt64(state, v, stateSets[i])
		}
		return lag.observe(ctx, o, store, st.Position, set)
	}, handled, parked, rate, state, lag.events, lag.age)
	if err != nil {
		return nil, fmt.Errorf("otelvarve: observe projection %q: %w", st.Name, err)
	}
	return reg, nil
}
