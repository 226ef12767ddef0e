package nats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/varve-go/varve"
)

// Stream ids become one subject token (and one KV key): bytes in
// [A-Za-z0-9_-] stay, every other byte is written as '=' and two upper-case
// hex digits. The mapping is injective and the token "=" alone never occurs.

func safeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

const hexDigits = "0123456789ABCDEF"

func encodeID(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if safeByte(c) {
			b = append(b, c)
		} else {
			b = append(b, '=', hexDigits[c>>4], hexDigits[c&15])
		}
	}
	return string(b)
}

var errBadToken = errors.New("malformed stream token")

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func decodeID(tok string) (string, error) {
	esc := false
	for i := 0; i < len(tok); i++ {
		if tok[i] == '=' {
			esc = true
			break
		}
	}
	if !esc {
		return tok, nil
	}
	b := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c != '=' {
			b = append(b, c)
			continue
		}
		if i+2 >= len(tok) {
			return "", errBadToken
		}
		hi, ok1 := unhex(tok[i+1])
		lo, ok2 := unhex(tok[i+2])
		if !ok1 || !ok2 {
			return "", errBadToken
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	return string(b), nil
}

// Message kinds. Every message on an event subject starts with a format
// byte, a kind byte and the stream's state after the message, so that the
// last message of a subject describes the stream.
const (
	formatV1 byte = 1

	// Kind 0 is never stored (it was the body of dedupe probes).
	kindCommit    byte = 1 // events inline
	kindChunked   byte = 2 // events in chunk messages, listed by sequence
	kindDeleted   byte = 3 // the stream was deleted; a new incarnation starts here
	kindTombstone byte = 4 // deleted for good
	kindTruncated byte = 5 // the floor moved up
)

const stateLen = 2 + 8*8

// state is the stream's state as of one message of its subject.
type state struct {
	kind    byte
	version varve.Version // version after the message; 0 when deleted
	floor   varve.Version // events below floor are truncated (0 or 1: none)
	created int64         // unix nanos: first commit of the incarnation
	updated int64         // unix nanos: the commit's time, or the last commit's for markers
	// incarnation is the sequence of the delete marker that started the
	// stream's current life, 0 for the first.
	incarnation uint64
	// last is the position of the stream's last event; markers carry it,
	// commits derive it from their own sequence.
	last varve.Position
	// prev is the sequence of the subject's previous message (the expected
	// last sequence the message was published with): stream reads walk
	// back along it.
	prev uint64
}

func (s state) isCommit() bool { return s.kind == kindCommit || s.kind == kindChunked }

func putState(b []byte, s state) {
	b[0] = formatV1
	b[1] = s.kind
	le := binary.LittleEndian
	le.PutUint64(b[2:], s.version)
	le.PutUint64(b[10:], s.floor)
	le.PutUint64(b[18:], uint64(s.created))
	le.PutUint64(b[26:], uint64(s.updated))
	le.PutUint64(b[34:], s.incarnation)
	le.PutUint64(b[42:], s.last.Commit)
	le.PutUint64(b[50:], s.last.Seq)
	le.PutUint64(b[58:], s.prev)
}

var errCorrupt = errors.New("corrupt message")

func getState(b []byte) (state, error) {
	if len(b) < stateLen || b[0] != formatV1 || b[1] > kindTruncated {
		return state{}, fmt.Errorf("%w: bad header", errCorrupt)
	}
	le := binary.LittleEndian
	return state{
		kind:        b[1],
		version:     le.Uint64(b[2:]),
		floor:       le.Uint64(b[10:]),
		created:     int64(le.Uint64(b[18:])),
		updated:     int64(le.Uint64(b[26:])),
		incarnation: le.Uint64(b[34:]),
		last:        varve.Position{Commit: le.Uint64(b[42:]), Seq: le.Uint64(b[50:])},
		prev:        le.Uint64(b[58:]),
	}, nil
}

// appendEvents encodes a commit's events: a count, then per event the id,
// type, data and metadata, lengths as uvarints.
func appendEvents(b []byte, evs []varve.Event) []byte {
	b = binary.AppendUvarint(b, uint64(len(evs)))
	for i := range evs {
		e := &evs[i]
		b = append(b, e.ID[:]...)
		b = binary.AppendUvarint(b, uint64(len(e.Type)))
		b = append(b, e.Type...)
		b = binary.AppendUvarint(b, uint64(len(e.Data)))
		b = append(b, e.Data...)
		b = binary.AppendUvarint(b, uint64(len(e.Metadata)))
		b = append(b, e.Metadata...)
	}
	return b
}

func eventsSize(evs []varve.Event) int {
	n := binary.MaxVarintLen64
	for i := range evs {
		e := &evs[i]
		n += 16 + 3*binary.MaxVarintLen32 + len(e.Type) + len(e.Data) + len(e.Metadata)
	}
	return n
}

// eventReader walks an encoded events payload.
type eventReader struct {
	b []byte
	n int // events left
}

func newEventReader(b []byte) (eventReader, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return eventReader{}, fmt.Errorf("%w: bad event count", errCorrupt)
	}
	return eventReader{b: b[k:], n: int(n)}, nil
}

