package subscription

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/varve-go/varve"
)

// MaxSegments bounds [Config.Segments].
const MaxSegments = 4096

// SegmentOf is the segment of a stream among count: the FNV-1a hash (32
// bits) of its id modulo count. Every event of a stream is in one
// segment, so a segment's consumer sees each of its streams in order.
func SegmentOf(stream string, count int) int {
	if count <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(stream))
	return int(h.Sum32() % uint32(count))
}

// SegmentName is the name of segment i of count of the subscription name:
// the name of its checkpoint, and of its lease after [LeasePrefix]. The
// count is part of it: the same name with another count is another group
// of segments, with checkpoints of its own.
func SegmentName(name string, i, count int) string {
	return name + "/segment/" + strconv.Itoa(i) + "-of-" + strconv.Itoa(count)
}

// memberPrefix begins the names of the membership leases of the segments
// under lease: one per process that holds them, named after its holder.
func memberPrefix(lease string, count int) string {
	return lease + "/member-of-" + strconv.Itoa(count) + "/"
}

func segmented(ctx context.Context, store *varve.Store, cfg Config, work func(context.Context, *Subscription) error) error {
	count, holder, ttl := cfg.Lease.Segments, cfg.Lease.Holder, cfg.Lease.TTL
	cfg.Lease = Lease{}
	if store == nil || !store.Capabilities().Leases || !store.Capabilities().Checkpoints || cfg.Checkpoints != nil {
		return fmt.Errorf("subscription %q: segmented: the store must keep leases and checkpoints: %w", cfg.Name, varve.ErrNotSupported)
	}
	if cfg.Stream != "" && cfg.Stream != varve.AllStream || cfg.Segments > 1 {
		return fmt.Errorf("subscription %q: segmented: %w: segments of $all, with no Config.Segments of its own", cfg.Name, varve.ErrInvalidArgument)
	}
	if err := checkConfig(&cfg, store); err != nil {
		return fmt.Errorf("subscription %q: segmented: %w", cfg.Name, err)
	}
	err := HoldSegments(ctx, store, LeasePrefix+cfg.Name, holder, count, ttl, func(ctx context.Context, i int, cps varve.CheckpointStore) error {
		cfg := cfg
		cfg.Name = SegmentName(cfg.Name, i, count)
		cfg.Segment, cfg.Segments = i, count
		cfg.Checkpoints = cps
		sub, err := Open(ctx, store, cfg)
		if err != nil {
			return err
		}
		return work(ctx, sub)
	})
	if err != nil {
		return fmt.Errorf("subscription %q: segmented: %w", cfg.Name, err)
	}
	return nil
}

// HoldSegments spreads count segments, each held under the lease
// "<lease>/segment/<i>-of-<count>", over the processes that call it with
// the same lease and count, as [RunWith] does for a segmented subscription, and calls work for each
// segment this process holds with a checkpoint store fenced by that
// segment's lease (see [Hold]). [RunWith] runs a segmented subscription
// with it; package projection runs a segmented projection's runners
// with it. It returns nil when ctx ends, after stopping the work and
// releasing the leases, and otherwise the first error of a segment's work.
func HoldSegments(ctx context.Context, store *varve.Store, lease, holder string, count int, ttl time.Duration, work func(ctx context.Context, segment int, cps varve.CheckpointStore) error) error {
	if store == nil || !store.Capabilities().Leases || !store.Capabilities().Checkpoints {
		return fmt.Errorf("hold segments of %q: the store must keep leases and checkpoints: %w", lease, varve.ErrNotSupported)
	}
	if count < 1 || count > MaxSegments || ttl < varve.MinLeaseTTL || ttl > varve.MaxLeaseTTL {
		return fmt.Errorf("hold segments of %q: %w: %d segments (1..%d), lease ttl %s", lease, varve.ErrInvalidArgument, count, MaxSegments, ttl)
	}
	g := &group{store: store, lease: lease, holder: holder, count: count, ttl: ttl, every: ttl / 3, work: work,
		running: map[int]*segmentRun{}, ended: make(chan int, count)}
	return g.run(ctx)
}

