package aggregate

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/backoff"
	"github.com/varve-go/varve/schema"
)

// Definition describes one kind of aggregate.
type Definition[T any] struct {
	// Category names the kind; the stream of aggregate id is Category, the
	// store's [varve.Config.CategorySeparator] and id ("order-42"), so that
	// a filter on the category reads every aggregate of the kind. A
	// category that holds the separator ("tenant1-order") puts the streams
	// in the store's category before it ("tenant1"): read them with a
	// StreamPrefixes filter of Category and the separator.
	Category string
	// New returns the state of an aggregate with no events; nil means the
	// zero T. States read from snapshots (and, without Clone, from the
	// cache) are decoded into a zero T, not into New's.
	New func(id string) T
	// Apply returns the state after event, an event of a type registered in
	// Events, passed as a value. It must be pure: it may not change the state
	// it is given (copy a map or slice before changing it), because states
	// are shared with the cache.
	Apply func(state T, event any) T
	// Events maps the aggregate's event types to their stored names.
	Events *schema.Registry
	// Codec encodes events and snapshots; nil means [schema.JSON].
	Codec schema.Codec
	// SchemaVersion is the version of T's encoding in snapshots. Change it
	// whenever the encoding of T changes: snapshots written with another
	// schema version are ignored and the state is rebuilt from the events.
	SchemaVersion int
	// Clone returns a copy of a state that shares nothing mutable with it.
	// The cache uses it when T holds slices, maps, pointers or interfaces; if
	// it is nil there, cached states are copied through the Codec. A T of
	// plain values (numbers, strings, arrays and structs of them) is copied
	// by assignment and Clone is not used.
	Clone func(T) T
}

// Config configures a [Repository]. The zero value reads every aggregate
// from the store, takes no snapshots and caches nothing.
type Config struct {
	// SnapshotEvery takes a snapshot once a save brings an aggregate N or more
	// events past its latest snapshot. 0 turns snapshots off: the repository
	// then neither reads nor writes any.
	SnapshotEvery int
	// CacheSize bounds the number of aggregates kept in the LRU cache; 0
	// turns the cache off.
	CacheSize int
	// MaxAttempts bounds the attempts of [Repository.Execute]; default 10.
	MaxAttempts int
	// SnapshotInCommitMax matters on a store that keeps snapshots in commits
	// ([varve.Capabilities] SnapshotsInCommits: NATS) when SnapshotEvery is set: every
	// save whose encoded state is at most this many bytes keeps the state in
	// its commit, which costs no request, and a load reads it and the events
	// after it at once (on NATS one request, so a load and a save are two).
	// Larger states are snapshotted every SnapshotEvery events, as on other
	// stores. 0 means [DefaultSnapshotInCommitMax]; negative turns it off.
	SnapshotInCommitMax int
	// Sealer, with Subject, seals the data of every event a save appends
	// and of every snapshot with the data key of the aggregate's subject
	// (a *shred.Shredder, which the store also has as its
	// [varve.Config.Opener]), so that erasing the subject reaches them. A
	// snapshot that no longer opens is passed over and the state rebuilt
	// from the events; an event whose key was erased reads as the erased
	// marker, which a JSON codec decodes as the zero event.
	Sealer Sealer
	// Subject names the subject whose personal data aggregate id holds.
	Subject func(id string) string
}

// Sealer seals and opens bytes with a subject's data key (package shred's
// Shredder).
type Sealer interface {
	SealBytes(ctx context.Context, subject string, data []byte) ([]byte, error)
	// UnsealBytes opens data sealed by SealBytes; it fails when the key is
	// gone.
	UnsealBytes(ctx context.Context, data []byte) ([]byte, error)
}

// DefaultMaxAttempts is the default of Config.MaxAttempts.
const DefaultMaxAttempts = 10

// DefaultSnapshotInCommitMax is the default of Config.SnapshotInCommitMax:
// a state of up to 4 KiB adds less to a commit than a request costs.
const DefaultSnapshotInCommitMax = 4096

