package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
)

// Leases live in the checkpoint bucket under keys "=L." and the encoded
// name, which encodeID never writes (so listings of checkpoints skip
// them). A lease entry is
//
//	holder \n token \n expires \n fenced checkpoints \n fenced through
//
// with expires in Unix nanoseconds by the clock of the process that wrote
// it, the encoded names of the checkpoints saved fenced by the lease,
// separated by spaces (encodeID never writes one), and the token whose
// fence is complete. An entry of three parts (written before the fence was
// atomic) fences no checkpoint and is complete. A fenced checkpoint is
// "position \t token": the token of the last save or fence; a fence of a
// checkpoint never saved writes no position, which reads as no checkpoint.
// Every change of a key is a compare-and-set on its revision.
//
// Why the fence holds without a transaction over two keys (servers before
// 2.12 have no atomic batch, and none has a compare-and-set on two
// subjects' sequences that every supported version runs):
//
//   - A save with token t reads the lease entry, is refused if its token is
//     newer than t, and, unless the entry lists the checkpoint already,
//     adds it with a compare-and-set of the entry (again refused on a newer
//     token after a conflict). Then it sets the checkpoint by a
//     compare-and-set, refused when the stored token is newer than t.
//   - An Acquire that hands out a new token u sets it in the entry by a
//     compare-and-set, then fences each checkpoint that this entry lists: a
//     compare-and-set that keeps the position and stores u (unless a newer
//     token is stored), and returns only then.
//   - Names are only ever added to an entry, and only by a compare-and-set
//     of an entry whose token is at most the saver's. So a save of an older
//     token t < u that got past the entry read it before u was set, with
//     the checkpoint listed: the fence of u covers that checkpoint. The
//     stored token of a checkpoint never decreases, so the save's
//     compare-and-set of the checkpoint succeeds only at a revision before
//     the fence's: it lands before the Acquire returns, and the fence keeps
//     its position, or it fails. A save that starts after the Acquire
//     returned reads u in the entry, or (a stale read) fails its
//     compare-and-set of the entry or finds u in the checkpoint.
//   - An Acquire that fails after setting u (a cancelled context, a lost
//     connection) leaves its fence incomplete: "fenced through" stays
//     below u, and the next Acquire of the entry, a renewal too, completes
//     the fence before it returns. A complete fence is marked with one
//     compare-and-set at the revision the Acquire wrote.
//
// So a renewal and a save of a checkpoint the entry lists already cost
// what they cost before (a get and a compare-and-set; a get, a get and a
// compare-and-set), the first fenced save of a checkpoint one
// compare-and-set of the entry more, and a new token two requests per
// fenced checkpoint and one more. Fencing the checkpoints before the token
// is set would save the marking request but could refuse the saves of a
// holder who renewed in between, the acquirer's compare-and-set then
// failing. An entry fences at most maxFenced checkpoints: names are never
// removed, and each new token fences them all.

const leaseKeyPrefix = "=L."

// maxLeaseRetries bounds the compare-and-set rounds of a lease call.
const maxLeaseRetries = 16

// maxFenced bounds the checkpoints one lease fences: 64 names of at most
// 768 encoded bytes keep an entry under 50 KB.
const maxFenced = 64

type leaseValue struct {
	holder  string
	token   uint64
	expires int64
	names   []string // encoded names of the fenced checkpoints
	fenced  uint64   // the token whose fence is complete
}

func (v leaseValue) encode() []byte {
	return []byte(v.holder + "\n" + strconv.FormatUint(v.token, 10) + "\n" + strconv.FormatInt(v.expires, 10) +
		"\n" + strings.Join(v.names, " ") + "\n" + strconv.FormatUint(v.fenced, 10))
}

func decodeLease(b []byte) (leaseValue, error) {
	parts := strings.Split(string(b), "\n")
	if len(parts) != 3 && len(parts) != 5 {
		return leaseValue{}, fmt.Errorf("malformed lease %q", b)
	}
	tok, err1 := strconv.ParseUint(parts[1], 10, 64)
	exp, err2 := strconv.ParseInt(parts[2], 10, 64)
	v := leaseValue{holder: parts[0], token: tok, expires: exp, fenced: tok}
	var err3 error
	if len(parts) == 5 {
		v.names = strings.Fields(parts[3])
		v.fenced, err3 = strconv.ParseUint(parts[4], 10, 64)
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		return leaseValue{}, fmt.Errorf("malformed lease %q: %w", b, err)
	}
	return v, nil
}

