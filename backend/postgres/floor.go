package postgres

import "sync/atomic"

// floor is a horizon this backend has proven: every transaction with an id
// below it had ended when a statement evaluated the horizon, so no event
// can later appear below it. The horizon that a statement evaluates is not
// monotonic: a transaction without events that ends between its snapshot
// and its look at the lock table counts as a writer for it, and holds it
// below an earlier statement's. A read after WaitFor could then stop short
// of the position waited for. The $all statements read below the greater
// of the two, and each read raises the floor past what it returned.
type floor struct{ v atomic.Int64 }

func (f *floor) get() int64 { return f.v.Load() }

// raise records h as proven: a horizon a statement evaluated, or one past
// an event a read returned (it was below that statement's horizon).
func (f *floor) raise(h int64) {
	for {
		cur := f.v.Load()
		if h <= cur || f.v.CompareAndSwap(cur, h) {
			return
		}
	}
}
