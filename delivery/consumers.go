package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

// MaxConsumers bounds the consumers [Consumers] returns.
const MaxConsumers = 1000

// ErrUnknownConsumer: the store has no checkpoint of the name and nothing
// was ever parked for it.
var ErrUnknownConsumer = errors.New("unknown subscription")

// Consumer is what a store knows of a consumer: its checkpoint, how far
// behind $all it is, and the events a delivery subscription of its name
// parked. Whether it is running, the store does not know.
type Consumer struct {
	Name string `json:"name"`
	// Checkpoint is the saved position; nil when there is none (a
	// delivery that parked events on a store without checkpoints, or one
	// whose checkpoint is kept elsewhere).
	Checkpoint *varve.Position `json:"checkpoint"`
	// Lag counts the events after the checkpoint that the consumer reads,
	// by the filter it recorded ([subscription.Described]; without one,
	// every event but system streams'), up to the lag limit; LagMore says
	// there are more.
	Lag     int  `json:"lag"`
	LagMore bool `json:"lag_more"`
	// CaughtUp: nothing the consumer would deliver follows its checkpoint.
	CaughtUp bool `json:"caught_up"`
	// Parked counts the parked events that are not replayed or skipped.
	Parked       int    `json:"parked"`
	ParkedStream string `json:"parked_stream"`
	// Running counts the processes that run the consumer now, by their
	// heartbeats ([subscription.Running]); nil when the store keeps no
	// leases, so it cannot tell. Seen says that the consumer was ever
	// opened ([subscription.Described]): a consumer seen and not running
	// is stopped, one never seen only has a checkpoint or parked events.
	Running *int `json:"running"`
	Seen    bool `json:"seen"`
	// LastSeen is when a process last ran it, as its heartbeats recorded
	// it ([subscription.LastSeen]); nil when none did (or the store keeps
	// no snapshots). A consumer that does not run stopped about then.
	LastSeen *time.Time `json:"last_seen"`

	parkedStream bool // the parked stream exists
}

// Consumers lists the consumers whose names begin with prefix, in byte
// order, at most MaxConsumers: the names of checkpoints and of parked
// streams ("$parked-<name>"), merged. It needs the store's listing
// capabilities; without them it lists what it can (nothing, on a backend
// with neither). lagLimit bounds the events counted for each lag; a
// negative one counts none.
func Consumers(ctx context.Context, store *varve.Store, prefix string, lagLimit int) ([]Consumer, error) {
	seen := map[string]bool{}
	if cps := store.Checkpoints(); store.Capabilities().ListCheckpoints {
		page, err := cps.List(ctx, varve.ListQuery{Prefix: prefix, Limit: MaxConsumers})
		if err != nil {
			return nil, err
		}
		for _, cp := range page.Checkpoints {
			seen[cp.Name] = true
		}
	}
	if ls := store.Streams(); store.Capabilities().ListStreams {
		page, err := ls.List(ctx, varve.ListQuery{Prefix: ParkedStreamPrefix + prefix, Limit: MaxConsumers}, true)
		if err != nil {
			return nil, err
		}
		for _, info := range page.Streams {
			seen[strings.TrimPrefix(info.Stream, ParkedStreamPrefix)] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	names = names[:min(len(names), MaxConsumers)]
	out := make([]Consumer, 0, len(names))
	for _, name := range names {
		c, _, err := inspect(ctx, store, name, lagLimit)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// InspectConsumer returns what the store knows of the consumer name and
// its parked events, oldest first; [ErrUnknownConsumer] when it knows
// nothing. lagLimit is as for [Consumers].
func InspectConsumer(ctx context.Context, store *varve.Store, name string, lagLimit int) (Consumer, []ParkedEvent, error) {
	c, parked, err := inspect(ctx, store, name, lagLimit)
	if err == nil && c.Checkpoint == nil && !c.parkedStream {
		err = fmt.Errorf("subscription %q: %w: the store has no checkpoint of that name and nothing was ever parked for it", name, ErrUnknownConsumer)
	}
	return c, parked, err
}

func inspect(ctx context.Context, store *varve.Store, name string, lagLimit int) (Consumer, []ParkedEvent, error) {
	p := NewParked(store, name)
	c := Consumer{Name: name, ParkedStream: p.Stream()}
	d, seen, err := subscription.Described(ctx, store, name)
	if err != nil {
		return c, nil, err
	}
	c.Seen = seen
	if cps := store.Checkpoints(); store.Capabilities().Checkpoints {
		pos, ok, err := cps.Load(ctx, name)
		if err != nil {
			return c, nil, err
		}
		if ok {
			c.Checkpoint = &pos
			if lagLimit >= 0 {
				if c.Lag, c.LagMore, err = subscription.Lag(ctx, store, pos, d, lagLimit); err != nil {
					return c, nil, err
				}
				c.CaughtUp = c.Lag == 0 && !c.LagMore
			}
		}
	}
	if at, ok, err := subscription.LastSeen(ctx, store, name); err != nil {
		return c, nil, err
	} else if ok {
		c.LastSeen, c.Seen = &at, true
	}
	if beats, err := subscription.Running(ctx, store, name); err == nil {
		n := len(beats)
		c.Running = &n
	} else if !errors.Is(err, varve.ErrNotSupported) {
		return c, nil, err
	}
	if _, err := store.StreamInfo(ctx, p.Stream()); err == nil {
		c.parkedStream = true
	} else if !errors.Is(err, varve.ErrStreamNotFound) {
		return c, nil, err
	}
	var parked []ParkedEvent
	if c.parkedStream {
		var err error
		if parked, err = p.List(ctx); err != nil {
			return c, nil, err
		}
	}
	c.Parked = len(parked)
	return c, parked, nil
}
