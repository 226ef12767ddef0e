package delivery

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// Payload is the JSON body that the webhook and NATS sinks send. It is the
// same for every attempt of an event. Data and Metadata that are JSON are
// embedded as they are; other bytes go base64-encoded in DataBase64 and
// MetadataBase64.
type Payload struct {
	IdempotencyKey string          `json:"idempotency_key"`
	Subscription   string          `json:"subscription"`
	ID             uuid.UUID       `json:"id"`
	Stream         string          `json:"stream"`
	Version        varve.Version   `json:"version"`
	Position       varve.Position  `json:"position"`
	Type           string          `json:"type"`
	RecordedAt     time.Time       `json:"recorded_at"`
	Data           json.RawMessage `json:"data,omitempty"`
	DataBase64     []byte          `json:"data_base64,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	MetadataBase64 []byte          `json:"metadata_base64,omitempty"`
}

// NewPayload returns the payload of a delivery.
func NewPayload(d Delivery) Payload {
	e := d.Event
	p := Payload{
		IdempotencyKey: d.Key, Subscription: d.Subscription, ID: e.ID, Stream: e.Stream,
		Version: e.Version, Position: e.Position, Type: e.Type, RecordedAt: e.RecordedAt,
	}
	p.Data, p.DataBase64 = rawOrBytes(e.Data)
	p.Metadata, p.MetadataBase64 = rawOrBytes(e.Metadata)
	return p
}

func rawOrBytes(b []byte) (json.RawMessage, []byte) {
	switch {
	case len(b) == 0:
		return nil, nil
	case json.Valid(b):
		return b, nil
	}
	return nil, b
}

// MarshalPayload returns the JSON payload of a delivery.
func MarshalPayload(d Delivery) ([]byte, error) {
	b, err := json.Marshal(NewPayload(d))
	if err != nil {
		return nil, fmt.Errorf("delivery: encode %s@%d: %w", d.Event.Stream, d.Event.Version, err)
	}
	return b, nil
}
