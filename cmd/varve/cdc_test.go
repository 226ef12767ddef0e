package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve/internal/pgcluster"
	"github.com/varve-go/varve/internal/testenv"
)

// TestCDCCommands creates a publication and a slot, lists and drops them on
// a private cluster with wal_level=logical, and checks the errors: a
// missing flag is a usage error, a replica server a failure that says what
// to change.
func TestCDCCommands(t *testing.T) {
	url := os.Getenv("VARVE_PG_LOGICAL_URL")
	if url == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		c, err := pgcluster.Start(ctx, pgcluster.Logical())
		cancel()
		if err != nil {
			if testenv.CI() {
				t.Fatalf("private PostgreSQL with wal_level=logical: %v", err)
			}
			t.Skipf("private PostgreSQL with wal_level=logical: %v", err)
		}
		t.Cleanup(func() { _ = c.Stop() })
		url = c.URL()
	}
	dir := t.TempDir()
	js := func(name string) string { return "--json=" + filepath.Join(dir, name) }

	if r := runIn(t, "cdc", "create", "--url", url, "--slot", "cli_cdc"); r.code != exitUsage {
		t.Errorf("create without --publication: exit %d, want %d", r.code, exitUsage)
	}
	r := runIn(t, "cdc", "create", "--url", url, "--slot", "cli_cdc", "--publication", "cli_cdc")
	if r.code != exitOK || !strings.Contains(r.stdout, "slot cli_cdc: created") {
		t.Fatalf("create: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runIn(t, "cdc", "create", "--url", url, "--slot", "cli_cdc", "--publication", "cli_cdc"); !strings.Contains(r.stdout, "slot cli_cdc: exists, kept") {
		t.Errorf("second create: %s%s", r.stdout, r.stderr)
	}
	r = runIn(t, "cdc", "ls", "--url", url, js("ls.json"), "--max-retained", "1000000000", "--max-lag", "1000000000")
	results, _ := r.doc.([]any)
	if r.code != exitOK || len(results) != 1 {
		t.Fatalf("ls: exit %d, results %v\n%s", r.code, results, r.stderr)
	}
	slot := shape(t, "a slot", results[0], []string{"name", "plugin", "database", "active", "restart_lsn", "confirmed_flush_lsn",
		"current_lsn", "lag_bytes", "retained_bytes", "wal_status"})
	if slot["name"] != "cli_cdc" || slot["plugin"] != "pgoutput" {
		t.Fatalf("ls: %v", slot)
	}
	noEnvelope(t, r.doc)
	// WAL written after the slot is WAL it retains and lags by.
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(context.Background(), `CREATE TABLE cli_cdc_wal (n int); INSERT INTO cli_cdc_wal SELECT generate_series(1, 100); DROP TABLE cli_cdc_wal`)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, bound := range []string{"--max-retained", "--max-lag"} {
		r := runIn(t, "cdc", "ls", "--url", url, bound, "0")
		if r.code != exitFailed || !strings.Contains(r.stderr, "cli_cdc: ") || !strings.Contains(r.stderr, "over "+bound+" 0") {
			t.Errorf("ls with a slot over %s 0: exit %d, want %d\n%s", bound, r.code, exitFailed, r.stderr)
		}
	}
	if r := runIn(t, "cdc", "drop", "--url", url, "--slot", "cli_cdc", "--publication", "cli_cdc"); r.code != exitOK {
		t.Fatalf("drop: exit %d\n%s", r.code, r.stderr)
	}
	r = runIn(t, "cdc", "ls", "--url", url, js("ls2.json"))
	if results, _ := r.doc.([]any); r.code != exitOK || results == nil || len(results) != 0 {
		t.Errorf("ls after drop: exit %d, results %v", r.code, results)
	}

	replica := testenv.PostgresURL(t)
	r = runIn(t, "cdc", "create", "--url", replica, "--slot", "never", "--publication", "never")
	if r.code != exitFailed || !strings.Contains(r.stderr, "wal_level = logical") {
		t.Errorf("create on a replica server: exit %d, stderr %q", r.code, r.stderr)
	}
}
