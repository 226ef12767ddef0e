package pgcdc

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/varve-go/varve"
)

// Layout says which varve stream a change is appended to.
type Layout uint8

const (
	// PerRow appends a row's changes to the stream "<table>-<key>" (the
	// category is the table, the id its replica identity key, columns
	// joined by ","), so each row is a stream in varve's Category-id
	// convention. A truncate, and a change to a table without a key, go to
	// the table's stream.
	PerRow Layout = iota
	// PerTable appends every change of a table to the stream "<table>".
	PerTable
)

// StoreConfig configures [AppendToStore] and [Pump].
type StoreConfig struct {
	Layout Layout
	// Namespace seeds the event ids (default "pgcdc"). Give each source
	// that appends into one store a namespace of its own: ids are derived
	// from the commit LSN, which another server repeats.
	Namespace string
	// Stream, when set, names the stream of a change instead of Layout.
	Stream func(Change) (string, error)
}

// ChangeEvent is the data of an event appended by AppendToStore, as JSON.
// Its event type is the change's Op ("insert", "update", "delete",
// "truncate").
type ChangeEvent struct {
	Op         string    `json:"op"`
	Schema     string    `json:"schema"`
	Table      string    `json:"table"`
	Xid        uint32    `json:"xid"`
	LSN        string    `json:"lsn"`
	CommitLSN  string    `json:"commit_lsn"`
	CommitTime time.Time `json:"commit_time"`
	// Key holds the replica identity columns; New the row after an insert
	// or update (without Unchanged columns); Old what PostgreSQL sent of
	// the row before.
	Key map[string]any `json:"key,omitempty"`
	New map[string]any `json:"new,omitempty"`
	Old map[string]any `json:"old,omitempty"`
	// Unchanged lists the TOAST-ed columns an update did not change and
	// PostgreSQL did not send.
	Unchanged       []string `json:"unchanged,omitempty"`
	Cascade         bool     `json:"cascade,omitempty"`
	RestartIdentity bool     `json:"restart_identity,omitempty"`
}

// EventID is the id of the event for change index (0-based) of the
// transaction committed at commitLSN: a UUIDv5 of both in namespace, so an
// append repeated after a crash is recognised as a retry.
func EventID(namespace string, commitLSN LSN, index int) uuid.UUID {
	return eventID(namespaceID(namespace), commitLSN, index)
}

func eventID(ns uuid.UUID, commitLSN LSN, index int) uuid.UUID {
	var name [12]byte
	binary.BigEndian.PutUint64(name[:8], uint64(commitLSN))
	binary.BigEndian.PutUint32(name[8:], uint32(index))
	return uuid.NewSHA1(ns, name[:])
}

func namespaceID(namespace string) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://varve.dev/pgcdc/"+namespace))
}

// AppendToStore appends tx's changes to store as events, one atomic append
// per stream in the order the streams first appear in tx. It is idempotent:
// appending the same transaction again writes nothing.
func AppendToStore(ctx context.Context, store *varve.Store, tx *Transaction, cfg StoreConfig) error {
	if cfg.Namespace == "" {
		cfg.Namespace = "pgcdc"
	}
	ns := namespaceID(cfg.Namespace)
	var order []string
	batches := map[string][]varve.Event{}
	for i, c := range tx.Changes {
		stream, err := cfg.streamOf(c)
		if err != nil {
			return err
		}
		data, err := json.Marshal(changeEvent(tx, c))
		if err != nil {
			return fmt.Errorf("pgcdc: encode %s on %s.%s at %s: %w", c.Op, c.Schema, c.Table, c.LSN, err)
		}
		if _, ok := batches[stream]; !ok {
			order = append(order, stream)
		}
		batches[stream] = append(batches[stream], varve.Event{ID: eventID(ns, tx.CommitLSN, i), Type: c.Op.String(), Data: data})
	}
	for _, stream := range order {
		if _, err := store.Append(ctx, stream, varve.Any, batches[stream]...); err != nil {
			return fmt.Errorf("pgcdc: append transaction %d (commit %s): %w", tx.Xid, tx.CommitLSN, err)
		}
	}
	return nil
}

