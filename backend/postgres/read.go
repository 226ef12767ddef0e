package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/varve-go/varve"
)

// Rows are decoded from PostgreSQL's binary format straight into a page:
// the text of a page (stream names, event types) shares one string and its
// data and metadata share one byte slice, so a page costs a few allocations
// whatever its length.

// pgEpochMicros is 2000-01-01 UTC, PostgreSQL's timestamp epoch, in Unix
// microseconds.
const pgEpochMicros = 946_684_800_000_000

// span locates a value in a page arena; n < 0 is SQL NULL.
type span struct{ off, n int }

type rowRefs struct {
	stream, typ, data, meta span
}

// page accumulates the variable-length values of a page while it is read.
type page struct {
	text []byte
	blob []byte
	refs []rowRefs
}

func (p *page) addText(v []byte) span {
	s := span{len(p.text), len(v)}
	p.text = append(p.text, v...)
	return s
}

func (p *page) addBlob(v []byte) span {
	if v == nil {
		return span{0, -1}
	}
	s := span{len(p.blob), len(v)}
	p.blob = append(p.blob, v...)
	return s
}

// finish fills the variable-length fields of evs, the page's events in
// order, from the arenas.
func (p *page) finish(evs []varve.RecordedEvent, streamFromArena bool) {
	text := string(p.text)
	for i := range evs {
		r := &p.refs[i]
		e := &evs[i]
		if streamFromArena {
			e.Stream = text[r.stream.off : r.stream.off+r.stream.n]
		}
		e.Type = text[r.typ.off : r.typ.off+r.typ.n]
		e.Data = p.bytes(r.data)
		e.Metadata = p.bytes(r.meta)
	}
}

func (p *page) bytes(s span) []byte {
	if s.n < 0 {
		return nil
	}
	return p.blob[s.off : s.off+s.n : s.off+s.n]
}

var errFormat = errors.New("postgres: result is not in binary format; use a query exec mode that describes statements")

// checkBinary checks that every column comes in the binary format, or as
// text, whose two formats are the same bytes.
func checkBinary(fds []pgconn.FieldDescription) error {
	for _, fd := range fds {
		if fd.Format != pgx.BinaryFormatCode && fd.DataTypeOID != pgtype.TextOID {
			return errFormat
		}
	}
	return nil
}

func int8At(v []byte) int64 { return int64(binary.BigEndian.Uint64(v)) }

func timeAt(v []byte) time.Time {
	return time.UnixMicro(int8At(v) + pgEpochMicros)
}

// ReadStream reads one page of a stream in one statement that also tells a
// missing or deleted stream from an empty page.
func (b *Backend) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	if err := b.begin(ctx); err != nil {
		return buf, err
	}
	sql, from := b.sql.readForward, int64(q.From)
	if q.Direction == varve.Backward {
		sql = b.sql.readBackward
		if q.From == 0 || q.From > math.MaxInt64 {
			from = math.MaxInt64
		}
	} else if q.From > math.MaxInt64 {
		from = math.MaxInt64
	}
	b.requests.Add(1)
	rows, err := b.pool.Query(ctx, sql, q.Stream, from, q.Limit)
	if err != nil {
		return buf, b.fail(ctx, err)
	}
	defer rows.Close()
	if err := checkBinary(rows.FieldDescriptions()); err != nil {
		return buf, err
	}
	start, left := len(buf), q.MaxBytes
	var p page
	found, deleted, tombstoned := false, false, false
	for rows.Next() {
		v := rows.RawValues()
		found = true
		deleted, tombstoned = v[0][0] == 1, v[1][0] == 1
		if v[2] == nil { // the stream exists, the page is empty
			continue
		}
		tags, err := textArray(v[10])
		if err != nil {
			return buf[:start], err
		}
		buf = append(buf, varve.RecordedEvent{
			ID:         [16]byte(v[5]),
			Stream:     q.Stream,
			Version:    varve.Version(int8At(v[4])),
			Position:   varve.Position{Commit: uint64(int8At(v[2])), Seq: uint64(int8At(v[3]))},
			RecordedAt: timeAt(v[9]),
			Tags:       tags,
		})
		p.refs = append(p.refs, rowRefs{typ: p.addText(v[6]), data: p.addBlob(v[7]), meta: p.addBlob(v[8])})
		if spend(&left, len(v[7])+len(v[8])) {
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return buf[:start], b.fail(ctx, err)
	}
	switch {
	case tombstoned:
		return buf[:start], varve.ErrStreamDeleted
	case !found || deleted:
		return buf[:start], varve.ErrStreamNotFound
	}
	p.finish(buf[start:], false)
	return buf, nil
}

