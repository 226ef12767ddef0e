package dcb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/dcb"
)

func counter(t *testing.T) (*varve.Store, varve.Query, func(int, varve.RecordedEvent) int) {
	s, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	q := varve.Query{Items: []varve.QueryItem{{Tags: []string{"counter:1"}}}}
	return s, q, func(n int, _ varve.RecordedEvent) int { return n + 1 }
}

func tick() varve.Event {
	e := varve.NewEvent("Ticked", nil)
	e.Tags = []string{"counter:1"}
	return e
}

// TestExecuteRetries: a writer that gets in between the read and the
// append fails the condition; Execute decides again on the state that
// includes it.
func TestExecuteRetries(t *testing.T) {
	ctx := context.Background()
	s, q, apply := counter(t)
	var seen []int
	_, state, err := dcb.Execute(ctx, s, q, 0, apply, func(n int) (dcb.Decision, error) {
		seen = append(seen, n)
		if len(seen) == 1 {
			if _, err := s.Append(ctx, "other", varve.Any, tick()); err != nil {
				t.Fatal(err)
			}
		}
		return dcb.Decision{Stream: "counter", Events: []varve.Event{tick()}}, nil
	}, dcb.Options{})
	if err != nil || state != 1 || len(seen) != 2 || seen[0] != 0 {
		t.Fatalf("state %d, decisions on %v, %v", state, seen, err)
	}
	if n, _, err := dcb.Fold(ctx, s, q, 0, apply); err != nil || n != 2 {
		t.Fatalf("the store holds %d ticks (%v), want 2", n, err)
	}
}

// TestExecuteGivesUp: a condition that always fails ends after
// MaxAttempts with the condition's error; an error of decide ends at once.
func TestExecuteGivesUp(t *testing.T) {
	ctx := context.Background()
	s, q, apply := counter(t)
	calls := 0
	_, _, err := dcb.Execute(ctx, s, q, 0, apply, func(int) (dcb.Decision, error) {
		calls++
		if _, err := s.Append(ctx, "other", varve.Any, tick()); err != nil {
			t.Fatal(err)
		}
		return dcb.Decision{Stream: "counter", Events: []varve.Event{tick()}}, nil
	}, dcb.Options{MaxAttempts: 3})
	if !errors.Is(err, varve.ErrAppendConditionFailed) || calls != 3 {
		t.Fatalf("%d calls, %v", calls, err)
	}
	refused := errors.New("refused")
	calls = 0
	_, _, err = dcb.Execute(ctx, s, q, 0, apply, func(int) (dcb.Decision, error) { calls++; return dcb.Decision{}, refused }, dcb.Options{})
	if !errors.Is(err, refused) || calls != 1 {
		t.Fatalf("%d calls, %v", calls, err)
	}
}
