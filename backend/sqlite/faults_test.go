package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
)

// fill appends n events of size bytes each to stream, in appends of 50.
func fill(t *testing.T, b *sqlite.Backend, stream string, n, size int) {
	t.Helper()
	for n > 0 {
		k := min(n, 50)
		evs := make([]varve.Event, k)
		for i := range evs {
			evs[i] = varve.Event{ID: varve.NewEventID(), Type: "Fill", Data: bytes.Repeat([]byte{'x'}, size)}
		}
		if _, err := b.Append(context.Background(), varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: evs}); err != nil {
			t.Fatalf("fill %s: %v", stream, err)
		}
		n -= k
	}
}

func readAll(ctx context.Context, b *sqlite.Backend) (int, error) {
	n := 0
	var after varve.Position
	for {
		page, err := b.ReadAll(ctx, varve.AllQuery{After: after, Limit: 100}, nil)
		n += len(page)
		if err != nil || len(page) < 100 {
			return n, err
		}
		after = page[len(page)-1].Position
	}
}

func wantErrText(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: error %q does not say %q", what, err, p)
		}
	}
	t.Logf("%s: %v", what, err)
}

func TestNotAVarveDatabase(t *testing.T) {
	cases := []struct {
		name  string
		write func(t *testing.T, path string)
		says  []string
	}{
		{"text file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte("not a database\n"), 500), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"not a database", "left untouched"}},
		{"empty header page", func(t *testing.T, path string) {
			if err := os.WriteFile(path, make([]byte, 8192), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"not a database"}},
		{"another application's database", func(t *testing.T, path string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices (total) VALUES (12.5)"); err != nil {
				t.Fatal(err)
			}
		}, []string{"not a varve database"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := tempDB(t)
			tc.write(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b, err := sqlite.New(context.Background(), sqlite.Config{Path: path})
			if err == nil {
				b.Close()
			}
			wantErrText(t, "open", err, tc.says...)
			after, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(before, after) {
				t.Fatalf("the file changed (%d bytes before, %d after, %v)", len(before), len(after), err)
			}
		})
	}
}

// corruptDB writes a database with events and overwrites part of it with
// garbage, keeping the header page.
func corruptDB(t *testing.T) string {
	path := tempDB(t)
	b := open(t, sqlite.Config{Path: path})
	fill(t, b, "victim", 2000, 200)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 4096)
	for off := int64(8192); off < st.Size(); off += 5 * 4096 {
		if _, err := f.WriteAt(garbage[:min(len(garbage), int(st.Size()-off))], off); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestCorruptDatabase(t *testing.T) {
	t.Run("quick check at open", func(t *testing.T) {
		path := corruptDB(t)
		b, err := sqlite.New(context.Background(), sqlite.Config{Path: path, QuickCheck: true})
		if err == nil {
			b.Close()
		}
		wantErrText(t, "open with quick_check", err, "quick_check", "damaged")
	})
	t.Run("found by use", func(t *testing.T) {
		path := corruptDB(t)
		ctx := context.Background()
		b, err := sqlite.New(ctx, sqlite.Config{Path: path})
		if err != nil {
			wantErrText(t, "open", err, "malformed")
			return
		}
		defer b.Close()
		// Reads and writes fail with SQLite's diagnosis; none panics.
		var errs []error
		_, err = readAll(ctx, b)
		errs = append(errs, err)
		_, err = b.ReadStream(ctx, varve.StreamQuery{Stream: "victim", Limit: 5000}, nil)
		errs = append(errs, err)
		for i := range 20 {
			_, err = b.Append(ctx, varve.AppendRequest{Stream: fmt.Sprintf("s-%d", i), Expected: varve.Any,
				Events: []varve.Event{{ID: varve.NewEventID(), Type: "T"}}})
			errs = append(errs, err)
		}
		wantErrText(t, "use of a corrupt database", errors.Join(errs...), "malformed")
	})
}

func TestReadOnlyDirectory(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.db")
	b := open(t, sqlite.Config{Path: existing})
	fill(t, b, "s", 10, 10)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(existing)
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// Permission bits do not stop root; the immutable attribute does.
		if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
			t.Skipf("running as root and cannot make %s immutable (chattr +i: %v %s): no way to make a read-only directory", dir, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
	} else {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	}
	cases := []struct {
		name string
		path string
	}{
		{"new database", filepath.Join(dir, "new.db")},
		{"existing database", existing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := sqlite.New(context.Background(), sqlite.Config{Path: tc.path})
			if err == nil {
				b.Close()
			}
			wantErrText(t, "open", err, tc.path, "must be writable")
		})
	}
	after, err := os.ReadFile(existing)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the existing database changed: %v", err)
	}
}

func TestFullDisk(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	const maxSize = 256 << 10
	b := open(t, sqlite.Config{Path: path, MaxSize: maxSize})
	acked := map[string]int{}
	var full error
	for i := 0; full == nil; i++ {
		stream := fmt.Sprintf("s-%d", i%7)
		evs := make([]varve.Event, 1+i%10)
		for j := range evs {
			evs[j] = varve.Event{ID: varve.NewEventID(), Type: "T", Data: bytes.Repeat([]byte{'d'}, 500)}
		}
		_, err := b.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: evs})
		switch {
		case err == nil:
			acked[stream] += len(evs)
		case strings.Contains(err.Error(), "full"):
			full = err
		default:
			t.Fatalf("append %d: %v", i, err)
		}
		if i > 10_000 {
			t.Fatalf("no error after %d appends to a database capped at %d bytes", i, maxSize)
		}
	}
	wantErrText(t, "append to a full database", full, "database or disk is full")

	// Concurrent small appends, one large one: the large one fails on its
	// own, whatever shares its group commit.
	var wg sync.WaitGroup
	var mu sync.Mutex
	results := map[string]error{}
	for i := range 6 {
		wg.Go(func() {
			stream := fmt.Sprintf("batch-%d", i)
			n := 1
			if i == 3 {
				n = 400
			}
			evs := make([]varve.Event, n)
			for j := range evs {
				evs[j] = varve.Event{ID: varve.NewEventID(), Type: "T", Data: bytes.Repeat([]byte{'b'}, 500)}
			}
			_, err := b.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.NoStream, Events: evs})
			mu.Lock()
			results[stream] = err
			if err == nil {
				acked[stream] = n
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := results["batch-3"]; err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("the large append into a full database: %v", err)
	}
	t.Logf("small appends next to the large one: %v", results)

	check := func(b *sqlite.Backend) {
		t.Helper()
		total := 0
		for stream, n := range acked {
			evs, err := b.ReadStream(ctx, varve.StreamQuery{Stream: stream, Limit: 100_000}, nil)
			if err != nil || len(evs) != n {
				t.Fatalf("stream %s: %d events, %d acknowledged, %v", stream, len(evs), n, err)
			}
			total += n
		}
		if n, err := readAll(ctx, b); err != nil || n != total {
			t.Fatalf("$all: %d events, %d acknowledged, %v", n, total, err)
		}
	}
	check(b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	integrityCheck(t, path)

	// Without the cap the same file takes writes again.
	b = open(t, sqlite.Config{Path: path})
	check(b)
	fill(t, b, "after", 100, 500)
	acked["after"] = 100
	check(b)
}