// storedToken is the token of a fenced checkpoint's value, 0 for a
// checkpoint saved without a lease.
func storedToken(v []byte) uint64 {
	_, tok, _ := strings.Cut(string(v), "\t")
	t, _ := strconv.ParseUint(tok, 10, 64)
	return t
}

// kvEntry is a value of a key at a revision.
type kvEntry struct {
	value []byte
	rev   uint64
}

// leaseOp runs one compare-and-set round after another on key: change
// gets the current value (nil when there is none) and returns the new one
// or nil to write nothing. The first round starts from known instead of a
// get when it is not nil. It returns the revision it wrote, 0 when it
// wrote nothing.
func (b *Backend) leaseOp(ctx context.Context, key string, known *kvEntry, change func(cur []byte) ([]byte, error)) (uint64, error) {
	if err := b.ready(ctx); err != nil {
		return 0, err
	}
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	kv, err := b.bucket(ctx, b.cfg.CheckpointBucket, &b.ckpts, true)
	if err != nil {
		return 0, b.fail("", err)
	}
	for range maxLeaseRetries {
		var cur []byte
		var rev uint64
		if known != nil {
			cur, rev, known = known.value, known.rev, nil
		} else {
			b.c.CountRequest()
			e, err := kv.Get(ctx, key)
			switch {
			case err == nil:
				cur, rev = e.Value(), e.Revision()
			case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
			default:
				return 0, b.fail("get key", b.c.Err(ctx, err))
			}
		}
		next, err := change(cur)
		if err != nil || next == nil {
			return 0, err
		}
		b.c.CountRequest()
		var wrote uint64
		if rev == 0 {
			wrote, err = kv.Create(ctx, key, next)
		} else {
			wrote, err = kv.Update(ctx, key, next, rev)
		}
		if err == nil {
			return wrote, nil
		}
		var api *jetstream.APIError
		if !errors.Is(err, jetstream.ErrKeyExists) && !(errors.As(err, &api) &&
			(api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)) {
			return 0, b.fail("put key", b.c.Err(ctx, err))
		}
	}
	return 0, fmt.Errorf("nats: %d writers in a row changed key %s under this one", maxLeaseRetries, key)
}

// AcquireLease implements varve.LeaseStore. A new token is set in the
// lease entry, then its fence completed (see the top of this file).
func (b *Backend) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (varve.Lease, error) {
	key := leaseKeyPrefix + encodeID(name)
	var got leaseValue
	rev, err := b.leaseOp(ctx, key, nil, func(cur []byte) ([]byte, error) {
		var l leaseValue
		if cur != nil {
			var err error
			if l, err = decodeLease(cur); err != nil {
				return nil, err
			}
		}
		now := time.Now()
		live := now.UnixNano() < l.expires
		switch {
		case live && l.holder == holder:
		case !live || l.holder == "":
			l.token++
			l.holder = holder
			if len(l.names) == 0 {
				l.fenced = l.token
			}
		default:
			return nil, &varve.LeaseHeldError{Holder: l.holder, Expires: time.Unix(0, l.expires)}
		}
		l.expires = now.Add(ttl).UnixNano()
		got = l
		return l.encode(), nil
	})
	if err == nil && got.fenced < got.token {
		err = b.fence(ctx, key, got, rev)
	}
	if err != nil {
		return varve.Lease{}, err
	}
	return varve.Lease{Name: name, Holder: holder, Token: got.token, Expires: time.Unix(0, got.expires)}, nil
}

