package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/projection"
)

func TestConfirms(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       bool
	}{
		{"projector", "projector\n", true},
		{"projector", "projector", true}, // a script's last line
		{"projector", "projector\r\n", true},
		{"projector", "  projector \n", true},
		{"projector", `"projector"` + "\n", true},
		{"projector", "no\n", false},
		{"projector", "\n", false},
		{"projector", "", false},
		{"projector", "projecto\n", false},
		{"  spaced  ", "  spaced  \n", true},
		{"  spaced  ", `"  spaced  "` + "\n", true},
		{"  spaced  ", "spaced\n", false},
		{"  spaced  ", " spaced \n", false},
		{"a\tb", "a\tb\n", true},
		{"a\tb", `a\tb` + "\n", true},
		{"a\tb", `"a\tb"` + "\n", true},
		{"x\r", `"x\r"` + "\n", true},
		{"x\r", "x\n", false},
		{`a\tb`, `a\tb` + "\n", true},
		{`a\tb`, "a\tb\n", false},
		{"say \"hi\"", `say "hi"` + "\n", true},
		{"say \"hi\"", `"say \"hi\""` + "\n", true},
	} {
		if got := confirms(c.line, c.name); got != c.want {
			t.Errorf("confirms(%q, %q) = %v, want %v", c.line, c.name, got, c.want)
		}
	}
}

// blanksStore makes a SQLite store with the checkpoint "  spaced  " and a
// projection "  p  " (version 1), names with blanks around them, and
// events after the start.
func blanksStore(t *testing.T) string {
	t.Helper()
	url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "blanks.db"))
	ctx := context.Background()
	s, err := open.Store(ctx, url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("Placed", []byte(`{}`)), varve.NewEvent("Paid", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	for _, cp := range []string{"  spaced  ", projection.CheckpointName("  p  ", 1)} {
		if err := s.Checkpoints().Save(ctx, cp, varve.Start); err != nil {
			t.Fatal(err)
		}
	}
	return url
}

// storeState is what the questions guard: the checkpoint of "  spaced  "
// and whether a rebuild of "  p  " was requested.
func storeState(t *testing.T, url string) (varve.Position, bool) {
	t.Helper()
	ctx := context.Background()
	s, err := open.Existing(ctx, url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, _, err := s.Checkpoints().Load(ctx, "  spaced  ")
	if err != nil {
		t.Fatal(err)
	}
	c, err := projection.ReadControl(ctx, s, "  p  ")
	if err != nil {
		t.Fatal(err)
	}
	_, rebuild := c.Rebuilds[1]
	return p, rebuild
}

// TestConfirmNamesWithBlanks: subs reset and projections rebuild show a
// name with blanks around it quoted, and take it typed as given or as
// quoted.
func TestConfirmNamesWithBlanks(t *testing.T) {
	old := confirmIn
	t.Cleanup(func() { confirmIn = old })
	for _, answer := range []string{"  spaced  \n", `"  spaced  "` + "\n"} {
		url := blanksStore(t)
		confirmIn = strings.NewReader(strings.ReplaceAll(answer, "spaced", "p"))
		r := runIn(t, "projections", "rebuild", "  p  ", "--store", url)
		if _, rebuild := storeState(t, url); r.code != exitOK || !rebuild || !strings.Contains(r.stderr, `Empty the read model of "  p  " version 1`) {
			t.Fatalf("rebuild answered %q: exit %d, rebuild requested %v\n%s%s", answer, r.code, rebuild, r.stdout, r.stderr)
		}
		confirmIn = strings.NewReader(answer)
		r = runIn(t, "subs", "reset", "  spaced  ", "--to", "end", "--store", url)
		if p, _ := storeState(t, url); r.code != exitOK || p == varve.Start || !strings.Contains(r.stderr, `checkpoint of "  spaced  "`) {
			t.Fatalf("reset answered %q: exit %d, checkpoint %s\n%s%s", answer, r.code, p, r.stdout, r.stderr)
		}
	}
	url := blanksStore(t)
	confirmIn = strings.NewReader("spaced\n")
	r := runIn(t, "subs", "reset", "  spaced  ", "--to", "end", "--store", url)
	if p, _ := storeState(t, url); r.code != exitFailed || p != varve.Start || !strings.Contains(r.stderr, "not confirmed") {
		t.Fatalf("reset answered without the blanks: exit %d, checkpoint %s\n%s", r.code, p, r.stderr)
	}
}

// stdinPipe is a stdin that never sends a line: it tells when a read
// starts and when it returns.
type stdinPipe struct {
	r                *io.PipeReader
	w                *io.PipeWriter
	reading, stopped chan struct{}
}

func newStdinPipe(t *testing.T) *stdinPipe {
	r, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	return &stdinPipe{r: r, w: w, reading: make(chan struct{}), stopped: make(chan struct{})}
}

func (p *stdinPipe) Read(b []byte) (int, error) {
	close(p.reading)
	defer close(p.stopped)
	return p.r.Read(b)
}

func (p *stdinPipe) Close() error { return p.r.Close() }

// TestConfirmInterrupted: an interrupt at the question of subs reset or
// projections rebuild ends the command at once (exit 130), nothing
// written, and the read of stdin ends with it.
func TestConfirmInterrupted(t *testing.T) {
	old := confirmIn
	t.Cleanup(func() { confirmIn = old })
	const deadline = 30 * time.Second
	for _, c := range []struct {
		name string
		args []string
	}{
		{"subs reset", []string{"subs", "reset", "  spaced  ", "--to", "end"}},
		{"projections rebuild", []string{"projections", "rebuild", "  p  "}},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := blanksStore(t)
			stdin := newStdinPipe(t)
			confirmIn = stdin
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var out, errOut syncBuf
			done := make(chan int, 1)
			go func() { done <- execute(ctx, append(c.args, "--store", url), &out, &errOut) }()
			select {
			case <-stdin.reading:
			case code := <-done:
				t.Fatalf("exit %d before the question:\n%s", code, errOut.String())
			case <-time.After(deadline):
				t.Fatal("the command never read its confirmation")
			}
			cancel(errInterrupted)
			select {
			case code := <-done:
				if code != exitInterrupted {
					t.Fatalf("exit %d after the interrupt, want %d\n%s", code, exitInterrupted, errOut.String())
				}
			case <-time.After(deadline):
				t.Fatalf("the command did not end within %v of the interrupt", deadline)
			}
			select {
			case <-stdin.stopped:
			case <-time.After(deadline):
				t.Fatal("the read of stdin outlives the command")
			}
			if p, rebuild := storeState(t, url); p != varve.Start || rebuild {
				t.Fatalf("an interrupted question wrote: checkpoint %s, rebuild requested %v", p, rebuild)
			}
			if strings.Contains(out.String(), "requested") || strings.Contains(out.String(), "->") {
				t.Fatalf("an interrupted question reports success:\n%s", out.String())
			}
		})
	}
}
