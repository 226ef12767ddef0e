package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/sqlite"
)

// inlineCounts is the inline projection of the tests and benchmarks: a
// row per stream with its events, last version and last position.
func inlineCounts(calls *atomic.Int64) sqlite.InlineFunc {
	return func(ctx context.Context, tx *sql.Tx, evs []varve.RecordedEvent) error {
		calls.Add(1)
		for _, e := range evs {
			if e.Type == backendtest.PoisonType {
				return backendtest.ErrPoison
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO inline_rm (stream, n, last, pos) VALUES (?1, 1, ?2, ?3)
ON CONFLICT (stream) DO UPDATE SET n = n + 1, last = excluded.last, pos = excluded.pos`, e.Stream, int64(e.Version), int64(e.Position.Seq)); err != nil {
				return err
			}
		}
		return nil
	}
}

func openInline(t testing.TB, hook sqlite.InlineFunc) (*varve.Store, *sqlite.Backend) {
	t.Helper()
	b, err := sqlite.New(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "inline.db"), Synchronous: sqlite.SyncNormal, Inline: hook})
	if err != nil {
		t.Fatal(err)
	}
	err = b.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`CREATE TABLE inline_rm (stream TEXT PRIMARY KEY, n INTEGER NOT NULL, last INTEGER NOT NULL, pos INTEGER NOT NULL)`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, b
}

func TestInline(t *testing.T) {
	var calls atomic.Int64
	s, b := openInline(t, inlineCounts(&calls))
	backendtest.Inline(t, s, backendtest.InlineModel{
		Calls: calls.Load,
		Read: func(t testing.TB, prefix string) map[string]backendtest.InlineRow {
			t.Helper()
			rows := map[string]backendtest.InlineRow{}
			err := b.ReadTx(context.Background(), func(tx *sql.Tx) error {
				r, err := tx.Query(`SELECT stream, n, last, pos FROM inline_rm WHERE substr(stream, 1, length(?1)) = ?1`, prefix)
				if err != nil {
					return err
				}
				defer r.Close()
				for r.Next() {
					var st string
					var n, last, pos int64
					if err := r.Scan(&st, &n, &last, &pos); err != nil {
						return err
					}
					rows[st] = backendtest.InlineRow{N: n, Last: varve.Version(last), Pos: varve.Position{Seq: uint64(pos)}}
				}
				return r.Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			return rows
		},
	})
}
