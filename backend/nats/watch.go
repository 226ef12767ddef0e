package nats

import (
	"context"
	"errors"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/varve-go/varve/backend/nats/internal/jsclient"
)

// Watch implements varve.Watcher. The stream republishes the headers of
// every stored event message (after it is stored, so a reader woken up
// finds it); the first call subscribes to them with a plain NATS
// subscription, which holds no JetStream resources. On a stream without
// the republish (Config.NoNotify), and while the subscription cannot be
// made, the watchers are woken by this backend's own commits and every
// Config.WatchPoll.
func (b *Backend) Watch() <-chan struct{} {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	if b.closed.Load() {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if b.notify && b.watchSub == nil {
		sub, err := b.nc.Subscribe(b.watchSubj, b.wake)
		if err == nil {
			ctx, cancel := b.c.Bound(context.Background())
			err = b.nc.FlushWithContext(ctx)
			cancel()
			b.watchSub = sub
		}
		if err != nil {
			// The next call subscribes again.
			if sub != nil {
				_ = sub.Unsubscribe()
			}
			b.watchSub = nil
		}
	}
	if b.watchSub == nil && b.watchPoll == nil {
		b.watchPoll = time.AfterFunc(b.cfg.WatchPoll, b.polled)
	}
	return b.watchCh
}

// polled wakes the watchers when WatchPoll has passed.
func (b *Backend) polled() {
	b.watchMu.Lock()
	b.watchPoll = nil
	b.watchMu.Unlock()
	b.wake(nil)
}

// committed wakes this process's watchers after the publish of a commit or
// marker of its own, when no notification will: unless the server refused
// it, err or not, it was stored or may have been (its answer was lost).
func (b *Backend) committed(err error) {
	var refused *jsclient.APIError
	if !b.notify && (err == nil || !errors.As(err, &refused)) {
		b.wake(nil)
	}
}

func (b *Backend) wake(*natsgo.Msg) {
	b.watchMu.Lock()
	if b.closed.Load() {
		b.watchMu.Unlock()
		return // Close closed the channel
	}
	close(b.watchCh)
	b.watchCh = make(chan struct{})
	b.watchMu.Unlock()
}