// Pump appends every transaction of s to store (AppendToStore) and
// acknowledges it once appended, one at a time, so each stream gets its
// changes in commit order. It returns when ctx ends (nil) or on the first
// error.
func Pump(ctx context.Context, s *Stream, store *varve.Store, cfg StoreConfig) error {
	for {
		tx, err := s.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := AppendToStore(ctx, store, tx, cfg); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := s.Ack(tx); err != nil {
			return err
		}
	}
}

func (cfg StoreConfig) streamOf(c Change) (string, error) {
	var stream string
	if cfg.Stream != nil {
		s, err := cfg.Stream(c)
		if err != nil {
			return "", fmt.Errorf("pgcdc: stream of %s on %s.%s at %s: %w", c.Op, c.Schema, c.Table, c.LSN, err)
		}
		stream = s
	} else {
		stream = c.Table
		if c.Schema != "public" {
			stream = c.Schema + "." + c.Table
		}
		if key := c.Key(); cfg.Layout == PerRow && c.Op != Truncate && len(key) > 0 {
			parts := make([]string, len(key))
			for i, k := range key {
				parts[i] = keyText(k.Value)
			}
			stream += "-" + strings.Join(parts, ",")
		}
	}
	if err := varve.CheckStreamID(stream); err != nil {
		return "", fmt.Errorf("pgcdc: stream of %s on %s.%s at %s: %w", c.Op, c.Schema, c.Table, c.LSN, err)
	}
	return stream, nil
}

func keyText(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return v
	case int16:
		return strconv.FormatInt(int64(v), 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case int64:
		return strconv.FormatInt(v, 10)
	case uuid.UUID:
		return v.String()
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case []byte:
		return hex.EncodeToString(v)
	case json.Marshaler:
		if b, err := v.MarshalJSON(); err == nil {
			return strings.Trim(string(b), `"`)
		}
	}
	return fmt.Sprint(v)
}

func changeEvent(tx *Transaction, c Change) ChangeEvent {
	ev := ChangeEvent{
		Op: c.Op.String(), Schema: c.Schema, Table: c.Table, Xid: tx.Xid,
		LSN: c.LSN.String(), CommitLSN: tx.CommitLSN.String(), CommitTime: tx.CommitTime,
		Cascade: c.Cascade, RestartIdentity: c.RestartIdentity,
	}
	if key := c.Key(); len(key) > 0 {
		ev.Key = map[string]any{}
		for _, k := range key {
			ev.Key[k.Name] = jsonValue(k.Value)
		}
	}
	row := func(vals []Value) map[string]any {
		if vals == nil {
			return nil
		}
		m := make(map[string]any, len(vals))
		for _, v := range vals {
			if v.Unchanged {
				continue
			}
			m[v.Name] = jsonValue(v.Value)
		}
		return m
	}
	ev.New, ev.Old = row(c.New), row(c.Old)
	for _, v := range c.New {
		if v.Unchanged {
			ev.Unchanged = append(ev.Unchanged, v.Name)
		}
	}
	return ev
}

// jsonValue makes the values encoding/json would write poorly explicit.
func jsonValue(v any) any {
	switch v := v.(type) {
	case pgtype.InfinityModifier:
		return v.String()
	case pgtype.Numeric:
		if b, err := v.MarshalJSON(); err == nil {
			return json.RawMessage(b)
		}
	case pgtype.Array[any]:
		els := make([]any, len(v.Elements))
		for i, e := range v.Elements {
			els[i] = jsonValue(e)
		}
		return map[string]any{"elements": els, "dims": v.Dims}
	case []any:
		els := make([]any, len(v))
		for i, e := range v {
			els[i] = jsonValue(e)
		}
		return els
	case [16]byte:
		return uuid.UUID(v)
	}
	return v
}
