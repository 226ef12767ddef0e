package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
)

// NATSConfig configures a [NATS] sink.
type NATSConfig struct {
	// Subject receives every event, unless SubjectFor is set.
	Subject string
	// SubjectFor picks the subject of each event.
	SubjectFor func(e varve.RecordedEvent) string
}

// NATS is a [Sink] that publishes each event's [Payload] to a JetStream
// subject and waits for the stream's acknowledgement. The idempotency key
// goes in the Nats-Msg-Id header, so JetStream drops a redelivery within its
// duplicate window; the event's stream, version, type and position go in
// Varve-* headers. An oversized message is permanent; every other failure
// (no stream for the subject, no acknowledgement in time) is retried.
type NATS struct {
	js      jetstream.JetStream
	subject func(e varve.RecordedEvent) string
}

// NewNATS returns a NATS sink that publishes through js.
func NewNATS(js jetstream.JetStream, cfg NATSConfig) (*NATS, error) {
	if js == nil || (cfg.Subject == "" && cfg.SubjectFor == nil) {
		return nil, fmt.Errorf("delivery: NATS sink: %w: need a JetStream and a subject", varve.ErrInvalidArgument)
	}
	subject := cfg.SubjectFor
	if subject == nil {
		subject = func(varve.RecordedEvent) string { return cfg.Subject }
	}
	return &NATS{js: js, subject: subject}, nil
}

// Deliver implements Sink.
func (n *NATS) Deliver(ctx context.Context, d Delivery) error {
	body, err := MarshalPayload(d)
	if err != nil {
		return Permanent(err)
	}
	e := d.Event
	msg := nats.NewMsg(n.subject(e))
	msg.Data = body
	msg.Header.Set(jetstream.MsgIDHeader, d.Key)
	msg.Header.Set("Varve-Stream", e.Stream)
	msg.Header.Set("Varve-Version", strconv.FormatUint(e.Version, 10))
	msg.Header.Set("Varve-Type", e.Type)
	msg.Header.Set("Varve-Position", e.Position.String())
	msg.Header.Set(HeaderAttempt, strconv.Itoa(d.Attempt))
	if _, err := n.js.PublishMsg(ctx, msg); err != nil {
		err = fmt.Errorf("delivery: publish %s@%d to %q: %w", e.Stream, e.Version, msg.Subject, err)
		if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) {
			return Permanent(err)
		}
		return err
	}
	return nil
}
