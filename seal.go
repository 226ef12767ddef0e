package varve

import "context"

// Opener opens sealed events on their way out of the store
// ([Config.Opener]): events whose data the application encrypted before
// the append, such as with package shred's per-subject keys. Reads call it
// on each page before they return it, unless they ask for the events as
// stored ([Sealed]).
type Opener interface {
	// OpenEvents replaces, in place, the Data of each sealed event of evs
	// with its plaintext, or with the opener's marker of erased data when
	// its key is gone; it leaves other events alone. An error fails the
	// read (a key store out of reach), never an erased key.
	OpenEvents(ctx context.Context, evs []RecordedEvent) error
}

// Sealed reads events as they are stored, without the store's
// [Config.Opener]: for a reader that keeps or forwards events and opens
// each one when it uses it (package delivery opens an event at each
// attempt to send it, so that a retry after an erasure sends no
// plaintext).
func Sealed() ReadOption { return ReadOption{kind: optSealed} }

// open opens the events of a page read with p, unless p reads them sealed.
func (s *Store) open(ctx context.Context, p paging, evs []RecordedEvent) error {
	if s.cfg.Opener == nil || p.sealed || len(evs) == 0 {
		return nil
	}
	return s.cfg.Opener.OpenEvents(ctx, evs)
}

// Open opens evs in place with the store's [Config.Opener], as a read
// would have: for events read [Sealed]. Without an Opener it does nothing.
func (s *Store) Open(ctx context.Context, evs []RecordedEvent) error {
	return s.open(ctx, paging{}, evs)
}
