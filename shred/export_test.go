package shred

import "context"

// DataKey returns the subject's data key unwrapped, for tests that look
// for it in a store's files.
func DataKey(ctx context.Context, s *Shredder, subject string) ([]byte, error) {
	w, err := s.keys.GetKey(ctx, subject)
	if err != nil {
		return nil, err
	}
	return s.masters[w.Master].Unwrap(ctx, w.Wrapped, aad(w.Subject, w.ID))
}
