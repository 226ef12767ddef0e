package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/open"
)

// result is what a run of the CLI left: its exit code, output and the
// JSON it wrote, if any: doc as decoded, env when it is an object (the
// envelope of a lab command, or an operator command's object).
type result struct {
	code           int
	stdout, stderr string
	doc            any
	env            map[string]any
}

// runIn runs the CLI in this process. With a "--json=" argument it reads
// the JSON back.
func runIn(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := execute(context.Background(), args, &out, &errOut)
	r := result{code: code, stdout: out.String(), stderr: errOut.String(), doc: readJSON(t, args)}
	r.env, _ = r.doc.(map[string]any)
	return r
}

func readJSON(t *testing.T, args []string) any {
	t.Helper()
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "--json="); ok {
			b, err := os.ReadFile(name)
			if err != nil {
				return nil
			}
			var doc any
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatalf("%s is not JSON: %v\n%s", name, err, b)
			}
			return doc
		}
	}
	return nil
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary builds the CLI once per test process, for the tests that signal a
// child process.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "varve-cli-test-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "varve")
		goTool, err := exec.LookPath("go")
		if err != nil {
			binErr = err
			return
		}
		out, err := exec.Command(goTool, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	// A developer's $VARVE_STORE would answer for every command these
	// tests run without --store; the tests that want it set it.
	os.Unsetenv("VARVE_STORE")
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// interrupt starts the built CLI with args, waits until its stderr shows
// ready (or for a second when ready is empty), sends SIGINT and returns
// what it did.
func interrupt(t *testing.T, ready string, args ...string) result {
	t.Helper()
	return signalRun(t, syscall.SIGINT, ready, args...)
}

// signalRun is interrupt with another signal.
func signalRun(t *testing.T, sig syscall.Signal, ready string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	var out bytes.Buffer
	errOut := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &out, errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	if ready == "" {
		time.Sleep(time.Second)
	}
	for ready != "" && !strings.Contains(errOut.String(), ready) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("varve %s: no %q on stderr within 30s:\n%s", strings.Join(args, " "), ready, errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(stopGrace + 5*time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("varve %s did not end after SIGINT:\n%s", strings.Join(args, " "), errOut.String())
	}
	r := result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String(), doc: readJSON(t, args)}
	r.env, _ = r.doc.(map[string]any)
	return r
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// blackHole listens on loopback and accepts connections that it never
// answers: a server that hangs.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// refusedAddr is a loopback port nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// parkedStore makes a SQLite store in dir whose subscription "hooks" has
// parked events, and returns its URL.
func parkedStore(t *testing.T, dir string) string {
	t.Helper()
	url := "sqlite://" + filepath.ToSlash(filepath.Join(dir, "parked.db"))
	ctx := context.Background()
	store, err := open.Store(ctx, url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var parked []delivery.ParkedEvent
	for _, stream := range []string{"a", "a", "b"} {
		res, err := store.Append(ctx, stream, varve.Any, varve.Event{Type: "T", Data: []byte(`{"n":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		parked = append(parked, delivery.ParkedEvent{Subscription: "hooks", Stream: stream, Version: res.LastVersion,
			Position: res.Position, Type: "T", Reason: delivery.ReasonRejected, ParkedAt: time.Now()})
	}
	for e, err := range store.ReadAll(ctx, varve.Start) {
		if err != nil {
			t.Fatal(err)
		}
		for i := range parked {
			if parked[i].Position == e.Position {
				parked[i].EventID = e.ID
			}
		}
	}
	if _, err := delivery.NewParked(store, "hooks").Park(ctx, parked...); err != nil {
		t.Fatal(err)
	}
	return url
}

// envelopeKeys are the keys of the JSON envelope of every command.
var envelopeKeys = []string{"schema_version", "command", "varve_version", "started", "finished", "elapsed_ns", "interrupted",
	"exit_code", "config", "stores", "machine", "results", "checks", "errors"}

// checkEnvelope asserts the envelope's keys, its exit code and interrupted
// flag, and that its latencies have the one shape.
func checkEnvelope(t *testing.T, r result, command string) {
	t.Helper()
	if r.env == nil {
		t.Fatalf("no JSON envelope (exit %d)\nstderr: %s", r.code, r.stderr)
	}
	for _, k := range envelopeKeys {
		if _, ok := r.env[k]; !ok {
			t.Fatalf("envelope lacks %q: %v", k, r.env)
		}
	}
	if r.env["command"] != command || r.env["schema_version"] != float64(1) {
		t.Fatalf("envelope command %v schema %v, want %s 1", r.env["command"], r.env["schema_version"], command)
	}
	if got := r.env["exit_code"]; got != float64(r.code) {
		t.Fatalf("envelope exit_code %v, process exit code %d", got, r.code)
	}
	if got := r.env["interrupted"]; got != (r.code == exitInterrupted) {
		t.Fatalf("envelope interrupted %v with exit code %d", got, r.code)
	}
	if _, ok := r.env["elapsed_ns"].(float64); !ok {
		t.Fatalf("elapsed_ns is not a number: %v", r.env["elapsed_ns"])
	}
	rows, _ := r.env["results"].([]any)
	for _, row := range rows {
		m := row.(map[string]any)
		lat, ok := m["latency"].(map[string]any)
		if !ok {
			continue // parked events are not measurements
		}
		for _, k := range []string{"samples", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns", "few_samples"} {
			if _, ok := lat[k]; !ok {
				t.Fatalf("a row's latency lacks %q: %v", k, lat)
			}
		}
	}
}
