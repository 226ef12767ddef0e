package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/varve-go/varve"
)

// MultiAppendAvailable implements varve.MultiAppender: always.
func (b *Backend) MultiAppendAvailable() bool { return true }

// AppendMulti implements varve.MultiAppender: it locks the shards of every
// stream of the request in shard order, decides every part, and commits
// them all under one lock of the log.
func (b *Backend) AppendMulti(ctx context.Context, req varve.MultiAppendRequest) ([]varve.AppendResult, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	var idx []int
	for _, a := range req.Appends {
		idx = append(idx, b.shardIndex(a.Stream))
	}
	for _, c := range req.Checks {
		idx = append(idx, b.shardIndex(c.Stream))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		b.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range idx {
			b.shards[i].mu.Unlock()
		}
	}()

	plans := make([]plan, len(req.Appends))
	retries := 0
	for i, a := range req.Appends {
		p, err := decide(b.shard(a.Stream), varve.AppendRequest{Stream: a.Stream, Expected: a.Expected, Events: a.Events, Category: req.Categories[i]})
		if err != nil {
			return nil, partError(a.Stream, err)
		}
		if p.retry {
			retries++
		}
		plans[i] = p
	}
	for _, c := range req.Checks {
		var current varve.Version
		if st := b.shard(c.Stream).streams[c.Stream]; st != nil {
			if st.tombstoned {
				return nil, partError(c.Stream, varve.ErrStreamDeleted)
			}
			current = st.version
		}
		if !c.Expected.Matches(current) {
			return nil, &varve.WrongExpectedVersionError{Stream: c.Stream, Expected: c.Expected, Actual: current}
		}
	}
	res := make([]varve.AppendResult, len(plans))
	switch retries {
	case len(plans):
		for i, p := range plans {
			res[i] = p.res
		}
		return res, nil
	case 0:
	default:
		for _, p := range plans {
			if p.retry {
				return nil, partError(p.req.Stream, fmt.Errorf("the events of this stream were appended before, the others were not: %w", varve.ErrDuplicateEvent))
			}
		}
	}
	_ = b.commit(plans, nil)
	for i, p := range plans {
		res[i] = p.res
	}
	return res, nil
}

// partError names the stream of a failed part; a conflict names it
// already.
func partError(stream string, err error) error {
	if _, ok := err.(*varve.WrongExpectedVersionError); ok {
		return err
	}
	return &varve.StreamError{Stream: stream, Err: err}
}
