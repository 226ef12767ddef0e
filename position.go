package varve

import (
	"fmt"
	"strconv"
	"strings"
)

// Position is a place in the global log. Positions are totally ordered by
// (Commit, Seq). Backends whose log has a single sequence leave Commit at 0;
// PostgreSQL orders by (transaction id, sequence). The zero Position is the
// start of the log, before every event.
//
// Position is comparable with ==, usable as a map key, and has a stable text
// form (String, ParsePosition, MarshalText) for checkpoints.
type Position struct {
	Commit uint64
	Seq    uint64
}

// Start is the position before the first event of the log.
var Start = Position{}

// Compare returns -1, 0 or +1 as p is before, equal to or after q.
func (p Position) Compare(q Position) int {
	switch {
	case p.Commit < q.Commit:
		return -1
	case p.Commit > q.Commit:
		return 1
	case p.Seq < q.Seq:
		return -1
	case p.Seq > q.Seq:
		return 1
	}
	return 0
}

// Less reports whether p is before q.
func (p Position) Less(q Position) bool { return p.Compare(q) < 0 }

// IsZero reports whether p is Start.
func (p Position) IsZero() bool { return p == Start }

// String returns "seq" when Commit is 0 and "commit:seq" otherwise.
func (p Position) String() string {
	if p.Commit == 0 {
		return strconv.FormatUint(p.Seq, 10)
	}
	return strconv.FormatUint(p.Commit, 10) + ":" + strconv.FormatUint(p.Seq, 10)
}

// ParsePosition parses the text form written by [Position.String].
func ParsePosition(s string) (Position, error) {
	commit, seq, compound := strings.Cut(s, ":")
	if !compound {
		seq, commit = commit, "0"
	}
	c, err := strconv.ParseUint(commit, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("varve: parse position %q: %w", s, ErrInvalidArgument)
	}
	q, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("varve: parse position %q: %w", s, ErrInvalidArgument)
	}
	return Position{Commit: c, Seq: q}, nil
}

// MarshalText implements encoding.TextMarshaler.
func (p Position) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Position) UnmarshalText(b []byte) error {
	q, err := ParsePosition(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}
