package varve

// Watcher is the capability of a backend to wake up readers that follow the
// global log; [Store.Watch] hands it out.
type Watcher interface {
	// Watch returns a channel that is closed once events may have been
	// committed after the call. A wake-up may be spurious; a reader re-reads
	// after it and falls back to polling if the backend cannot notify.
	Watch() <-chan struct{}
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Watch returns a channel that is closed once events may have been
// committed after the call, or once the store is closed. A wake-up may be
// spurious: read again after it. Watch returns nil when the backend cannot
// notify; a reader then polls (a nil channel never fires in a select).
func (s *Store) Watch() <-chan struct{} {
	if s.watcher == nil {
		return nil
	}
	if s.closed.Load() {
		return closedChan
	}
	return s.watcher.Watch()
}
