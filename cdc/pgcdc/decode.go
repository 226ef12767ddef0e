package pgcdc

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

// errUnknownType is the cause of a DecodeError for a type the map lacks.
var errUnknownType = errors.New("type not known to the pgx type map (set Config.UnknownTypesAsText to receive its text)")

// decoder turns pgoutput messages into transactions. It is used by one
// goroutine at a time.
type decoder struct {
	types         *pgtype.Map
	unknownAsText bool
	relations     map[uint32]*pglogrepl.RelationMessage
	typeNames     map[uint32]string
	tx            *Transaction // the transaction being read, nil between
}

func newDecoder(unknownAsText bool) *decoder {
	return &decoder{
		types:         pgtype.NewMap(),
		unknownAsText: unknownAsText,
		relations:     map[uint32]*pglogrepl.RelationMessage{},
		typeNames:     map[uint32]string{},
	}
}

// reset forgets what a replication session told: a new session sends its
// relations again, and an unfinished transaction is sent again whole.
func (d *decoder) reset() {
	d.relations = map[uint32]*pglogrepl.RelationMessage{}
	d.tx = nil
}

// decode handles one pgoutput message written at lsn and returns the
// transaction it completed, if any.
func (d *decoder) decode(data []byte, lsn LSN) (*Transaction, error) {
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: parse pgoutput message at %s: %w", lsn, err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		d.relations[m.RelationID] = m
	case *pglogrepl.TypeMessage:
		d.typeNames[m.DataType] = m.Namespace + "." + m.Name
	case *pglogrepl.BeginMessage:
		d.tx = &Transaction{Xid: m.Xid, CommitLSN: m.FinalLSN, CommitTime: m.CommitTime}
	case *pglogrepl.CommitMessage:
		tx := d.tx
		if tx == nil {
			return nil, fmt.Errorf("pgcdc: commit at %s without a begin", lsn)
		}
		d.tx = nil
		tx.CommitLSN, tx.EndLSN, tx.CommitTime = m.CommitLSN, m.TransactionEndLSN, m.CommitTime
		return tx, nil
	case *pglogrepl.InsertMessage:
		return nil, d.change(lsn, m.RelationID, Insert, m.Tuple, nil)
	case *pglogrepl.UpdateMessage:
		return nil, d.change(lsn, m.RelationID, Update, m.NewTuple, m.OldTuple)
	case *pglogrepl.DeleteMessage:
		return nil, d.change(lsn, m.RelationID, Delete, nil, m.OldTuple)
	case *pglogrepl.TruncateMessage:
		if d.tx == nil {
			return nil, fmt.Errorf("pgcdc: truncate at %s outside a transaction", lsn)
		}
		for _, id := range m.RelationIDs {
			rel, ok := d.relations[id]
			if !ok {
				return nil, fmt.Errorf("pgcdc: truncate at %s of relation %d, which the stream never described", lsn, id)
			}
			d.tx.Changes = append(d.tx.Changes, Change{
				Op: Truncate, Schema: rel.Namespace, Table: rel.RelationName, LSN: lsn,
				Cascade:         m.Option&pglogrepl.TruncateOptionCascade != 0,
				RestartIdentity: m.Option&pglogrepl.TruncateOptionRestartIdentity != 0,
			})
		}
	case *pglogrepl.OriginMessage, *pglogrepl.LogicalDecodingMessage:
		// Neither carries a row change.
	default:
		return nil, fmt.Errorf("pgcdc: unexpected pgoutput message %T at %s", msg, lsn)
	}
	return nil, nil
}

func (d *decoder) change(lsn LSN, relID uint32, op Op, newTuple, oldTuple *pglogrepl.TupleData) error {
	if d.tx == nil {
		return fmt.Errorf("pgcdc: %s at %s outside a transaction", op, lsn)
	}
	rel, ok := d.relations[relID]
	if !ok {
		return fmt.Errorf("pgcdc: %s at %s on relation %d, which the stream never described", op, lsn, relID)
	}
	c := Change{Op: op, Schema: rel.Namespace, Table: rel.RelationName, LSN: lsn}
	var err error
	if newTuple != nil {
		if c.New, err = d.row(rel, newTuple); err != nil {
			return err
		}
	}
	if oldTuple != nil && len(oldTuple.Columns) > 0 {
		if c.Old, err = d.row(rel, oldTuple); err != nil {
			return err
		}
	}
	d.tx.Changes = append(d.tx.Changes, c)
	return nil
}

func (d *decoder) row(rel *pglogrepl.RelationMessage, tuple *pglogrepl.TupleData) ([]Value, error) {
	if len(tuple.Columns) > len(rel.Columns) {
		return nil, fmt.Errorf("pgcdc: %s.%s: a row of %d columns for a relation of %d", rel.Namespace, rel.RelationName, len(tuple.Columns), len(rel.Columns))
	}
	row := make([]Value, len(tuple.Columns))
	for i, col := range tuple.Columns {
		rc := rel.Columns[i]
		v := Value{Name: rc.Name, Type: rc.DataType, Key: rc.Flags&1 != 0}
		switch col.DataType {
		case pglogrepl.TupleDataTypeNull:
		case pglogrepl.TupleDataTypeToast:
			v.Unchanged = true
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			format := int16(pgtype.TextFormatCode)
			if col.DataType == pglogrepl.TupleDataTypeBinary {
				format = pgtype.BinaryFormatCode
			}
			val, err := d.value(rc.DataType, format, col.Data)
			if err != nil {
				return nil, &DecodeError{Schema: rel.Namespace, Table: rel.RelationName, Column: rc.Name, Type: rc.DataType, TypeName: d.typeNames[rc.DataType], Err: err}
			}
			v.Value = val
		default:
			return nil, &DecodeError{Schema: rel.Namespace, Table: rel.RelationName, Column: rc.Name, Type: rc.DataType,
				Err: fmt.Errorf("unknown tuple data kind %q", col.DataType)}
		}
		row[i] = v
	}
	return row, nil
}

func (d *decoder) value(oid uint32, format int16, data []byte) (any, error) {
	switch oid {
	case pgtype.JSONOID, pgtype.JSONBOID:
		if format == pgtype.BinaryFormatCode && oid == pgtype.JSONBOID {
			// jsonb's binary form is a version byte and the text.
			if len(data) == 0 || data[0] != 1 {
				return nil, errors.New("unknown jsonb binary version")
			}
			data = data[1:]
		}
		return json.RawMessage(data), nil
	}
	t, ok := d.types.TypeForOID(oid)
	if !ok {
		if d.unknownAsText && format == pgtype.TextFormatCode {
			return string(data), nil
		}
		return nil, errUnknownType
	}
	if _, isArray := t.Codec.(*pgtype.ArrayCodec); isArray {
		// pgx flattens a multi-dimensional array into []any; keep the
		// dimensions (and lower bounds other than 1) where there are any.
		var a pgtype.Array[any]
		if err := d.types.Scan(oid, format, data, &a); err != nil {
			return nil, err
		}
		if len(a.Dims) > 1 || len(a.Dims) == 1 && a.Dims[0].LowerBound != 1 {
			return a, nil
		}
		if a.Elements == nil {
			return []any{}, nil
		}
		return a.Elements, nil
	}
	v, err := t.Codec.DecodeValue(d.types, oid, format, data)
	if err != nil {
		return nil, err
	}
	if u, ok := v.([16]byte); ok && oid == pgtype.UUIDOID {
		return uuid.UUID(u), nil
	}
	return v, nil
}
