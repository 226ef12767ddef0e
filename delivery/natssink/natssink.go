// Package natssink is a [delivery.Sink] that publishes events to NATS
// JetStream. It is a package of its own so that a dispatcher user who does
// not publish to NATS does not compile the NATS client.
//
// Each event's [delivery.Payload] goes to a subject and the sink waits for
// the stream's acknowledgement. The idempotency key goes in the Nats-Msg-Id
// header, so JetStream drops a redelivery within its duplicate window; the
// event's stream, version, type and position go in the Varve-* headers of
// package delivery, with the headers that the context of Deliver carries
// ([delivery.WithHeaders]). An oversized message or a bad subject is
// permanent; every other failure (no stream for the subject, no
// acknowledgement in time) is retried. Deliver is safe for concurrent use.
package natssink

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
)

// Config configures a [Sink].
type Config struct {
	// Subject receives every event, unless SubjectFor is set.
	Subject string
	// SubjectFor picks the subject of each event.
	SubjectFor func(e varve.RecordedEvent) string
}

// Sink publishes each event to a JetStream subject.
type Sink struct {
	js      jetstream.JetStream
	subject func(e varve.RecordedEvent) string
}

// New returns a sink that publishes through js.
func New(js jetstream.JetStream, cfg Config) (*Sink, error) {
	if js == nil || (cfg.Subject == "" && cfg.SubjectFor == nil) {
		return nil, fmt.Errorf("natssink: %w: need a JetStream and a subject", varve.ErrInvalidArgument)
	}
	subject := cfg.SubjectFor
	if subject == nil {
		subject = func(varve.RecordedEvent) string { return cfg.Subject }
	}
	return &Sink{js: js, subject: subject}, nil
}

// Deliver implements delivery.Sink.
func (s *Sink) Deliver(ctx context.Context, d delivery.Delivery) error {
	body, err := delivery.MarshalPayload(d)
	if err != nil {
		return delivery.Permanent(err)
	}
	e := d.Event
	msg := nats.NewMsg(s.subject(e))
	msg.Data = body
	for k, v := range delivery.HeadersFrom(ctx) {
		msg.Header.Set(k, v)
	}
	msg.Header.Set(jetstream.MsgIDHeader, d.Key)
	msg.Header.Set(delivery.HeaderStream, e.Stream)
	msg.Header.Set(delivery.HeaderVersion, strconv.FormatUint(e.Version, 10))
	msg.Header.Set(delivery.HeaderType, e.Type)
	msg.Header.Set(delivery.HeaderPosition, e.Position.String())
	msg.Header.Set(delivery.HeaderAttempt, strconv.Itoa(d.Attempt))
	if _, err := s.js.PublishMsg(ctx, msg); err != nil {
		err = fmt.Errorf("natssink: publish %s@%d to %q: %w", e.Stream, e.Version, msg.Subject, err)
		if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) {
			return delivery.Permanent(err)
		}
		return err
	}
	return nil
}
