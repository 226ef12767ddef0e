package pgcdc

import (
	"encoding/binary"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

// FuzzDecode feeds the decoder arbitrary messages after a relation of
// three columns and a begin: it returns errors, never panics.
func FuzzDecode(f *testing.F) {
	row := func(kind byte, cols ...[]byte) []byte {
		b := []byte{kind, 0, 0, 0, 7, 'N', 0, byte(len(cols))}
		for _, c := range cols {
			if c == nil {
				b = append(b, 'n')
				continue
			}
			b = append(b, 't')
			b = binary.BigEndian.AppendUint32(b, uint32(len(c)))
			b = append(b, c...)
		}
		return b
	}
	f.Add(row('I', []byte("1"), []byte("x"), []byte(`{"a":1}`)))
	f.Add(row('I', []byte("1"), nil, []byte(`{}`)))
	f.Add([]byte{'U', 0, 0, 0, 7, 'K', 0, 1, 't', 0, 0, 0, 1, '2', 'N', 0, 1, 'u'})
	f.Add([]byte{'D', 0, 0, 0, 7, 'O', 0, 3, 'n', 'n', 'n'})
	f.Add([]byte{'T', 0, 0, 0, 1, 0, 0, 0, 0, 7})
	f.Fuzz(func(t *testing.T, msg []byte) {
		d := newDecoder(true)
		d.relations[7] = &pglogrepl.RelationMessage{RelationID: 7, Namespace: "public", RelationName: "t", Columns: []*pglogrepl.RelationMessageColumn{
			{Flags: 1, Name: "id", DataType: pgtype.Int4OID},
			{Name: "name", DataType: pgtype.TextOID},
			{Name: "doc", DataType: pgtype.JSONBOID},
		}}
		d.tx = &Transaction{}
		_, _ = d.decode(msg, 1)
	})
}
