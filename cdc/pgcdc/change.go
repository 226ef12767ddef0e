package pgcdc

import (
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// LSN is a PostgreSQL write-ahead log position.
type LSN = pglogrepl.LSN

// Op is the kind of a change.
type Op uint8

// The kinds of change.
const (
	Insert Op = iota + 1
	Update
	Delete
	Truncate
)

func (o Op) String() string {
	switch o {
	case Insert:
		return "insert"
	case Update:
		return "update"
	case Delete:
		return "delete"
	case Truncate:
		return "truncate"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Value is one column of a row.
type Value struct {
	Name string
	// Type is the OID of the column's type.
	Type uint32
	// Key marks a column of the table's replica identity (its primary key
	// by default).
	Key bool
	// Value is the decoded value; nil is SQL NULL (unless Unchanged).
	Value any
	// Unchanged marks a TOAST-ed value that an update did not change:
	// PostgreSQL does not send it, so Value is nil but the column is not
	// NULL.
	Unchanged bool
}

// Change is one row change, or the truncation of one table.
type Change struct {
	Op     Op
	Schema string
	Table  string
	// LSN is where the change was written in the WAL.
	LSN LSN
	// New is the row after an insert or update.
	New []Value
	// Old is the row before an update or delete: its replica identity
	// columns (the key), or the whole row with REPLICA IDENTITY FULL. An
	// update carries it only when it changed the key (or with FULL).
	Old []Value
	// Cascade and RestartIdentity are the options of a truncate.
	Cascade, RestartIdentity bool
}

// Key returns the replica identity columns of the row: from New, or from
// Old for a delete. A truncate has no key.
func (c Change) Key() []Value {
	row := c.New
	if c.Op == Delete {
		row = c.Old
	}
	var key []Value
	for _, v := range row {
		if v.Key {
			key = append(key, v)
		}
	}
	return key
}

// Transaction is one committed transaction: its changes in commit order.
type Transaction struct {
	Xid uint32
	// CommitLSN is the LSN of the commit record; EndLSN is the end of it,
	// which is what acknowledging the transaction confirms to the slot.
	CommitLSN  LSN
	EndLSN     LSN
	CommitTime time.Time
	Changes    []Change
}

// DecodeError is a value the decoder could not decode.
type DecodeError struct {
	Schema, Table, Column string
	// Type is the OID of the column's type and TypeName its name when the
	// server sent one.
	Type     uint32
	TypeName string
	Err      error
}

func (e *DecodeError) Error() string {
	t := fmt.Sprintf("type oid %d", e.Type)
	if e.TypeName != "" {
		t = fmt.Sprintf("type %s (oid %d)", e.TypeName, e.Type)
	}
	return fmt.Sprintf("pgcdc: decode %s.%s column %q of %s: %v", e.Schema, e.Table, e.Column, t, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }
