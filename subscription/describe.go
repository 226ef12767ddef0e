package subscription

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/varve-go/varve"
)

// DescriptorPrefix begins the key under which a subscription records what
// it reads: "$consumer-" and its name. [Open] saves the record as the
// snapshot of that (eventless) system stream when the subscription's
// reading differs from the last one saved: a snapshot read at each Open, a
// write only on a change, and nothing in the global log. [Lag] and the
// operator's tools count a consumer's lag by it. Recording is best effort:
// on a store without snapshots, or one that refuses the write, the
// subscription opens all the same, and its lag is counted over every event
// but system streams'.
const DescriptorPrefix = "$consumer-"

// Descriptor is what a subscription reads, as [Open] records it.
type Descriptor struct {
	Filter varve.Filter `json:"filter,omitzero"`
	// Query is the query a subscription to a consistency boundary reads.
	Query         varve.Query `json:"query,omitzero"`
	SystemStreams bool        `json:"system_streams,omitempty"`
	// Stream is the one stream a subscription to a stream reads.
	Stream string `json:"stream,omitempty"`
	// Segment and Segments are a segment's (see [Config.Segments]).
	Segment  int `json:"segment,omitempty"`
	Segments int `json:"segments,omitempty"`
}

func descriptorOf(cfg Config) Descriptor {
	d := Descriptor{Filter: cfg.Filter, Query: cfg.Query, SystemStreams: cfg.SystemStreams, Stream: cfg.Stream}
	if cfg.Segments > 1 {
		d.Segment, d.Segments = cfg.Segment, cfg.Segments
	}
	return d
}

// Match reports whether the subscription described reads e, on a store
// whose category separator is sep.
func (d Descriptor) Match(e *varve.RecordedEvent, sep string) bool {
	switch {
	case d.Stream != "":
		return e.Stream == d.Stream
	case !d.SystemStreams && strings.HasPrefix(e.Stream, varve.SystemPrefix):
		return false
	case d.Segments > 1 && SegmentOf(e.Stream, d.Segments) != d.Segment:
		return false
	case len(d.Query.Items) > 0:
		return d.Query.Match(e)
	}
	return d.Filter.Match(e, sep)
}

// describe records cfg's descriptor under its name when it differs from
// the last one recorded. Only ctx's end is an error.
func describe(ctx context.Context, store *varve.Store, cfg Config) error {
	if !store.Capabilities().Snapshots {
		return nil
	}
	want := descriptorOf(cfg)
	have, err := described(ctx, store, cfg.Name)
	if err != nil || have != nil && reflect.DeepEqual(*have, want) {
		return ctx.Err()
	}
	data, err := json.Marshal(want)
	if err == nil {
		_ = store.Snapshots().Save(ctx, varve.Snapshot{Stream: DescriptorPrefix + cfg.Name, Version: 1, SchemaVersion: 1, Data: data, TakenAt: time.Now()})
	}
	return ctx.Err()
}

// described returns the last descriptor recorded for the subscription
// name; nil when there is none.
func described(ctx context.Context, store *varve.Store, name string) (*Descriptor, error) {
	if !store.Capabilities().Snapshots {
		return nil, nil
	}
	snap, ok, err := store.Snapshots().Load(ctx, DescriptorPrefix+name)
	if err != nil || !ok {
		return nil, err
	}
	var d Descriptor
	if snap.SchemaVersion != 1 || json.Unmarshal(snap.Data, &d) != nil {
		return nil, nil
	}
	return &d, nil
}

// Described returns the descriptor that the subscription name recorded
// last; ok is false when it recorded none (one opened by an older varve, or
// on a store that refused the record).
func Described(ctx context.Context, store *varve.Store, name string) (d Descriptor, ok bool, err error) {
	have, err := described(ctx, store, name)
	if err != nil {
		return Descriptor{}, false, fmt.Errorf("subscription %q: descriptor: %w", name, err)
	}
	if have == nil {
		return Descriptor{}, false, nil
	}
	return *have, true, nil
}

// LagPageBytes bounds the event data and metadata of each page [Lag]
// reads: it needs only positions and stream ids, so a read that counts
// holds at most this much and one event at a time.
const LagPageBytes = 64 << 10

// LagScanFactor bounds the events [Lag] reads: limit times this (at least
// 1,000), since the events it reads but does not count (system streams',
// other segments') cost as much as those it counts.
const LagScanFactor = 8

// Lag counts the events after pos that the subscription described by d
// reads, counting at most limit of them; more is set when there are more,
// or when it read limit×LagScanFactor events (at least 1,000) without
// reaching the end. It reads $all through d's filter (the backend's
// indexes where it has them) in pages of at most LagPageBytes of event
// data.
func Lag(ctx context.Context, store *varve.Store, pos varve.Position, d Descriptor, limit int) (n int, more bool, err error) {
	scan := max(limit*LagScanFactor, 1000)
	f := d.Filter
	if d.Stream != "" {
		f = varve.Filter{StreamPrefixes: []string{d.Stream}}
	}
	sep := store.Config().CategorySeparator
	events := store.ReadAll(ctx, pos, f, varve.PageSize(max(1, min(limit, 1000))), varve.PageBytes(LagPageBytes))
	if len(d.Query.Items) > 0 {
		events = store.ReadQuery(ctx, d.Query, pos, varve.PageSize(max(1, min(limit, 1000))), varve.PageBytes(LagPageBytes))
	}
	for e, err := range events {
		if err != nil {
			return 0, false, err
		}
		if scan--; scan < 0 {
			return n, true, nil
		}
		if !d.Match(&e, sep) {
			continue
		}
		if n == limit {
			return n, true, nil
		}
		n++
	}
	return n, false, nil
}

// OldestScan bounds the events [Oldest] reads.
const OldestScan = 1000

// Oldest returns when the first event after pos that the subscription
// described by d reads was recorded: the age of a consumer's lag in time.
// ok is false when none is within the first OldestScan events after pos
// (there is none, or the consumer's filter passes over more than that).
func Oldest(ctx context.Context, store *varve.Store, pos varve.Position, d Descriptor) (t time.Time, ok bool, err error) {
	f := d.Filter
	if d.Stream != "" {
		f = varve.Filter{StreamPrefixes: []string{d.Stream}}
	}
	events := store.ReadAll(ctx, pos, f, varve.PageSize(100), varve.PageBytes(LagPageBytes))
	if len(d.Query.Items) > 0 {
		events = store.ReadQuery(ctx, d.Query, pos, varve.PageSize(100), varve.PageBytes(LagPageBytes))
	}
	sep := store.Config().CategorySeparator
	scan := OldestScan
	for e, err := range events {
		if err != nil {
			return time.Time{}, false, err
		}
		if d.Match(&e, sep) {
			return e.RecordedAt, true, nil
		}
		if scan--; scan == 0 {
			break
		}
	}
	return time.Time{}, false, nil
}