// Repository loads and saves aggregates of one [Definition] in a
// [varve.Store]. It is safe for concurrent use.
type Repository[T any] struct {
	store *varve.Store
	def   Definition[T]
	cfg   Config
	// prefix begins the stream of every aggregate: the category and the
	// store's category separator.
	prefix string
	snaps  varve.Snapshots // used when cfg.SnapshotEvery > 0
	// inCommit: saves keep small states in their commits (Config.SnapshotInCommitMax).
	inCommit bool
	// readsCommits: the store keeps snapshots in commits, so a load reads a
	// snapshot and the events after it together.
	readsCommits bool
	cache        *otter.Cache[string, *cached[T]]
	share        bool // T holds no references: cached states are shared by assignment
	locks        *keyLocks
	stats        counters
}

// cached is an immutable cache entry: the state of an aggregate at a stored
// version, without pending events.
type cached[T any] struct {
	state   T
	data    []byte // the state encoded, when it is neither shared nor cloned
	version varve.Version
	snapped varve.Version
}

// New returns a repository for def over store.
func New[T any](store *varve.Store, def Definition[T], cfg Config) (*Repository[T], error) {
	switch {
	case store == nil:
		return nil, fmt.Errorf("aggregate: new repository: nil store: %w", varve.ErrInvalidArgument)
	case def.Category == "":
		return nil, fmt.Errorf("aggregate: new repository: empty category: %w", varve.ErrInvalidArgument)
	case def.Apply == nil || def.Events == nil:
		return nil, fmt.Errorf("aggregate: new repository %q: Apply and Events are required: %w", def.Category, varve.ErrInvalidArgument)
	case cfg.SnapshotEvery < 0 || cfg.CacheSize < 0 || cfg.MaxAttempts < 0:
		return nil, fmt.Errorf("aggregate: new repository %q: negative setting in %+v: %w", def.Category, cfg, varve.ErrInvalidArgument)
	case (cfg.Sealer == nil) != (cfg.Subject == nil):
		return nil, fmt.Errorf("aggregate: new repository %q: Sealer and Subject go together: %w", def.Category, varve.ErrInvalidArgument)
	}
	if err := def.Events.Validate(); err != nil {
		return nil, fmt.Errorf("aggregate: new repository %q: events: %w", def.Category, err)
	}
	if def.Codec == nil {
		def.Codec = schema.JSON{}
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.SnapshotInCommitMax == 0 {
		cfg.SnapshotInCommitMax = DefaultSnapshotInCommitMax
	}
	r := &Repository[T]{store: store, def: def, cfg: cfg, prefix: def.Category + store.Config().CategorySeparator, locks: newKeyLocks(), share: !hasReferences(reflect.TypeFor[T]())}
	if cfg.SnapshotEvery > 0 {
		r.snaps = store.Snapshots()
		caps := store.Capabilities()
		if !caps.Snapshots {
			return nil, fmt.Errorf("aggregate: new repository %q: snapshots asked for, but backend %q keeps none: %w",
				def.Category, store.Features().Name, varve.ErrNotSupported)
		}
		r.readsCommits = caps.SnapshotsInCommits
		r.inCommit = r.readsCommits && cfg.SnapshotInCommitMax > 0
		// A snapshot goes into a commit only within the store's bound on it.
		r.cfg.SnapshotInCommitMax = min(cfg.SnapshotInCommitMax, store.Config().MaxAppendBytes)
	}
	if cfg.CacheSize > 0 {
		c, err := otter.New(&otter.Options[string, *cached[T]]{MaximumSize: cfg.CacheSize})
		if err != nil {
			return nil, fmt.Errorf("aggregate: new repository %q: cache: %w", def.Category, err)
		}
		r.cache = c
	}
	return r, nil
}

// hasReferences reports whether a value of t can share mutable memory with
// a copy of it.
func hasReferences(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return false
	case reflect.Array:
		return hasReferences(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasReferences(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}

// Stream returns the stream name of aggregate id.
func (r *Repository[T]) Stream(id string) string { return r.prefix + id }

// LoadOption is a per-call choice of a load.
type LoadOption func(*loadOptions)

type loadOptions struct {
	fromStore  bool
	noSnapshot bool
}

// FromStore reads the aggregate from the store (and its snapshot, if the
// policy is on), bypassing the cache; the cache is not changed.
func FromStore() LoadOption { return func(o *loadOptions) { o.fromStore = true } }

// Load returns aggregate id: from the cache if it holds it, otherwise from
// its latest snapshot (when snapshots are on) and the events after it. An
// aggregate without events gives an error matching [varve.ErrStreamNotFound].
func (r *Repository[T]) Load(ctx context.Context, id string, opts ...LoadOption) (*Aggregate[T], error) {
	var o loadOptions
	for _, opt := range opts {
		opt(&o)
	}
	return r.load(ctx, id, o)
}

// GetOrCreate is [Repository.Load], except that an aggregate without events
// is returned in its initial state at version 0, to be saved as new.
func (r *Repository[T]) GetOrCreate(ctx context.Context, id string, opts ...LoadOption) (*Aggregate[T], error) {
	var o loadOptions
	for _, opt := range opts {
		opt(&o)
	}
	return r.getOrCreate(ctx, id, o)
}

func (r *Repository[T]) getOrCreate(ctx context.Context, id string, o loadOptions) (*Aggregate[T], error) {
	a, err := r.load(ctx, id, o)
	if errors.Is(err, varve.ErrStreamNotFound) {
		return r.fresh(id), nil
	}
	return a, err
}

func (r *Repository[T]) fresh(id string) *Aggregate[T] {
	a := &Aggregate[T]{r: r, id: id, stream: r.Stream(id)}
	if r.def.New != nil {
		a.state = r.def.New(id)
	}
	return a
}

func (r *Repository[T]) load(ctx context.Context, id string, o loadOptions) (*Aggregate[T], error) {
	r.stats.loads.Add(1)
	if r.cache != nil && !o.fromStore {
		if e, ok := r.cache.GetIfPresent(id); ok {
			if a, ok := r.fromCache(id, e); ok {
				r.stats.cacheHits.Add(1)
				return a, nil
			}
		}
		r.stats.cacheMisses.Add(1)
	}
	a := r.fresh(id)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("aggregate: load %s: %w", a.stream, err)
	}
	from, read := varve.Version(1), false
	if r.cfg.SnapshotEvery > 0 && !o.noSnapshot {
		var err error
		if r.readsCommits {
			read, err = r.readFromSnapshot(ctx, a)
		} else {
			var s varve.Snapshot
			var ok bool
			if s, ok, err = r.snaps.Load(ctx, a.stream); err != nil {
				err = fmt.Errorf("aggregate: load: %w", err)
			} else if ok && r.useSnapshot(ctx, a, s) {
				from = s.Version + 1
			}
		}
		if err != nil {
			return nil, err
		}
	}
	var n uint64
	if !read {
		opts := []varve.StreamOption{varve.From(from)}
		if from > 1 && r.smallPage() {
			opts = append(opts, varve.PageSize(r.cfg.SnapshotEvery+1))
		}
		for e, err := range r.store.ReadStream(ctx, a.stream, opts...) {
			// apply, written out: every backend's loads run this loop.
			if err != nil {
				return nil, fmt.Errorf("aggregate: load: %w", err)
			}
			v, err := r.def.Events.DecodeEvent(r.def.Codec, e)
			if err != nil {
				return nil, fmt.Errorf("aggregate: load %s: event at version %d: %w", a.stream, e.Version, err)
			}
			a.state = r.def.Apply(a.state, v)
			a.version = e.Version
			n++
		}
	}
	r.stats.eventsReplayed.Add(n)
	if a.version == 0 {
		return nil, fmt.Errorf("aggregate: load %s: no events: %w", a.stream, varve.ErrStreamNotFound)
	}
	return a, nil
}

// smallPage reports whether the events after a snapshot are read in pages
// of SnapshotEvery+1: few events follow a snapshot, and a small page costs
// less to prepare than the store's default one.
func (r *Repository[T]) smallPage() bool { return r.cfg.SnapshotEvery < r.store.Config().PageSize }

// useSnapshot starts a from snapshot s unless s is of another schema
// version or does not decode.
func (r *Repository[T]) useSnapshot(ctx context.Context, a *Aggregate[T], s varve.Snapshot) bool {
	if s.SchemaVersion != r.def.SchemaVersion {
		r.stats.snapshotsIgnored.Add(1)
		return false
	}
	data := s.Data
	if r.cfg.Sealer != nil {
		var err error
		if data, err = r.cfg.Sealer.UnsealBytes(ctx, data); err != nil {
			r.stats.snapshotsIgnored.Add(1)
			return false
		}
	}
	var st T
	if err := r.def.Codec.Unmarshal(data, &st); err != nil {
		r.stats.snapshotErrors.Add(1)
		return false
	}
	r.stats.snapshotsLoaded.Add(1)
	a.state, a.version, a.snapped = st, s.Version, s.Version
	a.big = r.inCommit && len(s.Data) > r.cfg.SnapshotInCommitMax
	return true
}

// readFromSnapshot loads a from its snapshot and the events after it, read
// together (varve.Snapshots.Read). read is false when the snapshot is of no
// use and the events are still to be read from the start.
func (r *Repository[T]) readFromSnapshot(ctx context.Context, a *Aggregate[T]) (read bool, err error) {
	var opts []varve.ReadOption
	if r.smallPage() {
		opts = append(opts, varve.PageSize(r.cfg.SnapshotEvery+1))
	}
	s, ok, events, err := r.snaps.Read(ctx, a.stream, opts...)
	if err != nil {
		return false, fmt.Errorf("aggregate: load: %w", err)
	}
	if ok && !r.useSnapshot(ctx, a, s) {
		return false, nil
	}
	var n uint64
	for e, err := range events {
		if err := r.apply(a, e, err); err != nil {
			return true, err
		}
		n++
	}
	r.stats.eventsReplayed.Add(n)
	return true, nil
}

// apply applies a stored event of a's stream, read with err, to a's state.
func (r *Repository[T]) apply(a *Aggregate[T], e varve.RecordedEvent, err error) error {
	if err != nil {
		return fmt.Errorf("aggregate: load: %w", err)
	}
	v, err := r.def.Events.DecodeEvent(r.def.Codec, e)
	if err != nil {
		return fmt.Errorf("aggregate: load %s: event at version %d: %w", a.stream, e.Version, err)
	}
	a.state = r.def.Apply(a.state, v)
	a.version = e.Version
	return nil
}

// Save appends a's pending events at the version a was loaded at, so that a
// concurrent writer's save makes it fail with [varve.ErrWrongExpectedVersion].
// A save without pending events does nothing. After a successful save a is
// at the new version and stays usable; after a failed one its pending events
// are discarded, the repository's cached copy of it is evicted, and a can no
// longer be used ([ErrDiscarded]). On a store that keeps snapshots in
// commits, a small state goes with the append (Config.SnapshotInCommitMax);
// otherwise a snapshot that is due is written after the append, and its
// failure does not fail the save (see [Stats]). The
// correlation and causation ids ctx carries ([WithCorrelation], [CausedBy])
// go into the metadata of the events ([Metadata]).
func (r *Repository[T]) Save(ctx context.Context, a *Aggregate[T]) error {
	_, err := r.save(ctx, a)
	return err
}

// save is Save, and returns the append's result.
func (r *Repository[T]) save(ctx context.Context, a *Aggregate[T]) (varve.AppendResult, error) {
	if a == nil || a.r != r {
		return varve.AppendResult{}, fmt.Errorf("aggregate: save: aggregate of another repository: %w", varve.ErrInvalidArgument)
	}
	if a.failed != nil {
		return varve.AppendResult{}, fmt.Errorf("aggregate: save %s: %w", a.stream, ErrDiscarded)
	}
	if len(a.pending) == 0 {
		return varve.AppendResult{}, nil
	}
	if m := MetadataFrom(ctx); !m.isZero() {
		if err := stamp(a.pending, m); err != nil {
			a.discard(err)
			return varve.AppendResult{}, fmt.Errorf("aggregate: save %s: %w", a.stream, err)
		}
	}
	if r.cfg.Sealer != nil {
		subject := r.cfg.Subject(a.id)
		for i := range a.pending {
			data, err := r.cfg.Sealer.SealBytes(ctx, subject, a.pending[i].Data)
			if err != nil {
				a.discard(err)
				return varve.AppendResult{}, fmt.Errorf("aggregate: save %s: seal: %w", a.stream, err)
			}
			a.pending[i].Data = data
		}
	}
	var res varve.AppendResult
	var err error
	snap, inline, unencodable := r.commitSnapshot(ctx, a)
	if inline {
		res, err = r.snaps.Append(ctx, a.stream, varve.Exact(a.version), snap, a.pending...)
	} else {
		res, err = r.store.Append(ctx, a.stream, varve.Exact(a.version), a.pending...)
	}
	if err == nil && res.FirstVersion != a.version+1 {
		// The events' ids (ExecuteOnce's) were those of a committed append,
		// which the store returned: the state here is not the stored one.
		err = fmt.Errorf("%w: the store returned the append at version %d", errRetried, res.FirstVersion)
	}
	if err != nil {
		r.stats.saveFailures.Add(1)
		if errors.Is(err, varve.ErrWrongExpectedVersion) {
			r.stats.conflicts.Add(1)
		}
		r.evict(a.id, a.version)
		a.discard(err)
		return res, fmt.Errorf("aggregate: save at version %d: %w", a.version, err)
	}
	r.stats.saves.Add(1)
	a.pending = nil
	a.version = res.LastVersion
	switch {
	case inline:
		r.stats.snapshotsSaved.Add(1)
		a.snapped = a.version
	case unencodable: // counted once, by commitSnapshot
	case r.cfg.SnapshotEvery > 0 && a.version-a.snapped >= varve.Version(r.cfg.SnapshotEvery):
		r.snapshot(ctx, a)
	}
	if r.cache != nil {
		r.cachePut(a)
	}
	return res, nil
}

func (r *Repository[T]) commitSnapshot(ctx context.Context, a *Aggregate[T]) (s varve.Snapshot, keep, unencodable bool) {
	if !r.inCommit || a.big {
		return varve.Snapshot{}, false, false
	}
	data, err := r.encodeState(ctx, a)
	if err != nil {
		r.stats.snapshotErrors.Add(1)
		return varve.Snapshot{}, false, true
	}
	if len(data) > r.cfg.SnapshotInCommitMax {
		a.big = true
		return varve.Snapshot{}, false, false
	}
	return varve.Snapshot{
		Stream: a.stream, Version: a.version + varve.Version(len(a.pending)),
		SchemaVersion: r.def.SchemaVersion, Data: data, TakenAt: time.Now(),
	}, true, false
}

// encodeState encodes a's state for a snapshot, sealed with the key of
// its subject when the repository seals.
func (r *Repository[T]) encodeState(ctx context.Context, a *Aggregate[T]) ([]byte, error) {
	data, err := r.def.Codec.Marshal(a.state)
	if err != nil || r.cfg.Sealer == nil {
		return data, err
	}
	return r.cfg.Sealer.SealBytes(ctx, r.cfg.Subject(a.id), data)
}

func (r *Repository[T]) snapshot(ctx context.Context, a *Aggregate[T]) {
	data, err := r.encodeState(ctx, a)
	if err == nil {
		err = r.snaps.Save(ctx, varve.Snapshot{
			Stream: a.stream, Version: a.version, SchemaVersion: r.def.SchemaVersion, Data: data, TakenAt: time.Now(),
		})
	}
	if err != nil {
		r.stats.snapshotErrors.Add(1)
		return
	}
	r.stats.snapshotsSaved.Add(1)
	a.snapped = a.version
}

// cachePut stores a copy of a's state, unless the cache holds a newer one.
func (r *Repository[T]) cachePut(a *Aggregate[T]) {
	e := &cached[T]{version: a.version, snapped: a.snapped}
	switch {
	case r.share:
		e.state = a.state
	case r.def.Clone != nil:
		e.state = r.def.Clone(a.state)
	default:
		data, err := r.def.Codec.Marshal(a.state)
		if err != nil {
			r.evict(a.id, a.version)
			return
		}
		e.data = data
	}
	r.cache.Compute(a.id, func(old *cached[T], found bool) (*cached[T], otter.ComputeOp) {
		if found && old.version >= e.version {
			return old, otter.CancelOp
		}
		return e, otter.WriteOp
	})
}

func (r *Repository[T]) fromCache(id string, e *cached[T]) (*Aggregate[T], bool) {
	a := &Aggregate[T]{r: r, id: id, stream: r.Stream(id), version: e.version, snapped: e.snapped, cached: true}
	switch {
	case r.share:
		a.state = e.state
	case r.def.Clone != nil:
		a.state = r.def.Clone(e.state)
	default:
		if err := r.def.Codec.Unmarshal(e.data, &a.state); err != nil {
			r.evict(id, e.version)
			return nil, false
		}
	}
	return a, true
}

// evict removes the cached copy of id if it is not newer than version.
func (r *Repository[T]) evict(id string, version varve.Version) {
	if r.cache == nil {
		return
	}
	r.cache.ComputeIfPresent(id, func(old *cached[T]) (*cached[T], otter.ComputeOp) {
		if old.version <= version {
			r.stats.evictions.Add(1)
			return nil, otter.InvalidateOp
		}
		return old, otter.CancelOp
	})
}

// ForgetSubject removes from the cache every aggregate whose Subject is
// subject: a follower of erasures (package shred's ErasureStream) calls it, so
// that no state decoded before the erasure is served after it.
func (r *Repository[T]) ForgetSubject(subject string) {
	if r.cache == nil || r.cfg.Subject == nil {
		return
	}
	for id := range r.cache.Keys() {
		if r.cfg.Subject(id) == subject {
			r.cache.Invalidate(id)
		}
	}
}

// Forget removes aggregate id from the cache, for callers that know it was
// changed behind the repository's back.
func (r *Repository[T]) Forget(id string) {
	if r.cache != nil {
		r.cache.Invalidate(id)
	}
}

// Execute runs command on aggregate id and saves the events it raises. The
// aggregate is got with [Repository.GetOrCreate], so a command may create
// it. When the save conflicts with another writer, Execute loads the
// aggregate afresh and runs command again, up to Config.MaxAttempts times
// in all, waiting a short random time between later attempts. command must
// therefore decide from the state it is given only, and may run more than
// once. An error of command is returned as is, and nothing is saved; when
// the command failed on a cached state, it is first run once more on the
// state read from the store, so a stale cached copy can neither save events
// (the expected version stops them) nor make a command fail.
//
// The correlation and causation ids ctx carries go into the metadata of
// the events saved, as with Save: a handler of an event passes
// [CausedBy](ctx, event) to make that event their cause.
//
// The commands of one repository on one aggregate run one at a time, so
// concurrent callers in one process wait for each other instead of
// conflicting; conflicts come from other repositories or processes.
// Execute returns the aggregate as saved.
func (r *Repository[T]) Execute(ctx context.Context, id string, command func(*Aggregate[T]) error) (*Aggregate[T], error) {
	a, _, err := r.execute(ctx, id, "", command)
	return a, err
}

// execute is Execute, and ExecuteOnce when commandID is not empty.
func (r *Repository[T]) execute(ctx context.Context, id, commandID string, command func(*Aggregate[T]) error) (*Aggregate[T], Once, error) {
	l, err := r.locks.lock(ctx, id)
	if err != nil {
		return nil, Once{}, fmt.Errorf("aggregate: execute on %s: %w", r.Stream(id), err)
	}
	defer r.locks.unlock(id, l)
	var o loadOptions
	for attempt := 1; ; attempt++ {
		a, err := r.getOrCreate(ctx, id, o)
		if err != nil {
			return nil, Once{}, err
		}
		cmdErr := command(a)
		if cmdErr != nil && a.cached {
			// A stale cached state may have made the command fail: decide
			// again on the stored state.
			r.stats.recheck.Add(1)
			if a, err = r.getOrCreate(ctx, id, loadOptions{fromStore: true, noSnapshot: o.noSnapshot}); err != nil {
				return nil, Once{}, err
			}
			cmdErr = command(a)
		}
		if commandID == "" {
			if cmdErr != nil {
				return nil, Once{}, cmdErr
			}
		} else if cmdErr != nil || len(a.pending) == 0 {
			// Run on the state after an earlier run of the command, a
			// retry may fail or decide nothing: look for that run first.
			return r.earlier(ctx, id, a, commandID, cmdErr)
		} else {
			for i := range a.pending {
				a.pending[i].ID = onceID(a.stream, commandID, i)
			}
		}
		res, err := r.save(ctx, a)
		if err == nil {
			if res.FirstVersion == 0 {
				return a, Once{}, nil
			}
			return a, Once{First: res.FirstVersion, Last: res.LastVersion}, nil
		}
		if commandID != "" && errors.Is(err, errRetried) {
			return r.duplicate(ctx, id, commandID, res.FirstVersion, res.LastVersion)
		}
		if commandID != "" && errors.Is(err, varve.ErrDuplicateEvent) {
			return r.earlier(ctx, id, nil, commandID, err)
		}
		var conflict *varve.WrongExpectedVersionError
		if !errors.As(err, &conflict) {
			return nil, Once{}, err
		}
		if conflict.Actual < a.version {
			// The stream is behind the state: its snapshot is of an earlier
			// life of a deleted stream. Rebuild from the events.
			o.noSnapshot = true
		}
		if attempt >= r.cfg.MaxAttempts {
			return nil, Once{}, fmt.Errorf("aggregate: execute on %s: gave up after %d attempts: %w", a.stream, attempt, err)
		}
		r.stats.retries.Add(1)
		if err := waitBeforeRetry(ctx, attempt); err != nil {
			return nil, Once{}, fmt.Errorf("aggregate: execute on %s: %w", a.stream, err)
		}
	}
}

// conflictBackoff spaces the retries of Execute after a conflict: none after
// the first, then a random time up to 400µs·2^(n-2), at most 25ms.
var conflictBackoff = backoff.Exponential{Initial: 400 * time.Microsecond, Max: 25 * time.Millisecond, Jitter: 1}

// waitBeforeRetry waits before attempt+1.
func waitBeforeRetry(ctx context.Context, attempt int) error {
	if attempt < 2 {
		return ctx.Err()
	}
	return backoff.Sleep(ctx, conflictBackoff.Delay(attempt-1))
}

// Stats are counters of a repository since it was created.
type Stats struct {
	Loads            uint64 `json:"loads"`
	CacheHits        uint64 `json:"cache_hits"`
	CacheMisses      uint64 `json:"cache_misses"`
	Evictions        uint64 `json:"evictions"`         // cached copies dropped after a failed save
	SnapshotsLoaded  uint64 `json:"snapshots_loaded"`  // used to start a load
	SnapshotsIgnored uint64 `json:"snapshots_ignored"` // of another schema version
	SnapshotsSaved   uint64 `json:"snapshots_saved"`
	SnapshotErrors   uint64 `json:"snapshot_errors"` // failed to encode, decode or save
	EventsReplayed   uint64 `json:"events_replayed"` // read from the store and applied by loads
	Saves            uint64 `json:"saves"`           // successful appends
	SaveFailures     uint64 `json:"save_failures"`   // conflicts included
	Conflicts        uint64 `json:"conflicts"`       // saves that failed with ErrWrongExpectedVersion
	Retries          uint64 `json:"retries"`         // extra attempts of Execute
	Rechecks         uint64 `json:"rechecks"`        // failed commands run again on the stored state
}

type counters struct {
	loads, cacheHits, cacheMisses, evictions                          atomic.Uint64
	snapshotsLoaded, snapshotsIgnored, snapshotsSaved, snapshotErrors atomic.Uint64
	eventsReplayed, saves, saveFailures, conflicts, retries, recheck  atomic.Uint64
}

// Stats returns the repository's counters.
func (r *Repository[T]) Stats() Stats {
	c := &r.stats
	return Stats{
		Loads: c.loads.Load(), CacheHits: c.cacheHits.Load(), CacheMisses: c.cacheMisses.Load(), Evictions: c.evictions.Load(),
		SnapshotsLoaded: c.snapshotsLoaded.Load(), SnapshotsIgnored: c.snapshotsIgnored.Load(),
		SnapshotsSaved: c.snapshotsSaved.Load(), SnapshotErrors: c.snapshotErrors.Load(),
		EventsReplayed: c.eventsReplayed.Load(), Saves: c.saves.Load(), SaveFailures: c.saveFailures.Load(),
		Conflicts: c.conflicts.Load(), Retries: c.retries.Load(), Rechecks: c.recheck.Load(),
	}
}
