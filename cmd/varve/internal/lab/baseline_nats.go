package lab

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve/internal/workload"
)

// natsBaseline publishes one message per op to a throwaway file-backed
// JetStream stream and waits for the server's acknowledgement; the stream
// is deleted when the baseline closes.
func natsBaseline(ctx context.Context, raw string) (*baseline, error) {
	nc, err := nats.Connect(raw, nats.Name("varve-bench-baseline"))
	if err != nil {
		return nil, fmt.Errorf("nats baseline: connect to %s: %w", Redact(raw), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats baseline: %w", err)
	}
	name := throwawayName("VARVE_BASELINE_")
	subject := strings.ToLower(name) + ".events"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{subject}, Storage: jetstream.FileStorage,
	}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats baseline: create stream %s: %w", name, err)
	}
	return &baseline{
		name:    "raw publish",
		about:   "one synchronous JetStream publish per event to a file-backed stream (nats.go jetstream)",
		version: "NATS " + nc.ConnectedServerVersion(),
		newOp: func(int) workload.Op {
			return func(ctx context.Context) (int, error) {
				if _, err := js.Publish(ctx, subject, workload.Payload); err != nil {
					return 0, fmt.Errorf("nats baseline: publish: %w", err)
				}
				return 1, nil
			}
		},
		close: func(ctx context.Context) error {
			err := js.DeleteStream(ctx, name)
			nc.Close()
			if err != nil {
				return fmt.Errorf("nats baseline: delete stream %s: %w", name, err)
			}
			return nil
		},
	}, nil
}
