package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/varve-go/varve"
)

func openTx(t *testing.T, path string) *Backend {
	t.Helper()
	b, err := New(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func countRows(t *testing.T, b *Backend, table string) (n int) {
	t.Helper()
	err := b.ReadTx(context.Background(), func(tx *sql.Tx) error {
		return tx.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var errHandler = errors.New("handler failed")

// TestWriteTxInGroupCommit queues WriteTx calls that succeed, fail on
// their own, panic or spoil the transaction, together with an append, into
// one group commit behind a WriteTx that holds the writer: each caller gets
// its own outcome, the failures leave no trace, and the rest commit.
func TestWriteTxInGroupCommit(t *testing.T) {
	insert := func(v string) func(*sql.Tx) error {
		return func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO rm (v) VALUES (?)`, v)
			return err
		}
	}
	cases := []struct {
		name string
		fn   func(*sql.Tx) error
		want error  // nil: success
		rows string // the row the case leaves when it commits
	}{
		{"writes and a checkpoint", func(tx *sql.Tx) error {
			if err := insert("ok")(tx); err != nil {
				return err
			}
			moved, err := AdvanceCheckpoint(context.Background(), tx, "rm", varve.Position{Seq: 7})
			if err == nil && !moved {
				err = errors.New("a new checkpoint did not move")
			}
			return err
		}, nil, "ok"},
		{"handler error", func(tx *sql.Tx) error {
			if err := insert("failed")(tx); err != nil {
				return err
			}
			return errHandler
		}, errHandler, ""},
		{"panic", func(tx *sql.Tx) error {
			if err := insert("panicked")(tx); err != nil {
				return err
			}
			panic("boom")
		}, errAny, ""},
		{"bad statement", func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO no_such_table VALUES (1)`)
			return err
		}, errAny, ""},
		{"spoils the transaction", func(tx *sql.Tx) error {
			if err := insert("rolled back")(tx); err != nil {
				return err
			}
			_, err := tx.Exec(`ROLLBACK`)
			return err
		}, errAny, ""},
		{"second writes", insert("ok2"), nil, "ok2"},
	}
	ctx := context.Background()
	b := openTx(t, filepath.Join(t.TempDir(), "tx.db"))
	if err := b.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`CREATE TABLE rm (v TEXT NOT NULL)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	hold, held := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := b.WriteTx(ctx, func(*sql.Tx) error { close(held); <-hold; return nil }); err != nil {
			t.Error(err)
		}
	})
	<-held
	errs := make([]error, len(cases))
	for i, tc := range cases {
		wg.Go(func() { errs[i] = b.WriteTx(ctx, tc.fn) })
	}
	var appendErr error
	wg.Go(func() {
		_, appendErr = b.Append(ctx, varve.AppendRequest{Stream: "s", Expected: varve.NoStream, Events: []varve.Event{{ID: varve.NewEventID(), Type: "E"}}})
	})
	for len(b.queue) < len(cases)+1 {
		runtime.Gosched()
	}
	close(hold)
	wg.Wait()
	t.Logf("errors: %q", errs)
	if appendErr != nil {
		t.Errorf("the append of the group: %v", appendErr)
	}
	want := 0
	for i, tc := range cases {
		switch {
		case tc.want == nil && errs[i] != nil:
			t.Errorf("%s: %v", tc.name, errs[i])
		case tc.want == errAny && errs[i] == nil:
			t.Errorf("%s: no error", tc.name)
		case tc.want != nil && tc.want != errAny && !errors.Is(errs[i], tc.want):
			t.Errorf("%s: got %v, want %v", tc.name, errs[i], tc.want)
		}
		if tc.rows != "" {
			want++
			var n int
			if err := b.ReadTx(ctx, func(tx *sql.Tx) error {
				return tx.QueryRow(`SELECT count(*) FROM rm WHERE v = ?`, tc.rows).Scan(&n)
			}); err != nil || n != 1 {
				t.Errorf("%s: %d rows of %q (%v)", tc.name, n, tc.rows, err)
			}
		}
	}
	if n := countRows(t, b, "rm"); n != want {
		t.Errorf("%d rows in the read model, want %d", n, want)
	}
	if info, err := b.StreamInfo(ctx, "s"); err != nil || info.Version != 1 {
		t.Errorf("the append of the group: %+v, %v", info, err)
	}
	if pos, ok, err := b.LoadCheckpoint(ctx, "rm"); err != nil || !ok || pos.Seq != 7 {
		t.Errorf("checkpoint %v %v %v, want 7", pos, ok, err)
	}
}

var errAny = errors.New("any error")

// TestAdvanceCheckpoint: the checkpoint of a WriteTx only moves forward.
func TestAdvanceCheckpoint(t *testing.T) {
	ctx := context.Background()
	b := openTx(t, Memory)
	cases := []struct {
		name  string
		pos   varve.Position
		moved bool
		after uint64
	}{
		{"new", varve.Position{Seq: 5}, true, 5},
		{"same", varve.Position{Seq: 5}, false, 5},
		{"back", varve.Position{Seq: 3}, false, 5},
		{"forward", varve.Position{Seq: 9}, true, 9},
	}
	for _, tc := range cases {
		var moved bool
		err := b.WriteTx(ctx, func(tx *sql.Tx) (err error) {
			moved, err = AdvanceCheckpoint(ctx, tx, "cp", tc.pos)
			return err
		})
		if err != nil || moved != tc.moved {
			t.Fatalf("%s: moved %v, %v; want %v", tc.name, moved, err, tc.moved)
		}
		if pos, _, err := b.LoadCheckpoint(ctx, "cp"); err != nil || pos.Seq != tc.after {
			t.Fatalf("%s: checkpoint %v (%v), want %d", tc.name, pos, err, tc.after)
		}
	}
	err := b.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := AdvanceCheckpoint(ctx, tx, "", varve.Position{Seq: 1})
		return err
	})
	if !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("empty name: %v", err)
	}
}

// TestWriteTxContext: a cancelled context stops the statements of fn
// before they run, a closed backend refuses WriteTx and ReadTx, and a nil
// func is bad input.
func TestWriteTxContext(t *testing.T) {
	ctx := context.Background()
	b := openTx(t, filepath.Join(t.TempDir(), "tx.db"))
	if err := b.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`CREATE TABLE rm (v TEXT)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	err := b.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(cctx, `INSERT INTO rm VALUES ('before')`); err != nil {
			return err
		}
		cancel()
		_, err := tx.ExecContext(cctx, `INSERT INTO rm VALUES ('after')`)
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if n := countRows(t, b, "rm"); n != 0 {
		t.Fatalf("%d rows after a cancelled WriteTx", n)
	}
	if err := b.WriteTx(ctx, nil); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("nil func: %v", err)
	}
	if err := b.ReadTx(ctx, nil); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("nil func: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	nop := func(*sql.Tx) error { return nil }
	if err := b.WriteTx(ctx, nop); !errors.Is(err, varve.ErrClosed) {
		t.Fatalf("WriteTx after Close: %v", err)
	}
	if err := b.ReadTx(ctx, nop); !errors.Is(err, varve.ErrClosed) {
		t.Fatalf("ReadTx after Close: %v", err)
	}
}
