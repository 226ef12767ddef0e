package backendtest

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// CheckInvariants reads the whole global log and every stream in it whose
// name has the given prefix ("" for all) and checks what must hold in any
// store, after any crash: positions strictly increase; each stream's events
// in $all have contiguous, increasing versions and distinct ids, are exactly
// what reading the stream returns, and end at the version StreamInfo
// reports. It returns the number of events checked.
func CheckInvariants(ctx context.Context, s *varve.Store, prefix string) (int, error) {
	type streamState struct {
		ids  []uuid.UUID
		last varve.Version
		seen map[uuid.UUID]bool
	}
	streams := map[string]*streamState{}
	var last varve.Position
	n := 0
	for e, err := range s.ReadAll(ctx, varve.Start) {
		if err != nil {
			return n, fmt.Errorf("read $all: %w", err)
		}
		if !last.Less(e.Position) {
			return n, fmt.Errorf("$all: position %s follows %s", e.Position, last)
		}
		last = e.Position
		if !strings.HasPrefix(e.Stream, prefix) {
			continue
		}
		n++
		st := streams[e.Stream]
		if st == nil {
			st = &streamState{seen: map[uuid.UUID]bool{}}
			streams[e.Stream] = st
		} else if e.Version != st.last+1 {
			return n, fmt.Errorf("stream %s: version %d follows %d in $all", e.Stream, e.Version, st.last)
		}
		if st.seen[e.ID] {
			return n, fmt.Errorf("stream %s: event id %s appears twice", e.Stream, e.ID)
		}
		st.seen[e.ID] = true
		st.ids = append(st.ids, e.ID)
		st.last = e.Version
	}
	for name, st := range streams {
		i := 0
		for e, err := range s.ReadStream(ctx, name) {
			if err != nil {
				return n, fmt.Errorf("read stream %s: %w", name, err)
			}
			if i >= len(st.ids) || e.ID != st.ids[i] {
				return n, fmt.Errorf("stream %s: event %d (version %d) differs from $all", name, i, e.Version)
			}
			i++
		}
		if i != len(st.ids) {
			return n, fmt.Errorf("stream %s: read %d events, $all has %d", name, i, len(st.ids))
		}
		info, err := s.StreamInfo(ctx, name)
		if err != nil {
			return n, fmt.Errorf("stream info %s: %w", name, err)
		}
		if info.Version != st.last || info.Deleted {
			return n, fmt.Errorf("stream %s: info says version %d deleted=%v, last event is version %d", name, info.Version, info.Deleted, st.last)
		}
	}
	return n, nil
}