func (r *eventReader) field() ([]byte, error) {
	l, k := binary.Uvarint(r.b)
	if k <= 0 || l > uint64(len(r.b)-k) {
		return nil, fmt.Errorf("%w: bad field length", errCorrupt)
	}
	f := r.b[k : k+int(l) : k+int(l)]
	r.b = r.b[k+int(l):]
	if l == 0 {
		return nil, nil
	}
	return f, nil
}

// next decodes the next event's id and, unless idOnly, its fields. Data and
// metadata alias the payload.
func (r *eventReader) next(e *varve.RecordedEvent, idOnly bool) error {
	if len(r.b) < 16 {
		return fmt.Errorf("%w: short event", errCorrupt)
	}
	copy(e.ID[:], r.b[:16])
	r.b = r.b[16:]
	r.n--
	typ, err := r.field()
	if err != nil {
		return err
	}
	data, err := r.field()
	if err != nil {
		return err
	}
	meta, err := r.field()
	if err != nil {
		return err
	}
	if !idOnly {
		e.Type, e.Data, e.Metadata = string(typ), data, meta
	}
	return nil
}

// skip moves past the events left, to the sections after them.
func (r *eventReader) skip() error {
	var e varve.RecordedEvent
	for r.n > 0 {
		if err := r.next(&e, true); err != nil {
			return err
		}
	}
	return nil
}

// A commit's events may be followed by sections, each a kind byte and its
// body. Readers stop after the counted events, so processes of earlier
// versions, which write no sections, skip them. sectionSnapshot holds the
// stream's state after the commit (varve.CommitSnapshotStore): its schema
// version (varint), the time it was taken (unix nanos, 8 bytes), and the
// data (uvarint length, bytes); its version is the commit's.
const sectionSnapshot byte = 's'

func appendSnapshotSection(b []byte, s varve.Snapshot) []byte {
	b = append(b, sectionSnapshot)
	b = binary.AppendVarint(b, int64(s.SchemaVersion))
	b = binary.LittleEndian.AppendUint64(b, uint64(nanos(s.TakenAt)))
	b = binary.AppendUvarint(b, uint64(len(s.Data)))
	return append(b, s.Data...)
}

func snapshotSectionSize(s varve.Snapshot) int { return 1 + 2*binary.MaxVarintLen64 + 8 + len(s.Data) }

// snapshotSection returns the snapshot section of a payload (a commit's
// events and sections, or a truncation marker's body: no events and the
// section it carries on), or nil.
func snapshotSection(payload []byte) ([]byte, error) {
	r, err := newEventReader(payload)
	if err == nil {
		err = r.skip()
	}
	if err != nil || len(r.b) == 0 || r.b[0] != sectionSnapshot {
		return nil, err
	}
	return r.b, nil
}

