package projection_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/shred"
)

// TestErasures: a projection that takes Erasures sees the erasure reports
// of shred beside the events of its filter, and no other system stream's
// events; what its handler says it removed is recorded in the erasure
// stream once the batch is applied. On every backend that keeps keys.
func TestErasures(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		s, sh := k.OpenShredded(t, varve.Config{})
		ctx := t.Context()
		var mu sync.Mutex
		model := map[string]string{} // subject → name
		var foreign []string
		p := projection.Projection{Name: "people", Version: 1, Filter: varve.Filter{Categories: []string{"person"}}, Erasures: true,
			Handle: func(_ context.Context, b projection.Batch) error {
				mu.Lock()
				defer mu.Unlock()
				for _, e := range b.Events {
					switch {
					case e.Stream == shred.ErasureStream:
					case e.Type == "Named":
						var v struct{ Name string }
						if err := json.Unmarshal(e.Data, &v); err != nil {
							return err
						}
						model[e.Stream] = v.Name
					default:
						foreign = append(foreign, e.Stream+"/"+e.Type)
					}
				}
				for _, r := range b.Erasures() {
					n := int64(0)
					if _, ok := model[r.Subject]; ok {
						delete(model, r.Subject)
						n = 1
					}
					b.Erased(r, n)
				}
				return nil
			}}
		r, err := projection.NewRunner(s, p, projection.Config{Promote: true, MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		defer func() {
			stop()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("run: %v", err)
			}
		}()
		for _, who := range []string{"person-1", "person-2"} {
			ev, err := sh.SealFields(ctx, who, varve.NewEvent("Named", []byte(`{"Name":"`+who+` Smith"}`)), "Name")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(ctx, who, varve.Any, ev); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Append(ctx, "other-1", varve.Any, varve.NewEvent("Named", []byte(`{"Name":"x"}`))); err != nil {
			t.Fatal(err)
		}
		if _, err := s.System().Append(ctx, "$other", varve.Any, varve.NewEvent("Named", []byte(`{"Name":"y"}`))); err != nil {
			t.Fatal(err)
		}
		rep, err := sh.Erase(ctx, s, "person-1", shred.EraseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancelWait := context.WithCancel(ctx)
		go func() {
			select {
			case err := <-done:
				done <- err
				t.Errorf("the runner stopped: %v", err)
				cancelWait()
			case <-wctx.Done():
			}
		}()
		err = r.WaitFor(wctx, rep.Position)
		cancelWait()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if _, ok := model["person-1"]; ok || model["person-2"] != "person-2 Smith" || len(foreign) > 0 {
			t.Fatalf("read model after the erasure: %v, foreign events %v", model, foreign)
		}
		mu.Unlock()
		// The runner records what the handler removed, after the batch.
		deadline := time.Now().Add(time.Minute)
		for {
			var got []shred.ReadModelErasure
			for e, err := range s.ReadStream(ctx, shred.ErasureStream) {
				if err != nil {
					t.Fatal(err)
				}
				if rm, ok := shred.ParseReadModelErasure(e); ok {
					got = append(got, rm)
				}
			}
			if len(got) == 1 && got[0].Subject == "person-1" && got[0].Rows == 1 && got[0].Key == rep.Key && got[0].ReadModel == "projection people v1" {
				break
			}
			if len(got) > 1 || time.Now().After(deadline) {
				t.Fatalf("read-model erasures recorded: %+v", got)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

func TestErasuresWithQuery(t *testing.T) {
	s := teststore.Kinds[0].Open(t, varve.Config{})
	_, err := projection.NewRunner(s, projection.Projection{Name: "q", Version: 1, Erasures: true,
		Query:  varve.Query{Items: []varve.QueryItem{{Tags: []string{"a"}}}},
		Handle: func(context.Context, projection.Batch) error { return nil }}, projection.Config{})
	if !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("Erasures with a Query: %v", err)
	}
}
