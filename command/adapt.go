package command

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/dcb"
)

// idSpace is the UUIDv5 namespace of the event ids derived from command ids.
var idSpace = uuid.MustParse("5b0e6f0c-6a43-4d1c-9a55-6f1d3c0f2a41")

// Tag is the tag of the first event a command with id appended through
// [Decide].
func Tag(id string) string { return "cmd:" + id }

// EventID is the id of the i-th event a command with id appends through
// [Decide].
func EventID(id string, i int) uuid.UUID {
	return uuid.NewSHA1(idSpace, []byte(id+"\x00"+strconv.Itoa(i)))
}

// Decider is a DCB decision on commands of type C: the events of Query(c)
// folded from Initial with Apply make the state Decide decides on.
type Decider[S, C any] struct {
	// Query returns the events the decision depends on; it must have at
	// least one item.
	Query   func(C) varve.Query
	Initial func(C) S
	Apply   func(S, varve.RecordedEvent) S
	Decide  func(S, C) (dcb.Decision, error)
	Options dcb.Options
}

type folded[S any] struct {
	s     S
	found bool // an earlier outcome of the command
	first Result
}

// Decide returns a handler, for [Handle], that runs d with dcb.Execute on
// store, idempotent by command id (see the package documentation).
func Decide[S, C any](store *varve.Store, d Decider[S, C]) func(ctx context.Context, id string, c C) (Result, error) {
	return func(ctx context.Context, id string, c C) (Result, error) {
		tag := Tag(id)
		if len(tag) > varve.MaxTagLen {
			return Result{}, fmt.Errorf("command %s: id longer than %d bytes: %w", id, varve.MaxTagLen-len(Tag("")), varve.ErrInvalidArgument)
		}
		q := d.Query(c)
		if len(q.Items) == 0 {
			return Result{}, fmt.Errorf("command %s: query without items: %w", id, varve.ErrInvalidArgument)
		}
		q.Items = append(slices.Clip(q.Items), varve.QueryItem{Tags: []string{tag}})
		apply := func(f folded[S], e varve.RecordedEvent) folded[S] {
			if slices.Contains(e.Tags, tag) {
				if !f.found {
					f.found, f.first = true, Result{Stream: e.Stream, Version: e.Version, Duplicate: true}
				}
				return f
			}
			f.s = d.Apply(f.s, e)
			return f
		}
		var meta []byte
		if m := aggregate.MetadataFrom(ctx); m != (aggregate.Metadata{}) {
			var err error
			if meta, err = json.Marshal(m); err != nil {
				return Result{}, err
			}
		}
		var stream string
		decide := func(f folded[S]) (dcb.Decision, error) {
			if f.found {
				return dcb.Decision{}, nil
			}
			dec, err := d.Decide(f.s, c)
			if err != nil || len(dec.Events) == 0 {
				return dec, err
			}
			evs := slices.Clone(dec.Events)
			for i := range evs {
				evs[i].ID = EventID(id, i)
				if meta == nil {
					continue
				}
				if evs[i].Metadata, err = withMetadata(evs[i].Metadata, meta); err != nil {
					return dcb.Decision{}, fmt.Errorf("command %s: metadata of event %d: %w", id, i, err)
				}
			}
			evs[0].Tags = append(slices.Clip(evs[0].Tags), tag)
			dec.Events, stream = evs, dec.Stream
			return dec, nil
		}
		res, f, err := dcb.Execute(ctx, store, q, folded[S]{s: d.Initial(c)}, apply, decide, d.Options)
		if err != nil {
			return Result{}, fmt.Errorf("command %s: %w", id, err)
		}
		if f.found {
			return f.first, nil
		}
		if res.FirstVersion == 0 {
			return Result{}, nil
		}
		return Result{Stream: stream, Version: res.FirstVersion}, nil
	}
}

// withMetadata merges the JSON object meta into the event's metadata
// (nothing, or a JSON object).
func withMetadata(cur, meta []byte) ([]byte, error) {
	if len(cur) == 0 {
		return meta, nil
	}
	var obj, add map[string]json.RawMessage
	if err := json.Unmarshal(cur, &obj); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(meta, &add); err != nil {
		return nil, err
	}
	for k, v := range add {
		obj[k] = v
	}
	return json.Marshal(obj)
}

// Aggregate returns a handler, for [Handle], that runs decide on the
// aggregate aggID(c) of repo with Repository.ExecuteOnce, idempotent by
// command id: a retried command whose events are stored returns the first
// outcome with Duplicate set and runs nothing. The events carry the
// command's correlation and causation ids. The Result names the
// aggregate's stream and its version after the command (after the first
// outcome's events, for a duplicate).
func Aggregate[T, C any](repo *aggregate.Repository[T], aggID func(C) string, decide func(*aggregate.Aggregate[T], C) error) func(ctx context.Context, id string, c C) (Result, error) {
	return func(ctx context.Context, id string, c C) (Result, error) {
		a, once, err := repo.ExecuteOnce(ctx, aggID(c), id, func(a *aggregate.Aggregate[T]) error { return decide(a, c) })
		if err != nil {
			return Result{}, fmt.Errorf("command %s: %w", id, err)
		}
		if once.Duplicate {
			return Result{Stream: a.Stream(), Version: once.Last, Duplicate: true}, nil
		}
		return Result{Stream: a.Stream(), Version: a.Version()}, nil
	}
}
