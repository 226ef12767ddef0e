package aggregate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/varve-go/varve"
)

// Metadata is what [Repository.Save] (and so [Repository.Execute]) writes
// into the metadata of the events it appends, from its context: the id of
// the conversation or request the events belong to (CorrelationID) and the
// id of what caused them (CausationID), usually the event a handler was
// handling. It is stored as a JSON object beside the schema version
// (keys "correlation_id" and "causation_id"); read it back with
// [ReadMetadata].
type Metadata struct {
	CorrelationID string `json:"correlation_id,omitempty"`
	CausationID   string `json:"causation_id,omitempty"`
}

func (m Metadata) isZero() bool { return m == Metadata{} }

type metadataKey struct{}

// WithMetadata returns ctx carrying m: events saved with it get m. Empty
// fields of m keep those ctx carried already.
func WithMetadata(ctx context.Context, m Metadata) context.Context {
	cur := MetadataFrom(ctx)
	if m.CorrelationID != "" {
		cur.CorrelationID = m.CorrelationID
	}
	if m.CausationID != "" {
		cur.CausationID = m.CausationID
	}
	return context.WithValue(ctx, metadataKey{}, cur)
}

// WithCorrelation returns ctx with the correlation id id, say a request's
// id at the edge of the system.
func WithCorrelation(ctx context.Context, id string) context.Context {
	return WithMetadata(ctx, Metadata{CorrelationID: id})
}

// CausedBy returns ctx for handling e, so that the events saved with it
// name e as their cause: the causation id is e's id, and the correlation
// id e's own correlation id, or e's id when it has none (e starts the
// conversation). A process manager or a reactor passes it to the
// repository:
//
//	repo.Execute(aggregate.CausedBy(ctx, e), id, command)
func CausedBy(ctx context.Context, e varve.RecordedEvent) context.Context {
	m, _ := ReadMetadata(e)
	id := e.ID.String()
	if m.CorrelationID == "" {
		m.CorrelationID = id
	}
	return WithMetadata(ctx, Metadata{CorrelationID: m.CorrelationID, CausationID: id})
}

// MetadataFrom returns the metadata ctx carries; the zero Metadata when
// none.
func MetadataFrom(ctx context.Context) Metadata {
	m, _ := ctx.Value(metadataKey{}).(Metadata)
	return m
}

// ReadMetadata returns the correlation and causation ids of a stored
// event; the zero Metadata for an event without them. Metadata that is
// not a JSON object gives an error wrapping [varve.ErrInvalidArgument].
func ReadMetadata(e varve.RecordedEvent) (Metadata, error) {
	var m Metadata
	if len(e.Metadata) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(e.Metadata, &m); err != nil {
		return Metadata{}, fmt.Errorf("aggregate: metadata of event %s: %w: %w", e.ID, varve.ErrInvalidArgument, err)
	}
	return m, nil
}

// stamp adds m to the metadata of evs, which the schema registry made
// (nothing, or a JSON object).
func stamp(evs []varve.Event, m Metadata) error {
	plain, err := json.Marshal(m)
	if err != nil {
		return err
	}
	for i := range evs {
		e := &evs[i]
		if len(e.Metadata) == 0 {
			e.Metadata = plain
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(e.Metadata, &obj); err != nil {
			return fmt.Errorf("metadata of a %s event: %w", e.Type, err)
		}
		if m.CorrelationID != "" {
			obj["correlation_id"], _ = json.Marshal(m.CorrelationID)
		}
		if m.CausationID != "" {
			obj["causation_id"], _ = json.Marshal(m.CausationID)
		}
		if e.Metadata, err = json.Marshal(obj); err != nil {
			return err
		}
	}
	return nil
}
