package subscription_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/subscription"
)

// failingCheckpoints is a checkpoint store of the user that fails to save,
// and to load when load is set.
type failingCheckpoints struct{ load bool }

var errDisk = errors.New("disk full")

func (failingCheckpoints) SaveCheckpoint(context.Context, string, varve.Position) error {
	return errDisk
}
func (f failingCheckpoints) LoadCheckpoint(context.Context, string) (varve.Position, bool, error) {
	if f.load {
		return varve.Position{}, false, errDisk
	}
	return varve.Position{}, false, nil
}

// TestErrorContext: an error of the subscription names the subscription
// once, the operation once and no stream the store already named; it stays
// errors.Is-able to the cause.
func TestErrorContext(t *testing.T) {
	t.Parallel()
	const name = "sub-errs"
	ctx := context.Background()
	open := func(t *testing.T, cps varve.CheckpointStore) (*varve.Store, *subscription.Subscription) {
		s, err := varve.New(memory.New(), varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Append(ctx, "order-1", varve.NoStream, varve.Event{Type: "T"}); err != nil {
			t.Fatal(err)
		}
		sub, err := subscription.Open(ctx, s, subscription.Config{Name: name, Checkpoints: cps})
		if err != nil {
			t.Fatal(err)
		}
		return s, sub
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) error
		ops  []string // each said exactly once
		want error
	}{
		{"read on a closed store", func(t *testing.T) error {
			s, sub := open(t, nil)
			s.Close()
			_, err := sub.Next(ctx)
			return err
		}, []string{"read", "after"}, varve.ErrClosed},
		{"save to the store's checkpoints", func(t *testing.T) error {
			s, sub := open(t, nil)
			s.Close()
			return sub.SaveCheckpoint(ctx, varve.Position{Seq: 1})
		}, []string{"save checkpoint"}, varve.ErrClosed},
		{"save to a checkpoint store of the user", func(t *testing.T) error {
			_, sub := open(t, failingCheckpoints{})
			return sub.SaveCheckpoint(ctx, varve.Position{Seq: 1})
		}, []string{"save checkpoint"}, errDisk},
		{"open with the store's checkpoints", func(t *testing.T) error {
			s, _ := open(t, nil)
			s.Close()
			_, err := subscription.Open(ctx, s, subscription.Config{Name: name})
			return err
		}, []string{"load checkpoint"}, varve.ErrClosed},
		{"open with a checkpoint store of the user", func(t *testing.T) error {
			s, _ := open(t, nil)
			_, err := subscription.Open(ctx, s, subscription.Config{Name: name, Checkpoints: failingCheckpoints{load: true}})
			return err
		}, []string{"load checkpoint"}, errDisk},
		{"open at the end", func(t *testing.T) error {
			s, _ := open(t, nil)
			s.Close()
			_, err := subscription.Open(ctx, s, subscription.Config{Name: name, Start: subscription.FromEnd})
			return err
		}, []string{"last position"}, varve.ErrClosed},
		{"run with a failing handler", func(t *testing.T) error {
			_, sub := open(t, nil)
			return sub.Run(ctx, func(context.Context, varve.RecordedEvent) error { return errDisk })
		}, []string{"handle", "order-1"}, errDisk},
		{"run on a closed store", func(t *testing.T) error {
			s, sub := open(t, nil)
			s.Close()
			return sub.Run(ctx, func(context.Context, varve.RecordedEvent) error { return nil })
		}, []string{"read", "after"}, varve.ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.run(t)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "subscription") {
				t.Errorf("%q does not say it comes from a subscription", msg)
			}
			for _, what := range append([]string{`"` + name + `"`}, tc.ops...) {
				if n := strings.Count(msg, what); n != 1 {
					t.Errorf("%q says %s %d times, want once", msg, what, n)
				}
			}
			if !slices.Contains(tc.ops, "order-1") && strings.Contains(msg, "order-1") {
				t.Errorf("%q names a stream", msg)
			}
		})
	}
}
