package shred_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/shred"
)

func master(t testing.TB, id string) shred.MasterKey {
	t.Helper()
	m, err := shred.NewMasterKey(id, bytes.Repeat([]byte{byte(len(id))}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// open returns a store over b with a Shredder as its opener.
func open(t testing.TB, b varve.Backend, cfg shred.Config) (*varve.Store, *shred.Shredder) {
	t.Helper()
	sh, err := shred.New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := varve.New(b, varve.Config{Opener: sh})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, sh
}

func readStream(t testing.TB, s *varve.Store, stream string, opts ...varve.StreamOption) []varve.RecordedEvent {
	t.Helper()
	var out []varve.RecordedEvent
	for e, err := range s.ReadStream(context.Background(), stream, opts...) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestSealOpenErase(t *testing.T) {
	ctx := context.Background()
	s, sh := open(t, memory.New(), shred.Config{Master: master(t, "m1")})
	plain := []byte(`{"name":"Ada Lovelace","email":"ada@example.com"}`)
	alice, err := sh.Seal(ctx, "user-1", varve.NewEvent("UserRegistered", plain))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(alice.Data, []byte("Ada")) || !shred.IsSealed(alice.Data) || shred.Subject(alice.Data) != "user-1" {
		t.Fatalf("sealed data: %q", alice.Data)
	}
	fields, err := sh.SealFields(ctx, "user-1", varve.NewEvent("EmailChanged", []byte(`{"id":7,"email":"ada@new.example","note":{"a":[1,2]}}`)), "email", "note", "absent")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(fields.Data, []byte("ada@new")) || !bytes.HasPrefix(fields.Data, []byte(`{"id":7,"email":"varve-shred:1:`)) {
		t.Fatalf("sealed fields: %s", fields.Data)
	}
	bob, err := sh.Seal(ctx, "user-2", varve.NewEvent("UserRegistered", []byte(`{"name":"Bob"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "user-1", varve.NoStream, alice, fields, varve.NewEvent("Plain", []byte(`{"x":1}`))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "user-2", varve.NoStream, bob); err != nil {
		t.Fatal(err)
	}

	evs := readStream(t, s, "user-1")
	if string(evs[0].Data) != string(plain) || string(evs[1].Data) != `{"id":7,"email":"ada@new.example","note":{"a":[1,2]}}` || string(evs[2].Data) != `{"x":1}` {
		t.Fatalf("opened: %s | %s | %s", evs[0].Data, evs[1].Data, evs[2].Data)
	}
	if raw := readStream(t, s, "user-1", varve.Sealed()); !shred.IsSealed(raw[0].Data) || !shred.IsSealed(raw[1].Data) {
		t.Fatal("a sealed read opened the events")
	}

	r, err := sh.Erase(ctx, s, "user-1", shred.EraseOptions{Count: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Counted || r.Events != 2 || len(r.Streams) != 1 || r.Streams[0] != "user-1" || r.Subject != "user-1" || r.Master != "m1" {
		t.Fatalf("report: %+v", r)
	}
	evs = readStream(t, s, "user-1")
	if subj, ok := shred.Erased(evs[0].Data); !ok || subj != "user-1" {
		t.Fatalf("erased payload: %s", evs[0].Data)
	}
	// Erased fields read as null, so the document decodes into its type.
	var doc struct {
		ID    int    `json:"id"`
		Email string `json:"email"`
		Note  struct {
			A []int `json:"a"`
		} `json:"note"`
	}
	if err := json.Unmarshal(evs[1].Data, &doc); err != nil || doc.ID != 7 || doc.Email != "" || doc.Note.A != nil {
		t.Fatalf("erased fields: %s %+v %v", evs[1].Data, doc, err)
	}
	if subj, ok := shred.Erased(evs[1].Data); !ok || subj != "user-1" || !bytes.Contains(evs[1].Data, []byte(`"email":null,"note":null`)) {
		t.Fatalf("erased fields: %s", evs[1].Data)
	}
	if string(evs[2].Data) != `{"x":1}` || evs[0].Version != 1 || evs[2].Version != 3 {
		t.Fatalf("the rest of the stream: %+v", evs)
	}
	if got := readStream(t, s, "user-2"); string(got[0].Data) != `{"name":"Bob"}` {
		t.Fatalf("another subject: %s", got[0].Data)
	}

	// The report is in the erasure stream.
	var found bool
	for e, err := range s.ReadStream(ctx, shred.ErasureStream) {
		if err != nil {
			t.Fatal(err)
		}
		if rep, ok := shred.ParseErasure(e); ok && rep.Key == r.Key && rep.Events == 2 {
			found = true
		}
	}
	if !found {
		t.Fatal("no report in the erasure stream")
	}
	if _, err := sh.Erase(ctx, s, "user-1", shred.EraseOptions{}); !errors.Is(err, shred.ErrNothingToErase) {
		t.Fatalf("a second erasure: %v", err)
	}

	// A subject keyed again gets a new key; its old data stays erased.
	again, err := sh.Seal(ctx, "user-1", varve.NewEvent("UserRegistered", []byte(`{"name":"Ada again"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "user-1", varve.Any, again); err != nil {
		t.Fatal(err)
	}
	evs = readStream(t, s, "user-1")
	if _, ok := shred.Erased(evs[0].Data); !ok || string(evs[3].Data) != `{"name":"Ada again"}` {
		t.Fatalf("after new key: %s | %s", evs[0].Data, evs[3].Data)
	}
}

// TestEraseReachesOtherProcesses: a second Shredder (another process) that
// had the key cached stops opening the data within its cache's TTL.
func TestEraseReachesOtherProcesses(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	s1, sh1 := open(t, b, shred.Config{Master: master(t, "m1")})
	sh2, err := shred.New(b, shred.Config{Master: master(t, "m1"), CacheTTL: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := sh1.Seal(ctx, "u", varve.NewEvent("T", []byte("secret")))
	if _, err := s1.Append(ctx, "s-1", varve.NoStream, ev); err != nil {
		t.Fatal(err)
	}
	raw := readStream(t, s1, "s-1", varve.Sealed())
	got, err := sh2.OpenBytes(ctx, raw[0].Data)
	if err != nil || string(got) != "secret" {
		t.Fatalf("second process before: %q %v", got, err)
	}
	if _, err := sh1.Erase(ctx, s1, "u", shred.EraseOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := sh2.OpenBytes(ctx, raw[0].Data)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := shred.Erased(got); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other process still opens the data a minute after the erasure")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConcurrentSealers: racing first uses of a subject agree on one key,
// so every event they sealed opens.
func TestConcurrentSealers(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	s, _ := open(t, b, shred.Config{Master: master(t, "m1")})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			sh, err := shred.New(b, shred.Config{Master: master(t, "m1")})
			if err != nil {
				t.Error(err)
				return
			}
			ev, err := sh.Seal(ctx, "racer", varve.NewEvent("T", fmt.Appendf(nil, "v%d", i)))
			if err == nil {
				_, err = s.Append(ctx, "race-1", varve.Any, ev)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, e := range readStream(t, s, "race-1") {
		if !bytes.HasPrefix(e.Data, []byte("v")) {
			t.Fatalf("an event of a racing sealer does not open: %q", e.Data)
		}
	}
}

func TestRotate(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	m1, m2 := master(t, "m1"), master(t, "m22")
	s, sh := open(t, b, shred.Config{Master: m1})
	for i := range 5 {
		ev, err := sh.Seal(ctx, fmt.Sprintf("u%d", i), varve.NewEvent("T", fmt.Appendf(nil, "p%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, "rot-1", varve.Any, ev); err != nil {
			t.Fatal(err)
		}
	}
	raw := readStream(t, s, "rot-1", varve.Sealed())
	onlyNew, err := shred.New(b, shred.Config{Master: m2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onlyNew.OpenBytes(ctx, raw[0].Data); !errors.Is(err, shred.ErrMasterKey) {
		t.Fatalf("before the rotation, the new master alone: %v", err)
	}
	rot, err := shred.New(b, shred.Config{Master: m2, Previous: []shred.MasterKey{m1}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rot.Rotate(ctx)
	if err != nil || r.Rewrapped != 5 || r.Current != 0 {
		t.Fatalf("rotate: %+v %v", r, err)
	}
	if r, err := rot.Rotate(ctx); err != nil || r.Rewrapped != 0 || r.Current != 5 {
		t.Fatalf("second rotate: %+v %v", r, err)
	}
	after, err := shred.New(b, shred.Config{Master: m2})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range raw {
		got, err := after.OpenBytes(ctx, e.Data)
		if err != nil || string(got) != fmt.Sprintf("p%d", i) {
			t.Fatalf("after the rotation, event %d: %q %v", i, got, err)
		}
	}
	oldOnly, _ := shred.New(b, shred.Config{Master: m1})
	if _, err := oldOnly.OpenBytes(ctx, raw[0].Data); !errors.Is(err, shred.ErrMasterKey) {
		t.Fatalf("after the rotation, the old master alone: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	s, sh := open(t, memory.New(), shred.Config{Master: master(t, "m1")})
	for _, subject := range []string{"", strings.Repeat("x", varve.MaxNameLen+1), "a\x00b"} {
		if _, err := sh.Seal(ctx, subject, varve.NewEvent("T", nil)); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("seal for subject %q: %v", subject, err)
		}
	}
	if _, err := sh.SealFields(ctx, "u", varve.NewEvent("T", []byte(`[1]`)), "a"); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Errorf("seal fields of an array: %v", err)
	}
	if _, err := sh.SealFields(ctx, "u", varve.NewEvent("T", []byte(`{"a":`)), "a"); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Errorf("seal fields of broken JSON: %v", err)
	}
	ev, _ := sh.Seal(ctx, "u", varve.NewEvent("T", []byte("secret")))
	for _, at := range []int{len(ev.Data) - 1, 30} { // the tag, the nonce
		bad := bytes.Clone(ev.Data)
		bad[at] ^= 1
		if _, err := sh.OpenBytes(ctx, bad); !errors.Is(err, shred.ErrCorrupt) {
			t.Errorf("a flipped bit at %d: %v", at, err)
		}
	}
	// A key id changed names a key that is not there: the data reads as
	// erased, never as plaintext.
	bad := bytes.Clone(ev.Data)
	bad[6] ^= 1
	if got, err := sh.OpenBytes(ctx, bad); err != nil {
		t.Errorf("a changed key id: %v", err)
	} else if _, ok := shred.Erased(got); !ok {
		t.Errorf("a changed key id opens as %q", got)
	}
	if _, err := s.Append(ctx, "bad-1", varve.NoStream, varve.Event{ID: varve.NewEventID(), Type: "T", Data: ev.Data[:len(ev.Data)-20]}); err != nil {
		t.Fatal(err)
	}
	for _, err := range s.ReadStream(ctx, "bad-1") {
		if !errors.Is(err, shred.ErrCorrupt) {
			t.Fatalf("a read of a corrupt event: %v", err)
		}
	}
	if _, err := shred.New(memory.New(), shred.Config{}); !errors.Is(err, shred.ErrMasterKey) {
		t.Errorf("no master: %v", err)
	}
	if _, err := shred.New(memory.New(), shred.Config{Master: master(t, "m1"), Previous: []shred.MasterKey{master(t, "m1")}}); !errors.Is(err, shred.ErrMasterKey) {
		t.Errorf("two masters of one id: %v", err)
	}
	if _, err := sh.Erase(ctx, s, "never", shred.EraseOptions{}); !errors.Is(err, shred.ErrNothingToErase) {
		t.Errorf("erase of an unknown subject: %v", err)
	}
}

func TestMasterKeyText(t *testing.T) {
	text, err := shred.NewMasterKeyText("prod-1")
	if err != nil {
		t.Fatal(err)
	}
	m, err := shred.ParseMasterKey(text)
	if err != nil || m.ID() != "prod-1" {
		t.Fatalf("parse %q: %v", text, err)
	}
	hexText := "k:" + strings.Repeat("ab", 32)
	if _, err := shred.ParseMasterKey(hexText); err != nil {
		t.Fatalf("hex: %v", err)
	}
	for _, bad := range []string{"nocolon", "k:short", "k:" + strings.Repeat("zz", 32), ":" + strings.Repeat("ab", 32)} {
		if _, err := shred.ParseMasterKey(bad); !errors.Is(err, shred.ErrMasterKey) {
			t.Errorf("parse %q: %v", bad, err)
		}
	}
	t.Setenv("SHRED_TEST_KEY", text)
	if m, err := shred.MasterKeyFromEnv("SHRED_TEST_KEY"); err != nil || m.ID() != "prod-1" {
		t.Fatalf("env: %v", err)
	}
	if _, err := shred.MasterKeyFromEnv("SHRED_TEST_NOT_SET"); !errors.Is(err, shred.ErrMasterKey) {
		t.Fatalf("unset env: %v", err)
	}
	path := filepath.Join(t.TempDir(), "master")
	if err := os.WriteFile(path, []byte(text+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := shred.MasterKeyFromFile(path); !errors.Is(err, shred.ErrMasterKey) {
		t.Fatalf("a file others read: %v", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if m, err := shred.MasterKeyFromFile(path); err != nil || m.ID() != "prod-1" {
		t.Fatalf("file: %v", err)
	}
}

func shredConfig(t testing.TB) shred.Config { return shred.Config{Master: master(t, "m1")} }

// TestNonces: seals under one key, from one Shredder and from a second one
// over the same key store (another process), never share a nonce.
func TestNonces(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	_, a := open(t, b, shredConfig(t))
	_, c := open(t, b, shredConfig(t))
	seen := map[string]bool{}
	for i := range 2000 {
		sh := a
		if i%2 == 1 {
			sh = c
		}
		ev, err := sh.Seal(ctx, "subject-n", varve.NewEvent("E", []byte("same plaintext")))
		if err != nil {
			t.Fatal(err)
		}
		if shred.Subject(ev.Data) != "subject-n" {
			t.Fatalf("sealed by %q", shred.Subject(ev.Data))
		}
		// The nonce is the 12 bytes before the ciphertext and its 16-byte tag.
		n := string(ev.Data[len(ev.Data)-len("same plaintext")-16-12 : len(ev.Data)-len("same plaintext")-16])
		if seen[n] {
			t.Fatalf("seal %d repeats nonce %x", i, n)
		}
		seen[n] = true
		plain, err := a.OpenBytes(ctx, ev.Data)
		if err != nil || string(plain) != "same plaintext" {
			t.Fatalf("open: %q, %v", plain, err)
		}
	}
}
