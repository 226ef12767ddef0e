package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
)

var (
	_ varve.StreamLister     = (*Backend)(nil)
	_ varve.CheckpointLister = (*Backend)(nil)
)

// ListStreams implements varve.StreamLister. JetStream has no ordered index
// of subjects to page through: the backend asks for every subject of the
// event streams (one stream info request, which the server pages at
// 100,000 subjects), decodes, filters and sorts the ids, and reads the head
// of each stream of the page (one direct get each). A page costs time in
// proportion to all the streams, not to the page: an operator's listing.
func (b *Backend) ListStreams(ctx context.Context, q varve.ListQuery, buf []varve.StreamInfo) ([]varve.StreamInfo, error) {
	if err := b.ready(ctx); err != nil || q.Limit <= 0 {
		return buf, err
	}
	names, err := b.streamNames(ctx, q)
	if err != nil {
		return buf, err
	}
	n := len(buf)
	for _, name := range names {
		if len(buf)-n == q.Limit {
			break
		}
		info, err := b.StreamInfo(ctx, name)
		if errors.Is(err, varve.ErrStreamNotFound) {
			continue // purged since the subjects were listed
		}
		if err != nil {
			return buf[:n], err
		}
		buf = append(buf, info)
	}
	return buf, nil
}

// streamNames returns the ids of q's streams after q.After, sorted.
func (b *Backend) streamNames(ctx context.Context, q varve.ListQuery) ([]string, error) {
	rctx, cancel := b.c.Bound(ctx)
	defer cancel()
	b.c.CountRequest()
	s, err := b.js.Stream(rctx, b.cfg.Stream)
	if err == nil {
		b.c.CountRequest()
		var info *jetstream.StreamInfo
		info, err = s.Info(rctx, jetstream.WithSubjectFilter(b.allSubj))
		if err == nil {
			var names []string
			for subj := range info.State.Subjects {
				name, _, derr := b.streamOf(subj)
				if derr == nil && name > q.After && strings.HasPrefix(name, q.Prefix) {
					names = append(names, name)
				}
			}
			slices.Sort(names)
			return names, nil
		}
	}
	return nil, b.fail("list streams", b.c.Err(rctx, err))
}

// ListCheckpoints implements varve.CheckpointLister: the keys of the
// checkpoint bucket (from its stream's state, see kvKeys), then one get
// per checkpoint of the page.
func (b *Backend) ListCheckpoints(ctx context.Context, q varve.ListQuery, buf []varve.NamedPosition) ([]varve.NamedPosition, error) {
	if err := b.ready(ctx); err != nil || q.Limit <= 0 {
		return buf, err
	}
	keys, err := b.kvKeys(ctx, b.cfg.CheckpointBucket, ">")
	if err != nil {
		return buf, b.fail("list checkpoints", err)
	}
	var names []string
	for _, k := range keys {
		name, derr := decodeID(k)
		if derr == nil && name > q.After && strings.HasPrefix(name, q.Prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	n := len(buf)
	for _, name := range names {
		if len(buf)-n == q.Limit {
			break
		}
		pos, ok, err := b.LoadCheckpoint(ctx, name)
		if err != nil {
			return buf[:n], fmt.Errorf("checkpoint %q: %w", name, err)
		}
		if ok {
			buf = append(buf, varve.NamedPosition{Name: name, Position: pos})
		}
	}
	return buf, nil
}
