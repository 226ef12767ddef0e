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
// them): "holder\ntoken\nexpires" (Unix nanoseconds by the clock of the
// process that wrote it). Every change is a compare-and-set on the key's
// revision. A fenced checkpoint carries its token after a tab, and its
// save is a compare-and-set too, refused when the lease or the stored
// checkpoint has a newer token.

const leaseKeyPrefix = "=L."

// maxLeaseRetries bounds the compare-and-set rounds of a lease call.
const maxLeaseRetries = 16

type leaseValue struct {
	holder  string
	token   uint64
	expires int64
}

func (v leaseValue) encode() []byte {
	return []byte(v.holder + "\n" + strconv.FormatUint(v.token, 10) + "\n" + strconv.FormatInt(v.expires, 10))
}

func decodeLease(b []byte) (leaseValue, error) {
	parts := strings.Split(string(b), "\n")
	if len(parts) != 3 {
		return leaseValue{}, fmt.Errorf("malformed lease %q", b)
	}
	tok, err1 := strconv.ParseUint(parts[1], 10, 64)
	exp, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return leaseValue{}, fmt.Errorf("malformed lease %q: %w", b, err)
	}
	return leaseValue{holder: parts[0], token: tok, expires: exp}, nil
}

// leaseOp runs one compare-and-set round after another on key: change
// gets the current value (nil when there is none) and returns the new one
// or nil to write nothing.
func (b *Backend) leaseOp(ctx context.Context, key string, change func(cur []byte) ([]byte, error)) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	kv, err := b.bucket(ctx, b.cfg.CheckpointBucket, &b.ckpts, true)
	if err != nil {
		return b.fail("", err)
	}
	for range maxLeaseRetries {
		b.c.CountRequest()
		e, err := kv.Get(ctx, key)
		var cur []byte
		var rev uint64
		switch {
		case err == nil:
			cur, rev = e.Value(), e.Revision()
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		default:
			return b.fail("get key", b.c.Err(ctx, err))
		}
		next, err := change(cur)
		if err != nil || next == nil {
			return err
		}
		b.c.CountRequest()
		if rev == 0 {
			_, err = kv.Create(ctx, key, next)
		} else {
			_, err = kv.Update(ctx, key, next, rev)
		}
		if err == nil {
			return nil
		}
		var api *jetstream.APIError
		if !errors.Is(err, jetstream.ErrKeyExists) && !(errors.As(err, &api) &&
			(api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)) {
			return b.fail("put key", b.c.Err(ctx, err))
		}
	}
	return fmt.Errorf("nats: %d writers in a row changed key %s under this one", maxLeaseRetries, key)
}

// AcquireLease implements varve.LeaseStore.
func (b *Backend) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (varve.Lease, error) {
	var got leaseValue
	err := b.leaseOp(ctx, leaseKeyPrefix+encodeID(name), func(cur []byte) ([]byte, error) {
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
		default:
			return nil, &varve.LeaseHeldError{Holder: l.holder, Expires: time.Unix(0, l.expires)}
		}
		l.expires = now.Add(ttl).UnixNano()
		got = l
		return l.encode(), nil
	})
	if err != nil {
		return varve.Lease{}, err
	}
	return varve.Lease{Name: name, Holder: holder, Token: got.token, Expires: time.Unix(0, got.expires)}, nil
}

// ReleaseLease implements varve.LeaseStore.
func (b *Backend) ReleaseLease(ctx context.Context, name, holder string, token uint64) error {
	return b.leaseOp(ctx, leaseKeyPrefix+encodeID(name), func(cur []byte) ([]byte, error) {
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
}

// SaveCheckpointFenced implements varve.LeaseStore.
func (b *Backend) SaveCheckpointFenced(ctx context.Context, name string, pos varve.Position, lease string, token uint64) error {
	if name == "" {
		return fmt.Errorf("nats: empty checkpoint name: %w", varve.ErrInvalidArgument)
	}
	cur, ok, err := b.kvGet(ctx, b.cfg.CheckpointBucket, &b.ckpts, leaseKeyPrefix+encodeID(lease), true)
	if err != nil {
		return err
	}
	if ok {
		l, err := decodeLease(cur)
		if err != nil {
			return b.fail("decode lease", err)
		}
		if l.token > token {
			return varve.ErrLeaseLost
		}
	}
	return b.leaseOp(ctx, encodeID(name), func(cur []byte) ([]byte, error) {
		if cur != nil {
			if _, stored, _ := strings.Cut(string(cur), "\t"); stored != "" {
				if t, err := strconv.ParseUint(stored, 10, 64); err == nil && t > token {
					return nil, varve.ErrLeaseLost
				}
			}
		}
		return []byte(pos.String() + "\t" + strconv.FormatUint(token, 10)), nil
	})
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