// snapshotIn returns the snapshot that a payload keeps, if any: the state
// of stream at version, the message's. Data aliases the payload.
func snapshotIn(stream string, payload []byte, version varve.Version) (varve.Snapshot, bool, error) {
	b, err := snapshotSection(payload)
	if err != nil || b == nil {
		return varve.Snapshot{}, false, err
	}
	schema, k := binary.Varint(b[1:])
	if k <= 0 || len(b) < 1+k+8 {
		return varve.Snapshot{}, false, fmt.Errorf("%w: bad snapshot section", errCorrupt)
	}
	b = b[1+k:]
	at := int64(binary.LittleEndian.Uint64(b))
	n, k := binary.Uvarint(b[8:])
	if k <= 0 || n > uint64(len(b)-8-k) {
		return varve.Snapshot{}, false, fmt.Errorf("%w: bad snapshot length", errCorrupt)
	}
	s := varve.Snapshot{Stream: stream, Version: version, SchemaVersion: int(schema), TakenAt: fromNanos(at)}
	if n > 0 {
		s.Data = b[8+k : 8+k+int(n) : 8+k+int(n)]
	}
	return s, true, nil
}

// chunkRef is the body of a chunked commit after its state: the event
// count, the payload size and the sequences of the chunks, in order.
type chunkRef struct {
	events int
	size   int
	seqs   []uint64
}

func appendChunkRef(b []byte, c chunkRef) []byte {
	b = binary.AppendUvarint(b, uint64(c.events))
	b = binary.AppendUvarint(b, uint64(c.size))
	b = binary.AppendUvarint(b, uint64(len(c.seqs)))
	for _, s := range c.seqs {
		b = binary.AppendUvarint(b, s)
	}
	return b
}

func getChunkRef(b []byte) (chunkRef, error) {
	var v [3]uint64
	for i := range v {
		x, k := binary.Uvarint(b)
		if k <= 0 {
			return chunkRef{}, fmt.Errorf("%w: bad chunk list", errCorrupt)
		}
		v[i], b = x, b[k:]
	}
	if v[2] > uint64(len(b)) {
		return chunkRef{}, fmt.Errorf("%w: bad chunk count", errCorrupt)
	}
	c := chunkRef{events: int(v[0]), size: int(v[1]), seqs: make([]uint64, v[2])}
	for i := range c.seqs {
		x, k := binary.Uvarint(b)
		if k <= 0 {
			return chunkRef{}, fmt.Errorf("%w: bad chunk sequence", errCorrupt)
		}
		c.seqs[i], b = x, b[k:]
	}
	return c, nil
}

// A floor entry on the floor subject says that the commit at seq keeps
// only its events with versions >= floor (a truncation inside a commit).
func appendFloor(b []byte, seq uint64, floor varve.Version) []byte {
	b = binary.LittleEndian.AppendUint64(b, seq)
	return binary.LittleEndian.AppendUint64(b, floor)
}

func getFloor(b []byte) (seq uint64, floor varve.Version, err error) {
	if len(b) < 16 {
		return 0, 0, fmt.Errorf("%w: bad floor entry", errCorrupt)
	}
	return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), nil
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Snapshots are stored as version, schema version, time and the place of
// the snapshot's version in the stream (incarnation, commit sequence and
// its first version, zero if unknown), 8 bytes each, then the data.
const snapshotHeader = 48

func encodeSnapshot(s varve.Snapshot, at hint) []byte {
	b := make([]byte, snapshotHeader, snapshotHeader+len(s.Data))
	le := binary.LittleEndian
	le.PutUint64(b, s.Version)
	le.PutUint64(b[8:], uint64(int64(s.SchemaVersion)))
	le.PutUint64(b[16:], uint64(nanos(s.TakenAt)))
	le.PutUint64(b[24:], at.incarnation)
	le.PutUint64(b[32:], at.seq)
	le.PutUint64(b[40:], at.first)
	return append(b, s.Data...)
}

func decodeSnapshot(stream string, b []byte) (varve.Snapshot, hint, error) {
	if len(b) < snapshotHeader {
		return varve.Snapshot{}, hint{}, fmt.Errorf("%w: short snapshot", errCorrupt)
	}
	le := binary.LittleEndian
	s := varve.Snapshot{
		Stream:        stream,
		Version:       le.Uint64(b),
		SchemaVersion: int(int64(le.Uint64(b[8:]))),
		TakenAt:       fromNanos(int64(le.Uint64(b[16:]))),
	}
	at := hint{incarnation: le.Uint64(b[24:]), seq: le.Uint64(b[32:]), first: le.Uint64(b[40:])}
	if len(b) > snapshotHeader {
		s.Data = b[snapshotHeader:]
	}
	return s, at, nil
}
