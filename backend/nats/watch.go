package nats

import (
	"context"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

// Watch implements varve.Watcher. The stream republishes the headers of
// every stored event message (after it is stored, so a reader woken up
// finds it); the first call subscribes to them with a plain NATS
// subscription, which holds no JetStream resources.
func (b *Backend) Watch() <-chan struct{} {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	if b.closed.Load() {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if b.watchSub == nil {
		sub, err := b.nc.Subscribe(b.watchSubj, b.wake)
		if err == nil {
			ctx, cancel := b.c.Bound(context.Background())
			err = b.nc.FlushWithContext(ctx)
			cancel()
			b.watchSub = sub
		}
		if err != nil {
			// Without notifications the caller still wakes up, after a
			// poll interval, and the next call subscribes again.
			if sub != nil {
				_ = sub.Unsubscribe()
			}
			b.watchSub = nil
			ch := make(chan struct{})
			time.AfterFunc(pollInterval, func() { close(ch) })
			return ch
		}
	}
	return b.watchCh
}

// pollInterval is how long a watcher waits when it cannot subscribe.
const pollInterval = time.Second

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
