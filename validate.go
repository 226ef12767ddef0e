package varve

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// CheckStreamID reports whether id is a stream id an application may write:
// 1..256 bytes of UTF-8 without NUL, not "$all" and not beginning with "$",
// the prefix of system streams.
func CheckStreamID(id string) error { return checkStream(id, false) }

func checkStream(id string, system bool) error {
	if len(id) == 0 || len(id) > MaxStreamIDLen {
		return invalid("stream id must be 1..%d bytes, got %d", MaxStreamIDLen, len(id))
	}
	if err := checkText("stream id", id); err != nil {
		return err
	}
	if id == AllStream {
		return invalid("%q is the global log, not a stream", AllStream)
	}
	if !system && strings.HasPrefix(id, SystemPrefix) {
		return invalid("stream ids beginning with %q are system streams", SystemPrefix)
	}
	return nil
}

// CheckName reports whether name is a valid checkpoint or consumer name:
// 1..256 bytes of UTF-8 without NUL.
func CheckName(name string) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return invalid("name must be 1..%d bytes, got %d", MaxNameLen, len(name))
	}
	return checkText("name", name)
}

// checkText refuses invalid UTF-8 and NUL, which not every backend can
// store (PostgreSQL text cannot hold it).
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return invalid("%s is not valid UTF-8", what)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalid("%s contains NUL", what)
	}
	return nil
}

func (s *Store) checkAppend(stream string, expected ExpectedVersion, events []Event, system bool) error {
	if err := checkStream(stream, system); err != nil {
		return err
	}
	if system && !isSystem(stream) {
		return invalid("%q is not a system stream (they begin with %q)", stream, SystemPrefix)
	}
	if !expected.valid() {
		return invalid("expected version %d", int64(expected))
	}
	n := len(events)
	if n == 0 {
		return invalid("no events")
	}
	if n > s.cfg.MaxAppendEvents {
		return invalid("%d events in one append, limit %d", n, s.cfg.MaxAppendEvents)
	}
	total := 0
	for i := range events {
		e := &events[i]
		if len(e.Type) == 0 || len(e.Type) > MaxEventTypeLen {
			return invalid("event %d: type must be 1..%d bytes, got %d", i, MaxEventTypeLen, len(e.Type))
		}
		if err := checkText("event type", e.Type); err != nil {
			return invalid("event %d: %v", i, err)
		}
		size := len(e.Data) + len(e.Metadata)
		if size > s.cfg.MaxEventSize {
			return invalid("event %d: data+metadata is %d bytes, limit %d", i, size, s.cfg.MaxEventSize)
		}
		if total += size; total > s.cfg.MaxAppendBytes {
			return invalid("append of more than %d bytes of data+metadata (Config.MaxAppendBytes)", s.cfg.MaxAppendBytes)
		}
		if len(e.Tags) > 0 {
			if s.tags == nil {
				return fmt.Errorf("event %d has tags: %w", i, ErrNotSupported)
			}
			if err := checkTags(e.Tags); err != nil {
				return invalid("event %d: %v", i, err)
			}
		}
		if e.ID == uuid.Nil {
			e.ID = NewEventID()
		}
	}
	return checkDistinctIDs(events)
}

func isSystem(stream string) bool { return strings.HasPrefix(stream, SystemPrefix) }

func checkDistinctIDs(events []Event) error {
	if len(events) <= 16 {
		for i := 1; i < len(events); i++ {
			for j := 0; j < i; j++ {
				if events[i].ID == events[j].ID {
					return invalid("event %d repeats the id of event %d", i, j)
				}
			}
		}
		return nil
	}
	seen := make(map[uuid.UUID]int, len(events))
	for i, e := range events {
		if j, dup := seen[e.ID]; dup {
			return invalid("event %d repeats the id of event %d", i, j)
		}
		seen[e.ID] = i
	}
	return nil
}
