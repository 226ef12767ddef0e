package pgcdc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve/cdc/pgcdc"
	"github.com/varve-go/varve/internal/testenv"
)

func TestWALLevelReplicaIsAClearError(t *testing.T) {
	url := testenv.PostgresURL(t) // the shared server runs wal_level=replica
	_, err := pgcdc.Start(context.Background(), pgcdc.Config{ConnString: url, Slot: "never_created", Publication: "never_created"})
	if !errors.Is(err, pgcdc.ErrWALLevel) {
		t.Skipf("the shared server accepts logical replication (err %v): nothing to check", err)
	}
	for _, want := range []string{"wal_level=replica", "wal_level = logical", "restart"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestChangeKinds(t *testing.T) {
	f := newFixture(t, `CREATE TABLE kinds (id int PRIMARY KEY, name text, big text)`,
		`ALTER TABLE kinds ALTER big SET STORAGE EXTERNAL`) // out of line, uncompressed
	s := f.start(f.config("kinds"))
	big := make([]byte, 100_000) // TOAST-ed: stored out of line
	for i := range big {
		big[i] = 'a' + byte(i*7919%26)
	}
	f.exec(`INSERT INTO kinds VALUES (1, 'one', $1), (2, 'two', NULL)`, string(big))
	f.exec(`UPDATE kinds SET name = 'uno' WHERE id = 1`)
	f.exec(`UPDATE kinds SET id = 3 WHERE id = 2`)
	f.exec(`DELETE FROM kinds WHERE id = 3`)
	f.exec(`TRUNCATE kinds`)

	tx := next(t, s)
	if len(tx.Changes) != 2 || tx.Changes[0].Op != pgcdc.Insert || tx.Changes[1].Op != pgcdc.Insert {
		t.Fatalf("insert tx: %+v", tx.Changes)
	}
	if got := tx.Changes[0].New[2].Value; got != string(big) {
		t.Errorf("inserted big value: %d bytes, want %d", len(got.(string)), len(big))
	}
	if v := tx.Changes[1].New[2]; v.Value != nil || v.Unchanged {
		t.Errorf("NULL decoded as %+v", v)
	}
	if tx.CommitLSN == 0 || tx.EndLSN <= tx.CommitLSN || tx.CommitTime.IsZero() {
		t.Errorf("envelope: commit %s end %s time %v", tx.CommitLSN, tx.EndLSN, tx.CommitTime)
	}

	tx = next(t, s)
	c := tx.Changes[0]
	if c.Op != pgcdc.Update || c.New[1].Value != "uno" || !c.New[2].Unchanged || c.New[2].Value != nil || c.Old != nil {
		t.Errorf("update leaving the TOAST-ed value: op %s name %v big unchanged=%v, value is nil=%v, old %v",
			c.Op, c.New[1].Value, c.New[2].Unchanged, c.New[2].Value == nil, c.Old)
	}
	if k := c.Key(); len(k) != 1 || k[0].Name != "id" || k[0].Value != int32(1) {
		t.Errorf("update key %+v", k)
	}

	tx = next(t, s)
	c = tx.Changes[0]
	if c.Op != pgcdc.Update || c.Old == nil || c.Old[0].Value != int32(2) || c.New[0].Value != int32(3) {
		t.Errorf("update of the key: %+v", c)
	}

	tx = next(t, s)
	c = tx.Changes[0]
	if c.Op != pgcdc.Delete || c.New != nil || c.Key()[0].Value != int32(3) {
		t.Errorf("delete: %+v", c)
	}

	tx = next(t, s)
	c = tx.Changes[0]
	if c.Op != pgcdc.Truncate || c.Table != "kinds" || c.Schema != f.name {
		t.Errorf("truncate: %+v", c)
	}
	if err := s.Ack(tx); err != nil {
		t.Fatal(err)
	}
}

func TestDroppedPublicationEndsTheStream(t *testing.T) {
	f := newFixture(t, "CREATE TABLE t (id int PRIMARY KEY)")
	s := f.start(f.config("t"))
	f.exec("INSERT INTO t VALUES (1)")
	next(t, s)
	if err := pgcdc.DropPublication(context.Background(), f.conn, f.name); err != nil {
		t.Fatal(err)
	}
	f.exec("INSERT INTO t VALUES (2)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.Next(ctx)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "publication") {
		t.Fatalf("Next after the publication was dropped: %v, want the server's error", err)
	}
}
