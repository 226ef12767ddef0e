package shred

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// ErasureStream is the system stream of erasure reports: an ErasedType
// event per erasure, and a ReadModelErasedType event per read model that
// removed the subject's rows. Consumers that keep personal data elsewhere
// (read models, caches) follow it: subscriptions read system streams only
// when they ask for them.
const ErasureStream = varve.SystemPrefix + "erasure"

// Event types of ErasureStream.
const (
	ErasedType          = "varve.erased"
	ReadModelErasedType = "varve.read-model-erased"
)

// maxReportStreams bounds the streams a report names.
const maxReportStreams = 1000

// Report is what an erasure destroyed, kept as an ErasedType event in
// ErasureStream.
type Report struct {
	Subject string    `json:"subject"`
	Key     uuid.UUID `json:"key"`
	Master  string    `json:"master"`
	At      time.Time `json:"at"`
	// Counted: the counts below come from a scan of the log (EraseOptions.Count).
	Counted bool `json:"counted"`
	// Events sealed with the key, and the streams they are in (the first
	// 1000; StreamsTruncated says there were more).
	Events           int      `json:"events"`
	Streams          []string `json:"streams,omitempty"`
	StreamsTruncated bool     `json:"streams_truncated,omitempty"`
	// Snapshots of those streams sealed with the key.
	Snapshots int `json:"snapshots"`
	// Parked records of consumers (streams ParkedStreamPrefix+name) that
	// name one of those events or hold it sealed with the key.
	Parked int `json:"parked"`
	// CountError says why counting failed, when it did: the key is erased
	// all the same, and the counts are not kept.
	CountError string `json:"count_error,omitempty"`
	// Through is the position the scan read through.
	Through varve.Position `json:"through"`
	// Position is where the report was recorded in ErasureStream's log.
	Position varve.Position `json:"-"`
	// ReadModels are the read models that removed the subject's rows
	// since, as Reports finds them (not recorded with the report).
	ReadModels []ReadModelErasure `json:"read_models,omitempty"`
}

// ParkedStreamPrefix begins the streams of consumers' parked records
// (package delivery's, which projections share).
const ParkedStreamPrefix = varve.SystemPrefix + "parked-"

// parkedType is the type of a parked record.
const parkedType = "varve.parked"

// ReadModelErasure is what a read model removed of an erased subject (a
// ReadModelErasedType event).
type ReadModelErasure struct {
	Subject   string    `json:"subject"`
	Key       uuid.UUID `json:"key"`
	ReadModel string    `json:"read_model"`
	Rows      int64     `json:"rows"`
	At        time.Time `json:"at"`
}

// EraseOptions are the choices of an erasure.
type EraseOptions struct {
	// Count scans the whole log for the events sealed with the key, and
	// their streams' snapshots, for the report: a read of every event, so
	// off by default on a large store.
	Count bool
}

// ErrNothingToErase: the subject has no key (never keyed, or erased
// already).
var ErrNothingToErase = errors.New("shred: nothing to erase")

// Erase destroys the subject's data key, after which no read of store, of
// its backups or of its replicas can open what the key sealed, and
// records the erasure in ErasureStream. Reads return the erased marker in
// place of that data from then on ([Erased]); other processes stop using
// the key within their CacheTTL. A subject without a key gives
// ErrNothingToErase.
func (s *Shredder) Erase(ctx context.Context, store *varve.Store, subject string, opts EraseOptions) (Report, error) {
	if err := checkSubject(subject); err != nil {
		return Report{}, err
	}
	w, err := s.keys.GetKey(ctx, subject)
	if errors.Is(err, varve.ErrKeyNotFound) {
		return Report{}, fmt.Errorf("shred: erase %q: %w", subject, ErrNothingToErase)
	}
	if err != nil {
		return Report{}, fmt.Errorf("shred: erase %q: %w", subject, err)
	}
	deleted, err := s.keys.DeleteKey(ctx, subject, w.ID)
	if err != nil {
		return Report{}, fmt.Errorf("shred: erase %q: %w", subject, err)
	}
	s.forget(subject, w.ID)
	if !deleted {
		return Report{}, fmt.Errorf("shred: erase %q: erased by another call: %w", subject, ErrNothingToErase)
	}
	r := Report{Subject: subject, Key: w.ID, Master: w.Master, At: time.Now().UTC()}
	var countErr error
	if opts.Count {
		if countErr = s.count(ctx, store, &r); countErr != nil {
			r = Report{Subject: subject, Key: w.ID, Master: w.Master, At: r.At, CountError: countErr.Error()}
		}
	}
	data, _ := json.Marshal(r)
	res, err := store.System().Append(ctx, ErasureStream, varve.Any, varve.NewEvent(ErasedType, data))
	if err != nil {
		return r, fmt.Errorf("shred: erase %q: the key is erased; recording the report failed: %w", subject, err)
	}
	r.Position = res.Position
	if countErr != nil {
		return r, fmt.Errorf("shred: erase %q: the key is erased and the report recorded; counting its events failed: %w", subject, countErr)
	}
	return r, nil
}