// SegmentHolder is who holds one segment of a segmented subscription.
type SegmentHolder struct {
	Segment int
	// Holder is empty while no process holds the segment.
	Holder  string
	Token   uint64
	Expires time.Time
	// Checkpoint is the segment's saved position; ok is false before its
	// first save.
	Checkpoint   varve.Position
	CheckpointOK bool
}

// SegmentStatus says which processes run the segmented subscription name
// of count segments, in holder order, and who holds each segment.
func SegmentStatus(ctx context.Context, store *varve.Store, name string, count int) (members []string, segments []SegmentHolder, err error) {
	members, segments, err = HeldSegments(ctx, store, LeasePrefix+name, name, count)
	if err != nil {
		return nil, nil, fmt.Errorf("subscription %q: segment status: %w", name, err)
	}
	return members, segments, nil
}

// HeldSegments says which processes hold the count segments under lease
// (see [HoldSegments]), in holder order, and who holds each segment, with
// the checkpoint of segment i read under SegmentName(checkpoint, i,
// count).
func HeldSegments(ctx context.Context, store *varve.Store, lease, checkpoint string, count int) (members []string, segments []SegmentHolder, err error) {
	if store == nil || count < 1 || count > MaxSegments {
		return nil, nil, fmt.Errorf("held segments of %q: %w", lease, varve.ErrInvalidArgument)
	}
	ms, err := store.Leases().List(ctx, memberPrefix(lease, count))
	if err != nil {
		return nil, nil, err
	}
	for _, m := range ms {
		members = append(members, m.Holder)
	}
	held, err := store.Leases().List(ctx, lease+"/segment/")
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]varve.Lease{}
	for _, l := range held {
		byName[l.Name] = l
	}
	for i := range count {
		l := byName[lease+"/segment/"+strconv.Itoa(i)+"-of-"+strconv.Itoa(count)]
		s := SegmentHolder{Segment: i, Holder: l.Holder, Token: l.Token, Expires: l.Expires}
		if s.Checkpoint, s.CheckpointOK, err = store.Checkpoints().Load(ctx, SegmentName(checkpoint, i, count)); err != nil {
			return nil, nil, err
		}
		segments = append(segments, s)
	}
	return members, segments, nil
}

// group is one process's part of a segmented subscription.
type group struct {
	store       *varve.Store
	lease       string // the segments' leases are under it
	holder      string
	count       int
	ttl, every  time.Duration
	work        func(context.Context, int, varve.CheckpointStore) error
	running     map[int]*segmentRun
	ended       chan int // a segment's run returned
	wg          sync.WaitGroup
	errMu       sync.Mutex
	err         error // the first error of a segment's work
	cancelGroup context.CancelFunc
}

type segmentRun struct {
	stop context.CancelFunc
	done chan struct{}
}

func (g *group) fail(err error) {
	g.errMu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.errMu.Unlock()
	g.cancelGroup()
}

func (g *group) run(ctx context.Context) error {
	gctx, cancel := context.WithCancel(ctx)
	g.cancelGroup = cancel
	defer cancel()
	leases := g.store.Leases()
	var member varve.Lease
	defer func() {
		for _, r := range g.running {
			r.stop()
		}
		g.wg.Wait()
		if member.Token != 0 {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runSaveTimeout)
			_ = leases.Release(rctx, member)
			cancel()
		}
	}()
	for {
		// Segments whose run returned (lease lost, or an error already
		// recorded) are free to be taken again.
		for drained := false; !drained; {
			select {
			case i := <-g.ended:
				delete(g.running, i)
			default:
				drained = true
			}
		}
		err := g.balance(gctx, &member)
		if gctx.Err() != nil {
			g.errMu.Lock()
			err := g.err
			g.errMu.Unlock()
			return err
		}
		if err != nil {
			return err
		}
		t := time.NewTimer(g.every)
		select {
		case <-gctx.Done():
		case <-t.C:
		case i := <-g.ended:
			delete(g.running, i)
		}
		t.Stop()
	}
}

