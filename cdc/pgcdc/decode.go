package pgcdc

import (
	"bytes"
	"encoding/binary"
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
	if len(data) > 0 {
		switch data[0] {
		case 'I', 'U', 'D':
			// Row changes, nearly all of the stream, are read here without
			// pglogrepl's copy of every column; the one copy of the message
			// keeps the values apart from the connection's buffer.
			return nil, d.rowChange(bytes.Clone(data), lsn)
		}
	}
	msg, err := parse(data)
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

// rowChange decodes an Insert ('I'), Update ('U') or Delete ('D') message
// of pgoutput's protocol version 1:
//
//	I relid:u32 'N' tuple
//	U relid:u32 ['K' tuple | 'O' tuple] 'N' tuple
//	D relid:u32 ('K' | 'O') tuple
//
// parse is pglogrepl.Parse, which indexes some messages without checking
// their length: a malformed message is an error, not a panic.
func parse(data []byte) (msg pglogrepl.Message, err error) {
	if len(data) == 0 {
		return nil, errors.New("empty message")
	}
	if data[0] == 'T' && len(data) >= 5 && uint64(binary.BigEndian.Uint32(data[1:]))*4+6 > uint64(len(data)) {
		// pglogrepl would allocate the count it reads before it reads the ids.
		return nil, errors.New("truncate message shorter than its relation count")
	}
	defer func() {
		if r := recover(); r != nil {
			msg, err = nil, fmt.Errorf("malformed %q message: %v", data[0], r)
		}
	}()
	return pglogrepl.Parse(data)
}

func (d *decoder) rowChange(msg []byte, lsn LSN) error {
	op := map[byte]Op{'I': Insert, 'U': Update, 'D': Delete}[msg[0]]
	if d.tx == nil {
		return fmt.Errorf("pgcdc: %s at %s outside a transaction", op, lsn)
	}
	if len(msg) < 6 {
		return fmt.Errorf("pgcdc: %s at %s: message of %d bytes", op, lsn, len(msg))
	}
	relID := binary.BigEndian.Uint32(msg[1:])
	rel, ok := d.relations[relID]
	if !ok {
		return fmt.Errorf("pgcdc: %s at %s on relation %d, which the stream never described", op, lsn, relID)
	}
	c := Change{Op: op, Schema: rel.Namespace, Table: rel.RelationName, LSN: lsn}
	rest := msg[5:]
	var err error
	for len(rest) > 0 {
		kind := rest[0]
		var row []Value
		if row, rest, err = d.tuple(rel, rest[1:]); err != nil {
			return err
		}
		switch {
		case kind == 'N' && op != Delete && c.New == nil:
			c.New = row
		case (kind == 'K' || kind == 'O') && op != Insert && c.Old == nil && c.New == nil:
			c.Old = row
		default:
			return fmt.Errorf("pgcdc: %s at %s on %s.%s: unexpected tuple %q", op, lsn, rel.Namespace, rel.RelationName, kind)
		}
	}
	if op != Delete && c.New == nil || op == Delete && c.Old == nil {
		return fmt.Errorf("pgcdc: %s at %s on %s.%s: no row", op, lsn, rel.Namespace, rel.RelationName)
	}
	d.tx.Changes = append(d.tx.Changes, c)
	return nil
}

var errShortTuple = errors.New("tuple data cut short")

// tuple decodes one TupleData (ncols:u16, then per column a kind byte and,
// for 't' and 'b', len:u32 and the bytes) and returns what follows it.
func (d *decoder) tuple(rel *pglogrepl.RelationMessage, src []byte) ([]Value, []byte, error) {
	fail := func(col string, typ uint32, err error) ([]Value, []byte, error) {
		return nil, nil, &DecodeError{Schema: rel.Namespace, Table: rel.RelationName, Column: col, Type: typ, TypeName: d.typeNames[typ], Err: err}
	}
	if len(src) < 2 {
		return fail("", 0, errShortTuple)
	}
	n := int(binary.BigEndian.Uint16(src))
	src = src[2:]
	if n > len(rel.Columns) {
		return nil, nil, fmt.Errorf("pgcdc: %s.%s: a row of %d columns for a relation of %d", rel.Namespace, rel.RelationName, n, len(rel.Columns))
	}
	row := make([]Value, n)
	for i := range row {
		rc := rel.Columns[i]
		v := Value{Name: rc.Name, Type: rc.DataType, Key: rc.Flags&1 != 0}
		if len(src) < 1 {
			return fail(rc.Name, rc.DataType, errShortTuple)
		}
		kind := src[0]
		src = src[1:]
		switch kind {
		case pglogrepl.TupleDataTypeNull:
		case pglogrepl.TupleDataTypeToast:
			v.Unchanged = true
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			if len(src) < 4 {
				return fail(rc.Name, rc.DataType, errShortTuple)
			}
			size := binary.BigEndian.Uint32(src)
			src = src[4:]
			if uint64(size) > uint64(len(src)) {
				return fail(rc.Name, rc.DataType, errShortTuple)
			}
			format := int16(pgtype.TextFormatCode)
			if kind == pglogrepl.TupleDataTypeBinary {
				format = pgtype.BinaryFormatCode
			}
			val, err := d.value(rc.DataType, format, src[:size:size])
			if err != nil {
				return fail(rc.Name, rc.DataType, err)
			}
			v.Value = val
			src = src[size:]
		default:
			return fail(rc.Name, rc.DataType, fmt.Errorf("unknown tuple data kind %q", kind))
		}
		row[i] = v
	}
	return row, src, nil
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
