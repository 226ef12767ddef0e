package aggregate

import (
	"context"
	"hash/maphash"
	"sync"
)

// keyLocks serializes the commands of one repository on one aggregate id.
// Locks exist only while held or awaited, so memory stays bounded by the
// number of ids in use at once, not by the number of ids ever seen.
type keyLocks struct {
	seed   maphash.Seed
	shards [64]lockShard
	free   sync.Pool // *keyLock, unlocked and unreferenced
}

type lockShard struct {
	mu    sync.Mutex
	locks map[string]*keyLock
	_     [48]byte // keep neighbouring shards' mutexes on separate cache lines
}

type keyLock struct {
	ch   chan struct{} // holds a token while the lock is held
	refs int           // holders and waiters; guarded by the shard's mu
}

func newKeyLocks() *keyLocks {
	k := &keyLocks{seed: maphash.MakeSeed()}
	for i := range k.shards {
		k.shards[i].locks = map[string]*keyLock{}
	}
	return k
}

// lock takes the lock of key, waiting until it is free or ctx ends.
func (k *keyLocks) lock(ctx context.Context, key string) (*keyLock, error) {
	sh := &k.shards[maphash.String(k.seed, key)%uint64(len(k.shards))]
	sh.mu.Lock()
	l := sh.locks[key]
	if l == nil {
		l, _ = k.free.Get().(*keyLock)
		if l == nil {
			l = &keyLock{ch: make(chan struct{}, 1)}
		}
		sh.locks[key] = l
	}
	l.refs++
	sh.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
		return l, nil
	default:
	}
	select {
	case l.ch <- struct{}{}:
		return l, nil
	case <-ctx.Done():
		k.release(sh, key, l)
		return nil, ctx.Err()
	}
}

// unlock releases a lock taken by lock.
func (k *keyLocks) unlock(key string, l *keyLock) {
	<-l.ch
	k.release(&k.shards[maphash.String(k.seed, key)%uint64(len(k.shards))], key, l)
}

func (k *keyLocks) release(sh *lockShard, key string, l *keyLock) {
	sh.mu.Lock()
	l.refs--
	last := l.refs == 0
	if last {
		delete(sh.locks, key)
	}
	sh.mu.Unlock()
	if last {
		k.free.Put(l)
	}
}

// held returns the number of keys locked or awaited, for tests.
func (k *keyLocks) held() int {
	n := 0
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		n += len(sh.locks)
		sh.mu.Unlock()
	}
	return n
}
