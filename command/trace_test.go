package command_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/command"
)

type spanKey struct{}

// recorder is a store tracer that also traces commands, and records which
// command each append ran under.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) { r.mu.Lock(); r.log = append(r.log, s); r.mu.Unlock() }

func (r *recorder) TraceCommandStart(ctx context.Context, d command.TraceStartData) context.Context {
	r.add("start " + d.Type + " " + d.ID + " " + d.CorrelationID)
	return context.WithValue(ctx, spanKey{}, d.ID)
}

func (r *recorder) TraceCommandEnd(ctx context.Context, d command.TraceEndData) {
	r.add(fmt.Sprintf("end %s err=%v", d.Result.Stream, d.Err != nil))
}

func (r *recorder) TraceAppendStart(ctx context.Context, d varve.TraceAppendStartData) context.Context {
	span, _ := ctx.Value(spanKey{}).(string)
	r.add("append " + d.Stream + " in " + span)
	return ctx
}

func (r *recorder) TraceAppendEnd(context.Context, varve.TraceAppendEndData) {}

func TestTrace(t *testing.T) {
	rec := &recorder{}
	s, err := varve.New(memory.New(), varve.Config{Tracer: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := newBus(t, s, command.Trace(s), command.Validate())
	ctx := context.Background()
	if _, err := b.Dispatch(ctx, "c-t", Reserve{Seat: "5E"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Dispatch(ctx, "c-bad", Reserve{}); !errors.Is(err, command.ErrInvalid) {
		t.Fatal(err)
	}
	want := "[start command_test.Reserve c-t c-t append seat-5E in c-t end seat-5E err=false start command_test.Reserve c-bad c-bad end  err=true]"
	if got := fmt.Sprint(rec.log); got != want {
		t.Errorf("trace\n got %s\nwant %s", got, want)
	}
	// A store whose tracer does not trace commands: Trace adds nothing.
	plain, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := newBus(t, plain, command.Trace(plain)).Dispatch(ctx, "c-p", Reserve{Seat: "1"}); err != nil {
		t.Fatal(err)
	}
}
