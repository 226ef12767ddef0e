package nats

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/retention"
)

// TestRetentionPurges: the scavenger's truncations purge the messages of
// the removed commits from the JetStream stream: the space goes, not only
// the events from reads.
func TestRetentionPurges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := testConfig(embeddedURL, uniqueName("retention"))
	b := open(t, cfg)
	store, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	nc, err := natsgo.Connect(embeddedURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), cfg.Stream) }()
	subject := b.evPrefix + b.token("order-1")
	messages := func() uint64 {
		t.Helper()
		s, err := js.Stream(ctx, cfg.Stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[subject]
	}
	const commits, keep = 50, 5
	for range commits {
		if _, err := store.Append(ctx, "order-1", varve.Any, varve.NewEvent("E", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	if n := messages(); n != commits {
		t.Fatalf("%d messages on %s after %d commits", n, subject, commits)
	}
	if err := retention.Set(ctx, store, retention.Target{Category: "order"}, retention.Policy{MaxCount: keep}); err != nil {
		t.Fatal(err)
	}
	sc, err := retention.New(retention.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sc.ScavengeOnce(ctx)
	if err != nil || rep.Removed != commits-keep {
		t.Fatalf("pass: %+v, %v", rep, err)
	}
	// The commits kept and the truncation's marker stay.
	if n := messages(); n != keep+1 {
		t.Fatalf("%d messages on %s after the pass, want the %d commits kept and a marker", n, subject, keep)
	}
}
