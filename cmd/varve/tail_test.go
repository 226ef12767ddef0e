package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
)

// TestTailFollowsAnotherStore: "all tail" and "streams tail -f" on the
// SQLite default print the appends of another Store on the same file (as
// another process would make them), each made after the previous one was
// printed, so while the command waits on Store.Watch.
func TestTailFollowsAnotherStore(t *testing.T) {
	const follow = 5
	cases := []struct {
		name string
		args func(url string) []string
	}{
		{"all tail", func(url string) []string {
			return []string{"all", "tail", "--after", "start", "--count", fmt.Sprint(1 + follow), "--json", "--store", url}
		}},
		{"streams tail -f", func(url string) []string {
			return []string{"streams", "tail", "s", "-n", "1", "-f", "--count", fmt.Sprint(1 + follow), "--json", "--store", url}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "tail.db"))
			ctx := context.Background()
			other, err := open.Store(ctx, url, varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if _, err := other.Append(ctx, "s", varve.NoStream, varve.NewEvent("Seed", nil)); err != nil {
				t.Fatal(err)
			}

			// Without wake-ups the command would wait for ever: the deadline
			// ends it, and the test fails on the events it did not print.
			runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			pr, pw := io.Pipe()
			code := make(chan int, 1)
			var stderr syncBuffer
			var wg sync.WaitGroup
			wg.Go(func() {
				code <- execute(runCtx, tc.args(url), pw, &stderr)
				_ = pw.Close()
			})
			defer func() {
				cancel()
				_ = pr.Close() // a write blocked on a test that gave up fails
				wg.Wait()
			}()
			lines := bufio.NewScanner(pr)
			for i := 0; i <= follow; i++ {
				if !lines.Scan() {
					t.Fatalf("the command printed %d of %d events (exit %d): %s", i, 1+follow, <-code, stderr.String())
				}
				var e struct {
					Stream  string `json:"stream"`
					Version int    `json:"version"`
				}
				if err := json.Unmarshal(lines.Bytes(), &e); err != nil || e.Stream != "s" || e.Version != i+1 {
					t.Fatalf("line %d: %s (%v)", i, lines.Bytes(), err)
				}
				if i < follow {
					if _, err := other.Append(ctx, "s", varve.Exact(varve.Version(i+1)), varve.NewEvent("Followed", nil)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if c := <-code; c != exitOK {
				t.Fatalf("exit %d: %s", c, stderr.String())
			}
		})
	}
}
