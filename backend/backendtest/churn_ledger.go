package backendtest

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// ledger records what the writers and churners of the Churn behaviour were
// told: every acknowledged append with its versions and position, the ids of
// refused appends, and the life (generation) of each churned event's stream.
type ledger struct {
	mu sync.Mutex
	// kept holds the ids of the streams that are never truncated or deleted,
	// indexed by version-1.
	kept map[string][]uuid.UUID
	// keptAcks are the acknowledged appends to kept streams: where each
	// ended and how many events it wrote, to say how far behind a reader is.
	keptAcks []ack
	// through is the largest acknowledged position of a kept stream: a reader
	// that got there has been offered every kept event.
	through varve.Position
	churned map[uuid.UUID]churnedEvent
	refused map[uuid.UUID]bool
}

type ack struct {
	stream string
	first  varve.Version
	n      int
	pos    varve.Position
}

// churnedEvent is an acknowledged event of a stream that churners truncate,
// delete and tombstone; gen counts the deletions of the stream before it.
type churnedEvent struct {
	stream  string
	gen     int
	version varve.Version
}

func newLedger() *ledger {
	return &ledger{kept: map[string][]uuid.UUID{}, churned: map[uuid.UUID]churnedEvent{}, refused: map[uuid.UUID]bool{}}
}

func (l *ledger) keep(stream string, evs []varve.Event, res varve.AppendResult) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if int(res.LastVersion-res.FirstVersion)+1 != len(evs) || res.FirstVersion == 0 {
		return fmt.Errorf("append of %d events to %s acknowledged versions %d..%d", len(evs), stream, res.FirstVersion, res.LastVersion)
	}
	ids := l.kept[stream]
	for len(ids) < int(res.LastVersion) {
		ids = append(ids, uuid.Nil)
	}
	for i, e := range evs {
		slot := &ids[int(res.FirstVersion)-1+i]
		if *slot != uuid.Nil {
			return fmt.Errorf("stream %s: version %d acknowledged twice", stream, int(res.FirstVersion)+i)
		}
		*slot = e.ID
	}
	l.kept[stream] = ids
	l.keptAcks = append(l.keptAcks, ack{stream, res.FirstVersion, len(evs), res.Position})
	if l.through.Less(res.Position) {
		l.through = res.Position
	}
	return nil
}

func (l *ledger) churn(stream string, gen int, evs []varve.Event, res varve.AppendResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range evs {
		l.churned[e.ID] = churnedEvent{stream, gen, res.FirstVersion + varve.Version(i)}
	}
}

func (l *ledger) refuse(evs []varve.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range evs {
		l.refused[e.ID] = true
	}
}

// complete checks that every version of every kept stream was acknowledged
// to some writer, and returns the number of kept events.
func (l *ledger) complete() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for stream, ids := range l.kept {
		for i, id := range ids {
			if id == uuid.Nil {
				return n, fmt.Errorf("stream %s: version %d was acknowledged to no writer, version %d was", stream, i+1, len(ids))
			}
		}
		n += len(ids)
	}
	return n, nil
}

// behind returns how many acknowledged kept events, in how many appends,
// end after pos.
func (l *ledger) behind(pos varve.Position) (events, appends int) {
	for _, a := range l.keptAcks {
		if pos.Less(a.pos) {
			events += a.n
			appends++
		}
	}
	return events, appends
}

// seenEvent is what a reader keeps of an event of the test's streams.
type seenEvent struct {
	id      uuid.UUID
	stream  string
	version varve.Version
	pos     varve.Position
}