// fence stores l's token in every checkpoint that l lists, keeping its
// position, then marks the fence complete in the lease entry, which l is
// at revision rev.
func (b *Backend) fence(ctx context.Context, key string, l leaseValue, rev uint64) error {
	tok := strconv.FormatUint(l.token, 10)
	for _, cp := range l.names {
		_, err := b.leaseOp(ctx, cp, nil, func(cur []byte) ([]byte, error) {
			if storedToken(cur) >= l.token {
				return nil, nil
			}
			pos, _, _ := strings.Cut(string(cur), "\t")
			return []byte(pos + "\t" + tok), nil
		})
		if err != nil {
			return fmt.Errorf("fence checkpoint %s: %w", cp, err)
		}
	}
	_, err := b.leaseOp(ctx, key, &kvEntry{l.encode(), rev}, func(cur []byte) ([]byte, error) {
		if cur == nil {
			return nil, nil
		}
		v, err := decodeLease(cur)
		if err != nil || v.token != l.token || v.fenced >= l.token {
			return nil, err
		}
		v.fenced = l.token
		return v.encode(), nil
	})
	return err
}

// ReleaseLease implements varve.LeaseStore.
func (b *Backend) ReleaseLease(ctx context.Context, name, holder string, token uint64) error {
	_, err := b.leaseOp(ctx, leaseKeyPrefix+encodeID(name), nil, func(cur []byte) ([]byte, error) {
		if cur == nil {
			return nil, nil
		}
		l, err := decodeLease(cur)
		if err != nil || l.holder != holder || l.token != token {
			return nil, err
		}
		l.holder, l.expires = "", 0
		return l.encode(), nil
	})
	return err
}

// SaveCheckpointFenced implements varve.LeaseStore: the checkpoint is
// listed in the lease entry (once), then set unless its stored token is
// newer (see the top of this file).
func (b *Backend) SaveCheckpointFenced(ctx context.Context, name string, pos varve.Position, lease string, token uint64) error {
	if name == "" {
		return fmt.Errorf("nats: empty checkpoint name: %w", varve.ErrInvalidArgument)
	}
	cp := encodeID(name)
	_, err := b.leaseOp(ctx, leaseKeyPrefix+encodeID(lease), nil, func(cur []byte) ([]byte, error) {
		var l leaseValue // a lease never acquired: token 0, fencing nothing
		if cur != nil {
			var err error
			if l, err = decodeLease(cur); err != nil {
				return nil, err
			}
		}
		switch {
		case l.token > token:
			return nil, varve.ErrLeaseLost
		case slices.Contains(l.names, cp):
			return nil, nil
		case len(l.names) >= maxFenced:
			return nil, fmt.Errorf("nats: lease %q fences %d checkpoints, the most one lease can; checkpoint %q would be one more: %w",
				lease, maxFenced, name, varve.ErrInvalidArgument)
		}
		l.names = append(slices.Clip(l.names), cp)
		return l.encode(), nil
	})
	if err != nil {
		return err
	}
	_, err = b.leaseOp(ctx, cp, nil, func(cur []byte) ([]byte, error) {
		if storedToken(cur) > token {
			return nil, varve.ErrLeaseLost
		}
		return []byte(pos.String() + "\t" + strconv.FormatUint(token, 10)), nil
	})
	return err
}

// ListLeases implements varve.LeaseStore: the lease keys of the
// checkpoint bucket, then one get each, judged by this process's clock.
func (b *Backend) ListLeases(ctx context.Context, prefix string) ([]varve.Lease, error) {
	if err := b.ready(ctx); err != nil {
		return nil, err
	}
	keys, err := b.kvKeys(ctx, b.cfg.CheckpointBucket, leaseKeyPrefix+">")
	if err != nil {
		return nil, b.fail("list leases", err)
	}
	now := time.Now().UnixNano()
	var out []varve.Lease
	for _, k := range keys {
		name, err := decodeID(strings.TrimPrefix(k, leaseKeyPrefix))
		if err != nil || !strings.HasPrefix(name, prefix) {
			continue
		}
		v, ok, err := b.kvGet(ctx, b.cfg.CheckpointBucket, &b.ckpts, k, false)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // deleted since it was listed
		}
		l, err := decodeLease(v)
		if err != nil {
			return nil, b.fail("decode lease", err)
		}
		if l.holder != "" && now < l.expires {
			out = append(out, varve.Lease{Name: name, Holder: l.holder, Token: l.token, Expires: time.Unix(0, l.expires)})
		}
	}
	slices.SortFunc(out, func(a, b varve.Lease) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