// balance renews the membership, then releases or takes segments to reach
// this process's share.
func (g *group) balance(ctx context.Context, member *varve.Lease) error {
	leases := g.store.Leases()
	prefix := memberPrefix(g.lease, g.count)
	m, err := leases.Acquire(ctx, prefix+g.holder, g.holder, g.ttl)
	if err != nil {
		if errors.Is(err, varve.ErrLeaseHeld) {
			return fmt.Errorf("holder %q: another process runs under the same holder name: %w", g.holder, err)
		}
		return err
	}
	*member = m
	ms, err := leases.List(ctx, prefix)
	if err != nil {
		return err
	}
	k := slices.IndexFunc(ms, func(l varve.Lease) bool { return l.Holder == g.holder })
	n := len(ms)
	if k < 0 { // our lease expired between the two calls: count ourselves last
		k, n = n, n+1
	}
	share := g.count / n
	if k < g.count%n {
		share++
	}
	for len(g.running) > share {
		g.stopSegment(ctx, slices.Max(keys(g.running)))
	}
	if len(g.running) == share {
		return nil
	}
	held, err := leases.List(ctx, g.lease+"/segment/")
	if err != nil {
		return err
	}
	taken := map[string]bool{}
	for _, l := range held {
		taken[l.Name] = true
	}
	// Start looking at a place that depends on the holder, so that
	// processes joining together try different segments first.
	first := SegmentOf(g.holder, g.count)
	for j := range g.count {
		if len(g.running) >= share {
			break
		}
		i := (first + j) % g.count
		name := g.lease + "/segment/" + strconv.Itoa(i) + "-of-" + strconv.Itoa(g.count)
		if g.running[i] != nil || taken[name] {
			continue
		}
		l, err := leases.Acquire(ctx, name, g.holder, g.ttl)
		if errors.Is(err, varve.ErrLeaseHeld) {
			continue
		}
		if err != nil {
			return err
		}
		g.startSegment(ctx, i, l)
	}
	return nil
}

func keys(m map[int]*segmentRun) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (g *group) startSegment(ctx context.Context, i int, l varve.Lease) {
	sctx, stop := context.WithCancel(ctx)
	r := &segmentRun{stop: stop, done: make(chan struct{})}
	g.running[i] = r
	g.wg.Go(func() {
		defer close(r.done)
		defer stop()
		lost, err := runHolding(sctx, g.store, l, g.ttl, g.every, func(ctx context.Context, cps varve.CheckpointStore) error {
			return g.work(ctx, i, cps)
		})
		if !lost {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runSaveTimeout)
			rerr := g.store.Leases().Release(rctx, l)
			cancel()
			if err == nil && sctx.Err() == nil {
				err = rerr
			}
		}
		if err != nil && sctx.Err() == nil {
			g.fail(fmt.Errorf("segment %d: %w", i, err))
		}
		g.ended <- i
	})
}

// stopSegment stops a segment's work and waits until its lease is
// released, so that the next holder starts from its last checkpoint.
func (g *group) stopSegment(ctx context.Context, i int) {
	r := g.running[i]
	r.stop()
	select {
	case <-r.done:
	case <-ctx.Done():
		return
	}
	for {
		if j := <-g.ended; j == i {
			break
		} else {
			delete(g.running, j)
		}
	}
	delete(g.running, i)
}

// inSegment reports whether the subscription keeps the events of stream.
func (s *Subscription) inSegment(stream string) bool {
	return s.cfg.Segments <= 1 || SegmentOf(stream, s.cfg.Segments) == s.cfg.Segment
}