// judge checks what one reader saw of the test's streams against the
// ledger: every acknowledged event of a kept stream exactly once, in version
// order; churned events at most once, in (generation, version) order; no
// event of a refused append, none the test did not write. ref, when not
// nil, is what a reader that missed nothing saw, to locate what this one
// missed.
func (l *ledger) judge(reader string, seen, ref []seenEvent) error {
	type genVersion struct {
		gen     int
		version varve.Version
	}
	var (
		count                 = map[uuid.UUID]int{}
		lastKept              = map[string]varve.Version{}
		lastChurned           = map[string]genVersion{}
		problems              []string
		repeated, disordered  int
		fromRefused, unknown  int
		churnedSeen           int
		churnRepeat, churnDis int
		churnWrong            int
		note                  = func(format string, args ...any) {
			if len(problems) < 8 {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		}
	)
	for _, e := range seen {
		count[e.id]++
		if ids, ok := l.kept[e.stream]; ok {
			switch {
			case count[e.id] > 1:
				repeated++
				note("kept %s@%d (id %s) seen again at %s", e.stream, e.version, e.id, e.pos)
			case e.version == 0 || int(e.version) > len(ids) || ids[e.version-1] != e.id:
				if l.refused[e.id] {
					fromRefused++
					note("event %s of a refused append seen as %s@%d at %s", e.id, e.stream, e.version, e.pos)
				} else {
					unknown++
					note("%s@%d at %s has id %s, not the acknowledged one", e.stream, e.version, e.pos, e.id)
				}
			case e.version <= lastKept[e.stream]:
				disordered++
				note("kept %s@%d at %s after version %d", e.stream, e.version, e.pos, lastKept[e.stream])
			}
			lastKept[e.stream] = max(lastKept[e.stream], e.version)
			continue
		}
		c, ok := l.churned[e.id]
		switch {
		case !ok && l.refused[e.id]:
			fromRefused++
			note("event %s of a refused append seen as %s@%d at %s", e.id, e.stream, e.version, e.pos)
			continue
		case !ok:
			unknown++
			note("%s@%d at %s: id %s was never acknowledged", e.stream, e.version, e.pos, e.id)
			continue
		}
		churnedSeen++
		gv := genVersion{c.gen, c.version}
		prev, had := lastChurned[e.stream]
		switch {
		case count[e.id] > 1:
			churnRepeat++
			note("churned %s@%d (life %d) seen again at %s", e.stream, e.version, c.gen, e.pos)
		case c.stream != e.stream || c.version != e.version:
			churnWrong++
			note("churned event %s read as %s@%d, acknowledged as %s@%d", e.id, e.stream, e.version, c.stream, c.version)
		case had && (gv.gen < prev.gen || gv.gen == prev.gen && gv.version <= prev.version):
			churnDis++
			note("churned %s@%d (life %d) at %s after version %d of life %d", e.stream, e.version, c.gen, e.pos, prev.version, prev.gen)
		}
		if !had || prev.gen < gv.gen || prev.gen == gv.gen && prev.version < gv.version {
			lastChurned[e.stream] = gv
		}
	}
	total, missing := 0, 0
	var lost []string
	for stream, ids := range l.kept {
		total += len(ids)
		for v, id := range ids {
			if count[id] == 0 {
				missing++
				if ref == nil && len(lost) < 3 {
					lost = append(lost, fmt.Sprintf("kept %s@%d (id %s) never seen", stream, v+1, id))
				}
			}
		}
	}
	if missing+repeated+disordered+fromRefused+unknown+churnRepeat+churnDis+churnWrong == 0 {
		return nil
	}
	if missing > 0 && ref != nil {
		lost = l.gaps(seen, ref, count)
	}
	problems = append(problems, lost...)
	return fmt.Errorf("reader %s: of %d acknowledged events of kept streams %d missing, %d repeated, %d out of order, %d foreign; "+
		"%d events of refused appends; of %d churned events seen %d repeated, %d out of order, %d misplaced:\n\t%s",
		reader, total, missing, repeated, disordered, unknown, fromRefused, churnedSeen, churnRepeat, churnDis, churnWrong,
		strings.Join(problems, "\n\t"))
}

// gaps describes the runs of kept events that a reader missed, by the
// positions that ref, a reader that missed none, read them at: how many
// runs, and the first three with the positions the reader read on either
// side of each.
func (l *ledger) gaps(seen, ref []seenEvent, count map[uuid.UUID]int) []string {
	type run struct {
		first, last varve.Position
		n           int
	}
	var runs []run
	open := false
	for _, e := range ref {
		if _, kept := l.kept[e.stream]; !kept {
			continue
		}
		switch {
		case count[e.id] > 0:
			open = false
		case open:
			runs[len(runs)-1].last = e.pos
			runs[len(runs)-1].n++
		default:
			runs = append(runs, run{e.pos, e.pos, 1})
			open = true
		}
	}
	out := []string{fmt.Sprintf("%d runs of missed kept events, by the positions of a fresh scan", len(runs))}
	for _, r := range runs[:min(3, len(runs))] {
		i := sort.Search(len(seen), func(i int) bool { return r.first.Less(seen[i].pos) })
		before, after := "the start", "nothing"
		if i > 0 {
			before = seen[i-1].pos.String()
		}
		if i < len(seen) {
			after = seen[i].pos.String()
		}
		out = append(out, fmt.Sprintf("missed %d kept events at %s..%s: read %s, then %s", r.n, r.first, r.last, before, after))
	}
	return out
}