// ReadAll reads one page of $all: rows ordered by (tx, seq) after q.After
// and below the snapshot's xmin, so that no transaction that is still
// running can later commit an event before the page's last position. A
// backward page reads below the same horizon, down from q.Before.
func (b *Backend) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	if err := b.begin(ctx); err != nil {
		return buf, err
	}
	b.requests.Add(1)
	stmt, at := b.sql.readAll, q.After
	if q.Direction == varve.Backward {
		stmt, at = b.sql.readAllBackward, q.Before
		if at.IsZero() {
			at = varve.Position{Commit: math.MaxInt64, Seq: math.MaxInt64}
		}
	}
	start := len(buf)
	floor, inc := b.floor.get()
	rows, err := b.pool.Query(ctx, stmt, clamp(at.Commit), clamp(at.Seq), q.Limit, floor, inc)
	if err != nil {
		return buf, b.fail(ctx, err)
	}
	buf, _, err = b.scanAll(rows, buf, q.MaxBytes)
	if err != nil {
		return buf, b.fail(ctx, err)
	}
	var top uint64 // the page's greatest transaction id: its last row forward, its first backward
	for _, e := range buf[start:] {
		top = max(top, e.Position.Commit)
	}
	if len(buf) > start {
		b.floor.raise(int64(top)+1, inc)
	}
	return buf, nil
}

// spend takes n bytes from a page's byte budget *left, if the page has one
// (a budget of 0 has none), and reports whether the budget is spent: a
// read stops taking rows after this one.
func spend(left *int, n int) bool {
	if *left <= 0 {
		return false
	}
	*left -= n
	return *left <= 0
}

// scanAll appends the rows of a read of $all to buf, up to the row that
// spends maxBytes (0: no byte budget; spent reports the stop), and closes
// them; on an error buf is as it was. The rows after the stop are not
// decoded (pgx reads and drops them as it closes them).
func (b *Backend) scanAll(rows pgx.Rows, buf []varve.RecordedEvent, maxBytes int) (_ []varve.RecordedEvent, spent bool, _ error) {
	return b.scanRows(rows, buf, maxBytes, 0, nil)
}

// scanRows is scanAll of rows whose event columns begin at column off;
// head, when set, reads the columns before them on the first row. A row
// whose event columns are NULL (an empty page's) holds no event.
func (b *Backend) scanRows(rows pgx.Rows, buf []varve.RecordedEvent, maxBytes, off int, head func([][]byte)) (_ []varve.RecordedEvent, spent bool, _ error) {
	defer rows.Close()
	if err := checkBinary(rows.FieldDescriptions()); err != nil {
		return buf, false, err
	}
	start, left := len(buf), maxBytes
	var p page
	for first := true; rows.Next(); first = false {
		v := rows.RawValues()
		if head != nil && first {
			head(v)
		}
		if v = v[off:]; v[0] == nil {
			continue
		}
		tags, err := textArray(v[9])
		if err != nil {
			return buf[:start], false, err
		}
		buf = append(buf, varve.RecordedEvent{
			ID:         [16]byte(v[4]),
			Version:    varve.Version(int8At(v[3])),
			Position:   varve.Position{Commit: uint64(int8At(v[0])), Seq: uint64(int8At(v[1]))},
			RecordedAt: timeAt(v[8]),
			Tags:       tags,
		})
		p.refs = append(p.refs, rowRefs{stream: p.addText(v[2]), typ: p.addText(v[5]), data: p.addBlob(v[6]), meta: p.addBlob(v[7])})
		if spent = spend(&left, len(v[6])+len(v[7])); spent {
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return buf[:start], false, err
	}
	p.finish(buf[start:], true)
	return buf, spent, nil
}

func clamp(u uint64) int64 {
	if u > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(u)
}

// LastPosition returns the position of the last event below the snapshot's
// xmin: the last one a ReadAll can return now.
func (b *Backend) LastPosition(ctx context.Context) (varve.Position, error) {
	if err := b.begin(ctx); err != nil {
		return varve.Position{}, err
	}
	var tx, seq int64
	b.requests.Add(1)
	floor, inc := b.floor.get()
	err := b.pool.QueryRow(ctx, b.sql.lastPosition, floor, inc).Scan(&tx, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return varve.Start, nil
	}
	if err != nil {
		return varve.Position{}, b.fail(ctx, err)
	}
	b.floor.raise(tx+1, inc)
	return varve.Position{Commit: uint64(tx), Seq: uint64(seq)}, nil
}

// textArray decodes a one-dimensional text[] in PostgreSQL's binary format
// (dimensions, a null flag, the element type, then each element's length
// and bytes); NULL is no tags.
func textArray(v []byte) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	bad := func() ([]string, error) { return nil, fmt.Errorf("postgres: malformed text[] of %d bytes", len(v)) }
	if len(v) < 12 {
		return bad()
	}
	ndim := int(binary.BigEndian.Uint32(v))
	if ndim == 0 {
		return nil, nil
	}
	if ndim != 1 || len(v) < 20 {
		return bad()
	}
	n := int(binary.BigEndian.Uint32(v[12:]))
	out := make([]string, 0, n)
	p := 20
	for range n {
		if len(v) < p+4 {
			return bad()
		}
		l := int(int32(binary.BigEndian.Uint32(v[p:])))
		p += 4
		if l < 0 || len(v) < p+l {
			return bad()
		}
		out = append(out, string(v[p:p+l]))
		p += l
	}
	return out, nil
}
