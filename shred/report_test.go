package shred_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/shred"
)

// park appends a parked record as package delivery writes it.
func park(t *testing.T, s *varve.Store, p delivery.ParkedEvent) {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.System().Append(context.Background(), delivery.ParkedStreamPrefix+p.Subscription, varve.Any, varve.NewEvent(delivery.ParkedEventType, data)); err != nil {
		t.Fatal(err)
	}
}

func TestErasureReport(t *testing.T) {
	if shred.ParkedStreamPrefix != delivery.ParkedStreamPrefix {
		t.Fatalf("shred counts parked records in %q, delivery keeps them in %q", shred.ParkedStreamPrefix, delivery.ParkedStreamPrefix)
	}
	ctx := context.Background()
	s, sh := open(t, memory.New(), shredConfig(t))
	appendSealed := func(subject, stream string) varve.RecordedEvent {
		ev, err := sh.Seal(ctx, subject, varve.NewEvent("E", []byte(`{"name":"x"}`)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, stream, varve.Any, ev); err != nil {
			t.Fatal(err)
		}
		evs := readStream(t, s, stream, varve.Sealed(), varve.ReadBackward(), varve.Limit(1))
		return evs[0]
	}
	a1 := appendSealed("user-9", "user-9")
	appendSealed("user-9", "user-9")
	other := appendSealed("user-10", "user-10")
	// Parked records: one names an event of user-9, one holds an event of
	// user-9 sealed (a source without a store), one names user-10's.
	park(t, s, delivery.ParkedEvent{Subscription: "hooks", Stream: a1.Stream, Version: a1.Version, Position: a1.Position, Reason: delivery.ReasonRejected, ParkedAt: time.Now()})
	held := a1
	park(t, s, delivery.ParkedEvent{Subscription: "cdc", Stream: "elsewhere", Position: varve.Position{Commit: 1 << 40}, Event: &held, ParkedAt: time.Now()})
	park(t, s, delivery.ParkedEvent{Subscription: "hooks", Stream: other.Stream, Version: other.Version, Position: other.Position, ParkedAt: time.Now()})

	r, err := sh.Erase(ctx, s, "user-9", shred.EraseOptions{Count: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Counted || r.Events != 2 || r.Parked != 2 || r.CountError != "" {
		t.Fatalf("report: %+v", r)
	}
	if err := shred.ReadModelErased(ctx, s, shred.ReadModelErasure{Subject: "user-9", Key: r.Key, ReadModel: "users", Rows: 3}); err != nil {
		t.Fatal(err)
	}
	r2, err := sh.Erase(ctx, s, "user-10", shred.EraseOptions{})
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name     string
		subject  string
		limit    int
		subjects []string
	}{
		{"all, newest first", "", 0, []string{"user-10", "user-9"}},
		{"limit", "", 1, []string{"user-10"}},
		{"one subject", "user-9", 0, []string{"user-9"}},
		{"no such subject", "user-11", 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := shred.Reports(ctx, s, tc.subject, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.subjects) {
				t.Fatalf("%d reports, want %d: %+v", len(got), len(tc.subjects), got)
			}
			for i, g := range got {
				if g.Subject != tc.subjects[i] {
					t.Fatalf("report %d of %q, want %q", i, g.Subject, tc.subjects[i])
				}
				switch g.Subject {
				case "user-9":
					if g.Key != r.Key || g.Parked != 2 || len(g.ReadModels) != 1 || g.ReadModels[0].Rows != 3 || g.ReadModels[0].ReadModel != "users" {
						t.Fatalf("report of user-9: %+v", g)
					}
				case "user-10":
					if g.Key != r2.Key || g.Counted || len(g.ReadModels) != 0 {
						t.Fatalf("report of user-10: %+v", g)
					}
				}
			}
		})
	}
}

// failingReads fails every read of $all, as a store that goes away after
// the key is deleted.
type failingReads struct{ *memory.Backend }

var errReadsFail = errors.New("reads of $all fail")

func (failingReads) ReadAll(context.Context, varve.AllQuery, []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	return nil, errReadsFail
}

// TestErasureReportWhenCountingFails: the key is gone and the report is
// recorded, saying why it has no counts.
func TestErasureReportWhenCountingFails(t *testing.T) {
	ctx := context.Background()
	s, sh := open(t, failingReads{memory.New()}, shredConfig(t))
	ev, err := sh.Seal(ctx, "user-3", varve.NewEvent("E", []byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "user-3", varve.Any, ev); err != nil {
		t.Fatal(err)
	}
	r, err := sh.Erase(ctx, s, "user-3", shred.EraseOptions{Count: true})
	if !errors.Is(err, errReadsFail) {
		t.Fatalf("erase: %v, want the read's error", err)
	}
	if r.Counted || r.CountError == "" || r.Position.IsZero() {
		t.Fatalf("report: %+v", r)
	}
	got, err := shred.Reports(ctx, s, "user-3", 0)
	if err != nil || len(got) != 1 || got[0].CountError != r.CountError || got[0].Key != r.Key {
		t.Fatalf("reports: %+v, %v", got, err)
	}
	if _, err := sh.Erase(ctx, s, "user-3", shred.EraseOptions{}); !errors.Is(err, shred.ErrNothingToErase) {
		t.Fatalf("second erase: %v, want ErrNothingToErase", err)
	}
}
