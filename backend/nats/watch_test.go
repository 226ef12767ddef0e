package nats

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/testenv"
)

// closedWithin reports whether ch is closed within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// TestNoNotify: a stream created with NoNotify has no republish; its
// backend's watchers are woken by the backend's own commits at once (with
// a WatchPoll of an hour, nothing else could wake them), and WaitFor on
// another process's backend sees a commit within its WatchPoll. A backend
// without NoNotify refuses that stream; a backend with NoNotify on a stream
// that has the republish is woken by the notifications of another
// process's commits.
func TestNoNotify(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		ctx := ctxT(t)
		cfg := testConfig(m.url, uniqueName("nonotify"))
		cfg.NoNotify, cfg.WatchPoll = true, time.Hour
		a := m.open(t, cfg)
		info, err := a.js.Stream(ctx, cfg.Stream)
		if err != nil {
			t.Fatal(err)
		}
		if rp := info.CachedInfo().Config.RePublish; rp != nil {
			t.Fatalf("a stream created with NoNotify republishes: %+v", rp)
		}
		sa, err := varve.New(a, varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		ch := sa.Watch()
		if closedWithin(ch, 100*time.Millisecond) {
			t.Fatal("a watcher woke before any commit, with a WatchPoll of an hour")
		}
		if _, err := sa.Append(ctx, "order-1", varve.NoStream, varve.Event{Type: "Placed"}); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(ch, 10*time.Second) {
			t.Fatal("the backend's own commit did not wake its watcher")
		}

		other := cfg
		other.WatchPoll = 20 * time.Millisecond
		sb, err := varve.New(open(t, other), varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := sa.Append(ctx, "order-2", varve.NoStream, varve.Event{Type: "Placed"})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := sb.WaitFor(wctx, res.Position); err != nil {
			t.Fatalf("another backend waited for a commit on a stream without notifications: %v", err)
		}

		def := cfg
		def.NoNotify = false
		if b, err := New(ctx, def); !errors.Is(err, varve.ErrInvalidArgument) {
			if err == nil {
				_ = b.Close()
			}
			t.Fatalf("a backend without NoNotify opened a stream without notifications: %v", err)
		}

		withNotify := testConfig(m.url, uniqueName("notify"))
		sn, err := varve.New(m.open(t, withNotify), varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		quiet := withNotify
		quiet.NoNotify, quiet.WatchPoll = true, time.Hour
		q := open(t, quiet)
		if !q.notify {
			t.Fatal("a NoNotify backend on a stream with the republish does not use it")
		}
		ch = q.Watch()
		if _, err := sn.Append(ctx, "order-3", varve.NoStream, varve.Event{Type: "Placed"}); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(ch, 10*time.Second) {
			t.Fatal("another process's commit did not wake a NoNotify backend's watcher on a stream with notifications")
		}
	})
}

// TestNoNotifyUnansweredCommitWakes: on a stream without notifications, a
// commit of this backend that was stored although its publish got no
// answer in time (the call's context ended first) wakes the backend's
// watchers, as the republish would have: with a WatchPoll of an hour,
// nothing else does.
func TestNoNotifyUnansweredCommitWakes(t *testing.T) {
	m := mode{name: "machine", url: testenv.NATSURL(t)}
	cfg := testConfig(m.url, uniqueName("lostack"))
	cfg.NoNotify, cfg.WatchPoll = true, time.Hour
	b := m.open(t, cfg)
	bg := ctxT(t)
	version := func() int {
		evs, err := b.ReadStream(bg, varve.StreamQuery{Stream: "s", Direction: varve.Forward, Limit: 10000}, nil)
		if err != nil && !errors.Is(err, varve.ErrStreamNotFound) {
			t.Fatal(err)
		}
		return len(evs)
	}
	stored := 0
	for i := 0; i < 2000; i++ {
		d := time.Duration(20+i%200*10) * time.Microsecond
		ch := b.Watch()
		ctx, cancel := context.WithTimeout(bg, d)
		_, err := b.Append(ctx, varve.AppendRequest{Stream: "s", Expected: varve.Any, Events: []varve.Event{{ID: varve.NewEventID(), Type: "T"}}})
		cancel()
		if err == nil {
			stored++
			if !closedWithin(ch, 5*time.Second) {
				t.Fatal("an acknowledged commit did not wake the watcher")
			}
			continue
		}
		if v := version(); v > stored {
			stored = v
			if !closedWithin(ch, 2*time.Second) {
				t.Fatalf("a commit stored by this backend (its publish unanswered: %v) did not wake its watcher", err)
			}
			t.Logf("try %d (%v): an unanswered commit woke the watcher", i, d)
			return
		}
	}
	t.Skip("no publish was stored without its answer")
}
