package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// TestLockOrder: a conditional append with an item of types only takes the
// schema's writer lock (exclusively) after its tag locks, as every tagged
// append takes its tag locks before the writer lock (shared). Before
// migration 13 of the squashed history it took the writer lock first: waiting for a tag, it held
// every other append up, and with a tagged append waiting for the writer
// lock the two deadlocked until PostgreSQL failed one after
// deadlock_timeout. Here another transaction holds the tag; the
// conditional append must wait for it without the writer lock, and a plain
// append meanwhile goes through.
func TestLockOrder(t *testing.T) {
	b := open(t, config(t, testSchema))
	paths := []struct {
		name   string
		append func(context.Context, varve.AppendRequest, *varve.AppendCondition) error
	}{
		{"append_tagged_fast", func(ctx context.Context, req varve.AppendRequest, cond *varve.AppendCondition) error {
			_, err := b.AppendIf(ctx, req, *cond)
			return err
		}},
		{"append_tagged", func(ctx context.Context, req varve.AppendRequest, cond *varve.AppendCondition) error {
			return postgres.AppendTaggedFunction(ctx, b, req, cond)
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			tag := "lock-order-" + uuid.NewString()
			holder, err := b.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback(context.Background())
			var key int64
			if err := holder.QueryRow(ctx, `SELECT hashtextextended('tag:' || $1, $2)`, tag, postgres.Seed(b)).Scan(&key); err != nil {
				t.Fatal(err)
			}
			if _, err := holder.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
				t.Fatal(err)
			}

			stream := "lockorder-" + uuid.NewString()
			req := varve.AppendRequest{Stream: stream, Category: "lockorder", Expected: varve.Any,
				Events: []varve.Event{{ID: varve.NewEventID(), Type: "Tagged", Data: []byte("{}"), Tags: []string{tag}}}}
			cond := &varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Types: []string{"NeverAppended-" + uuid.NewString()}}}}}
			done := make(chan error, 1)
			go func() { done <- p.append(ctx, req, cond) }()

			// The conditional append waits for the tag's lock.
			var pid int32
			for pid == 0 {
				err := b.Pool().QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
					AND classid = (($1::bigint >> 32) & 4294967295)::oid AND objid = ($1::bigint & 4294967295)::oid`, key).Scan(&pid)
				if err != nil && ctx.Err() == nil {
					select {
					case err := <-done:
						t.Fatalf("the append did not wait for the tag held elsewhere: %v", err)
					case <-time.After(10 * time.Millisecond):
					}
					continue
				}
				if ctx.Err() != nil {
					t.Fatal("the append never waited for the tag's lock")
				}
			}
			seed := postgres.Seed(b)
			var held int
			if err := b.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND granted AND objsubid = 2
				AND classid = ($2::bigint >> 32)::oid AND objid = ($2::bigint & 2147483647)::oid`, pid, seed).Scan(&held); err != nil {
				t.Fatal(err)
			}
			if held != 0 {
				t.Errorf("waiting for a tag, the conditional append holds the schema's writer lock")
			}
			other, cancelOther := context.WithTimeout(ctx, 10*time.Second)
			defer cancelOther()
			if _, err := b.Append(other, varve.AppendRequest{Stream: "lockorder-" + uuid.NewString(), Category: "lockorder", Expected: varve.NoStream,
				Events: []varve.Event{{ID: varve.NewEventID(), Type: "Plain", Data: []byte("{}")}}}); err != nil {
				t.Errorf("a plain append while the conditional one waits for a tag: %v", err)
			}

			if err := holder.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("the conditional append after the tag was released: %v", err)
			}
			if info, err := b.StreamInfo(ctx, stream); err != nil || info.Version != 1 {
				t.Fatalf("the conditional append's stream: %+v %v", info, err)
			}
		})
	}
}
