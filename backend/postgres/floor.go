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
//
// A floor holds only on the server that proved it: a server that crashes
// hands out again the ids it had given without writing them to its WAL,
// and a standby promoted in its place may not have the last ids of the
// old primary (TestFloorAcrossCrash). So the floor is kept with the
// server's incarnation (pg_postmaster_start_time, as serverIncarnation
// gives it), which every new connection of the pool reports (see New);
// a new one starts the floor again from 0, and the statements use a floor
// only on the incarnation it was proven on (floorExpr), whatever
// connection they run on.
type floor struct{ v atomic.Pointer[floorAt] }

type floorAt struct{ inc, h int64 }

// get returns the floor and the incarnation of the server it holds on.
func (f *floor) get() (h, inc int64) {
	if p := f.v.Load(); p != nil {
		return p.h, p.inc
	}
	return 0, 0
}

// server records the incarnation of the server of a new connection: one
// other than the floor's starts it again from 0.
func (f *floor) server(inc int64) {
	for {
		cur := f.v.Load()
		if cur != nil && cur.inc == inc || f.v.CompareAndSwap(cur, &floorAt{inc: inc}) {
			return
		}
	}
}

// raise records h as proven on incarnation inc (the one whose floor the
// statement was given): a horizon a statement evaluated, or one past an
// event a read returned (it was below that statement's horizon). It does
// nothing once the floor is another incarnation's.
func (f *floor) raise(h, inc int64) {
	for {
		cur := f.v.Load()
		if cur == nil || cur.inc != inc || h <= cur.h || f.v.CompareAndSwap(cur, &floorAt{inc: inc, h: h}) {
			return
		}
	}
}

// serverIncarnation is the start of the server's postmaster in
// microseconds: it changes when the server restarts, and tells two
// servers apart.
const serverIncarnation = `(extract(epoch FROM pg_catalog.pg_postmaster_start_time()) * 1000000)::bigint`

// floorExpr is the floor of a statement given as parameters h and inc:
// NULL (no floor: greatest ignores it) on another incarnation.
func floorExpr(h, inc string) string {
	return `CASE WHEN ` + serverIncarnation + ` = ` + inc + `::bigint THEN ` + h + `::bigint END`
}