// count scans the log for the events the key sealed.
func (s *Shredder) count(ctx context.Context, store *varve.Store, r *Report) error {
	streams := map[string]bool{}
	// The positions of the key's events, for the parked records that name
	// them (which come after them in the log).
	sealed := map[varve.Position]bool{}
	for e, err := range store.ReadAll(ctx, varve.Start, varve.Sealed()) {
		if err != nil {
			return err
		}
		r.Through = e.Position
		if e.Type == parkedType && strings.HasPrefix(e.Stream, ParkedStreamPrefix) {
			if parkedNames(e.Data, r.Key, sealed) {
				r.Parked++
			}
			continue
		}
		if !sealedBy(e.Data, r.Key) {
			continue
		}
		if len(sealed) < maxCountedPositions {
			sealed[e.Position] = true
		}
		r.Events++
		if !streams[e.Stream] {
			streams[e.Stream] = true
			if len(r.Streams) < maxReportStreams {
				r.Streams = append(r.Streams, e.Stream)
			} else {
				r.StreamsTruncated = true
			}
		}
	}
	r.Counted = true
	if !store.Capabilities().Snapshots {
		return nil
	}
	inCommits := store.Capabilities().SnapshotsInCommits
	for st := range streams {
		snap, ok, err := store.Snapshots().Load(ctx, st)
		if err != nil {
			return err
		}
		if ok && sealedBy(snap.Data, r.Key) {
			r.Snapshots++
		}
		if !inCommits {
			continue
		}
		// The snapshot in the stream's last commit, if it is another one.
		last, found, _, err := store.Snapshots().Read(ctx, st)
		if errors.Is(err, varve.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if found && !(ok && last.Version == snap.Version) && sealedBy(last.Data, r.Key) {
			r.Snapshots++
		}
	}
	return nil
}

// maxCountedPositions bounds the positions a count keeps for matching
// parked records: 16 bytes and a map entry each.
const maxCountedPositions = 1 << 20

// parkedNames reports whether a parked record names an event of positions
// or holds an event sealed with key.
func parkedNames(data []byte, key uuid.UUID, positions map[varve.Position]bool) bool {
	var p struct {
		Position varve.Position `json:"position"`
		Event    *struct {
			Data []byte `json:"data"`
		} `json:"event"`
	}
	if json.Unmarshal(data, &p) != nil {
		return false
	}
	return positions[p.Position] || p.Event != nil && sealedBy(p.Event.Data, key)
}

// sealedBy reports whether data is sealed, as a whole or in fields, by key.
func sealedBy(data []byte, key uuid.UUID) bool {
	if h, err := sealedHeader(data); err == nil {
		return h.key == key
	}
	if !bytes.Contains(data, []byte(fieldPrefix)) {
		return false
	}
	hit := false
	_, _ = fieldTokens(data, func(env []byte) ([]byte, error) {
		if h, err := sealedHeader(env); err == nil && h.key == key {
			hit = true
		}
		return nil, nil
	})
	return hit
}

// ReadModelErased records in ErasureStream that a read model removed rows
// of an erased subject, for the erasure's report.
func ReadModelErased(ctx context.Context, store *varve.Store, e ReadModelErasure) error {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	data, _ := json.Marshal(e)
	if _, err := store.System().Append(ctx, ErasureStream, varve.Any, varve.NewEvent(ReadModelErasedType, data)); err != nil {
		return fmt.Errorf("shred: record the erasure of %q in %q: %w", e.Subject, e.ReadModel, err)
	}
	return nil
}

// ParseErasure returns the report of an ErasedType event of ErasureStream.
func ParseErasure(e varve.RecordedEvent) (Report, bool) {
	var r Report
	if e.Stream != ErasureStream || e.Type != ErasedType || json.Unmarshal(e.Data, &r) != nil {
		return Report{}, false
	}
	r.Position = e.Position
	return r, true
}

// ParseReadModelErasure returns the record of a ReadModelErasedType event.
func ParseReadModelErasure(e varve.RecordedEvent) (ReadModelErasure, bool) {
	var r ReadModelErasure
	if e.Stream != ErasureStream || e.Type != ReadModelErasedType || json.Unmarshal(e.Data, &r) != nil {
		return ReadModelErasure{}, false
	}
	return r, true
}

// RotateReport counts what Rotate did.
type RotateReport struct {
	// Rewrapped keys are now wrapped by the current master key; Current
	// were already; Raced changed under the rotation (erased or rotated by
	// another call) and were left alone.
	Rewrapped int `json:"rewrapped"`
	Current   int `json:"current"`
	Raced     int `json:"raced"`
}

// Rotate wraps every key of the store that an older master key wrapped
// again with Config.Master, one key at a time, while the store serves
// reads and writes. Once it returns, the older master keys can be
// destroyed (and dropped from Config.Previous): backups taken before then
// hold keys that only they unwrap, so destroying them erases what those
// backups hold of erased subjects.
func (s *Shredder) Rotate(ctx context.Context) (RotateReport, error) {
	var r RotateReport
	after := ""
	buf := make([]varve.WrappedKey, 0, 500)
	for {
		page, err := s.keys.ListKeys(ctx, after, cap(buf), buf[:0])
		if err != nil {
			return r, fmt.Errorf("shred: rotate: %w", err)
		}
		for _, w := range page {
			after = w.Subject
			if w.Master == s.master.ID() {
				r.Current++
				continue
			}
			m, ok := s.masters[w.Master]
			if !ok {
				return r, fmt.Errorf("%w: rotate: the key of %q was wrapped by %q, which this Shredder lacks (Config.Previous)", ErrMasterKey, w.Subject, w.Master)
			}
			raw, err := m.Unwrap(ctx, w.Wrapped, aad(w.Subject, w.ID))
			if err != nil {
				return r, fmt.Errorf("shred: rotate the key of %q: %w", w.Subject, err)
			}
			wrapped, err := s.master.Wrap(ctx, raw, aad(w.Subject, w.ID))
			clear(raw)
			if err != nil {
				return r, fmt.Errorf("shred: rotate the key of %q: %w", w.Subject, err)
			}
			old := w.Master
			w.Master, w.Wrapped = s.master.ID(), wrapped
			done, err := s.keys.RewrapKey(ctx, w, old)
			if err != nil {
				return r, fmt.Errorf("shred: rotate the key of %q: %w", w.Subject, err)
			}
			if done {
				r.Rewrapped++
			} else {
				r.Raced++
			}
		}
		if len(page) < cap(buf) {
			return r, nil
		}
	}
}

// Reports returns the erasure reports of ErasureStream, newest first, at
// most limit of them (limit <= 0: all), those of subject only when it is
// not "", each with the read-model erasures recorded for its key since.
func Reports(ctx context.Context, store *varve.Store, subject string, limit int) ([]Report, error) {
	var out []Report
	readModels := map[uuid.UUID][]ReadModelErasure{}
	for e, err := range store.ReadStream(ctx, ErasureStream, varve.ReadBackward()) {
		if errors.Is(err, varve.ErrStreamNotFound) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("shred: read the erasure reports: %w", err)
		}
		if rm, ok := ParseReadModelErasure(e); ok {
			if subject == "" || rm.Subject == subject {
				readModels[rm.Key] = append(readModels[rm.Key], rm)
			}
			continue
		}
		r, ok := ParseErasure(e)
		if !ok || subject != "" && r.Subject != subject {
			continue
		}
		// Read backward, a report's read-model erasures came first.
		rms := readModels[r.Key]
		delete(readModels, r.Key)
		slices.Reverse(rms)
		r.ReadModels = rms
		out = append(out, r)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}
