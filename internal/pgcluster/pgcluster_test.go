package pgcluster_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/varve-go/varve/internal/pgcluster"
)

var shared pgcluster.Shared

func TestMain(m *testing.M) { os.Exit(pgcluster.Main(m, &shared, pgcluster.Logical(), nil)) }

func setting(t *testing.T, url, name string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
		t.Fatalf("setting %s: %v", name, err)
	}
	return v
}

func TestLogicalCluster(t *testing.T) {
	url := shared.URL(t)
	if got := setting(t, url, "wal_level"); got != "logical" {
		t.Fatalf("wal_level = %q, want logical", got)
	}
	if shared.Cluster == nil {
		t.Skip("VARVE_PG_LOGICAL_URL names an outside server: no restart test")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS pgcluster_restart (v int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO pgcluster_restart VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	for _, mode := range []string{"fast", "immediate"} {
		if err := shared.Cluster.Restart(ctx, mode); err != nil {
			t.Fatalf("restart %s: %v", mode, err)
		}
		if got := setting(t, url, "port"); got == "" {
			t.Fatalf("after %s restart: no port", mode)
		}
	}
	conn, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pgcluster_restart").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after restarts: %d rows, %v; want 1", n, err)
	}
}

func TestStandby(t *testing.T) {
	url := shared.URL(t)
	if shared.Cluster == nil {
		t.Skip("VARVE_PG_LOGICAL_URL names an outside server: no standby of it")
	}
	ctx := context.Background()
	standby, err := shared.Cluster.StartStandby(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Stop()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE pgcluster_standby AS SELECT 42 AS v"); err != nil {
		t.Fatal(err)
	}
	if got := setting(t, standby.URL(), "port"); got != fmt.Sprint(standby.Port()) || standby.Port() == shared.Cluster.Port() {
		t.Fatalf("standby port %s (Port %d), primary %d", got, standby.Port(), shared.Cluster.Port())
	}
	sc, err := pgx.Connect(ctx, standby.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(ctx)
	var recovery bool
	if err := sc.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovery); err != nil || !recovery {
		t.Fatalf("standby in recovery: %v, %v", recovery, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var v int
		err := sc.QueryRow(ctx, "SELECT v FROM pgcluster_standby").Scan(&v)
		if err == nil && v == 42 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the primary's table did not reach the standby within 30s: %d, %v", v, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := sc.Exec(ctx, "CREATE TABLE refused (v int)"); err == nil {
		t.Fatal("the standby took a write")
	}
}
