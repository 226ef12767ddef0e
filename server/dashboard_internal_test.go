package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

// testServer is a Server over a new memory store, its sampler not started:
// the tests below take samples themselves.
func testServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = teststore.Kinds[0].Open(t, varve.Config{})
	}
	cfg.NoAuth = true
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// last decodes the newest sample of the ring.
func (d *sampler) last(t *testing.T) sample {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out sample
	if err := json.Unmarshal(d.ring[len(d.ring)-1].raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func seqs(ks []kept) []int64 {
	out := []int64{}
	for _, k := range ks {
		out = append(out, k.seq)
	}
	return out
}

// TestSamplerRing: the ring keeps the newest samples within its count and
// its bytes, and the newest one however big.
func TestSamplerRing(t *testing.T) {
	named := func(n int, nameLen int) sample {
		s := sample{Time: time.Now()}
		for i := range n {
			s.Consumers = append(s.Consumers, consumerSample{Name: fmt.Sprintf("%d-%s", i, strings.Repeat("c", nameLen))})
		}
		return s
	}
	cases := []struct {
		name          string
		max, maxBytes int
		samples       []sample
		want          []int64
	}{
		{"count", 3, 1 << 20, []sample{named(1, 1), named(1, 1), named(1, 1), named(1, 1), named(1, 1)}, []int64{3, 4, 5}},
		{"bytes", 100, 5000, []sample{named(2, 500), named(2, 500), named(2, 500), named(2, 500)}, []int64{3, 4}},
		{"the newest however big", 100, 1000, []sample{named(1, 1), named(4, 1000)}, []int64{2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := testServer(t, Config{}).dash
			d.max, d.maxBytes = c.max, c.maxBytes
			for _, s := range c.samples {
				d.keep(s)
			}
			got, next := d.after(since{})
			if fmt.Sprint(seqs(got)) != fmt.Sprint(c.want) || next != int64(len(c.samples)) {
				t.Fatalf("kept %v (next %d), want %v", seqs(got), next, c.want)
			}
			total := 0
			for _, k := range got {
				total += k.bytes()
			}
			if total != d.bytes || (len(got) > 1 && total > c.maxBytes) {
				t.Fatalf("the ring counts %d bytes, holds %d, bound %d", d.bytes, total, c.maxBytes)
			}
		})
	}
}

// TestSamplerSince: since= takes a sample's number or a time; bad values
// are refused.
func TestSamplerSince(t *testing.T) {
	d := testServer(t, Config{}).dash
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		d.keep(sample{Time: t0.Add(time.Duration(i) * time.Second)})
	}
	for _, c := range []struct {
		since string
		want  []int64
	}{
		{"", []int64{1, 2, 3, 4, 5}},
		{"0", []int64{1, 2, 3, 4, 5}},
		{"3", []int64{4, 5}},
		{"5", []int64{}},
		{"9", []int64{}},
		{"2026-11-23T10:00:01Z", []int64{3, 4, 5}},
		{"2026-11-23T10:00:01.5Z", []int64{3, 4, 5}},
		{"2026-11-23T11:00:00+01:00", []int64{2, 3, 4, 5}},
	} {
		sc, err := parseSince(c.since)
		if err != nil {
			t.Fatalf("since=%q: %v", c.since, err)
		}
		if got, _ := d.after(sc); fmt.Sprint(seqs(got)) != fmt.Sprint(c.want) {
			t.Errorf("since=%q: %v, want %v", c.since, seqs(got), c.want)
		}
	}
	for _, bad := range []string{"-1", "x", "2026-11-23", "1.5"} {
		if _, err := parseSince(bad); err == nil || !strings.Contains(err.Error(), "since") {
			t.Errorf("since=%q: %v, want a refusal", bad, err)
		}
	}
}

// TestSamplerCount: a sample counts the events appended after the previous
// one's head up to its own, at most the count bound ("at least" then), and
// the next sample goes on from its own head; its own reads do not count as
// the server's.
func TestSamplerCount(t *testing.T) {
	m := NewMeter()
	store := teststore.Kinds[0].Open(t, varve.Config{Tracer: m})
	s := testServer(t, Config{Store: store, Meter: m})
	d := s.dash
	d.countLimit = 5
	ctx := t.Context()
	appendN := func(n int) {
		t.Helper()
		for range n {
			if _, err := store.Append(ctx, "s", varve.Any, varve.NewEvent("E", []byte(`{}`))); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(2)
	prev := d.sample(nil)
	if first := d.last(t); first.Events != nil || first.Server != nil || first.Head == nil || first.Head.Seq != 2 || first.SizeBytes == nil || *first.SizeBytes != 4 {
		t.Fatalf("the first sample: %+v", first)
	}
	appendN(8)
	prev = d.sample(prev)
	got := d.last(t)
	if got.Events == nil || *got.Events != 5 || !got.EventsAtLeast || got.EventsPerSec == nil || got.Head.Seq != 10 {
		t.Fatalf("8 events appended, bound 5: %+v", got)
	}
	if got.Server == nil || got.Server.Appends != 8 || got.Server.Events != 8 || got.Server.ReadPages != 0 || got.Server.P50 == nil {
		t.Fatalf("through the server: %+v", got.Server)
	}
	appendN(3)
	d.sample(prev)
	if got := d.last(t); got.Events == nil || *got.Events != 3 || got.EventsAtLeast || len(got.Errors) != 0 {
		t.Fatalf("3 more: %+v", got)
	}
}

// TestSamplerConsumers: a consumer behind its checkpoint has a lag in
// events and in time; one caught up has no age; the number tracked is
// bounded, the first by name.
func TestSamplerConsumers(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	ctx := t.Context()
	var positions []varve.Position
	for i := range 4 {
		res, err := store.Append(ctx, "order-1", varve.Any, varve.NewEvent("E", fmt.Appendf(nil, `{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		positions = append(positions, res.Position)
	}
	for _, cp := range []struct {
		name string
		at   varve.Position
	}{{"a-behind", positions[1]}, {"b-caught-up", positions[3]}, {"c-third", varve.Start}} {
		if err := store.Checkpoints().Save(ctx, cp.name, cp.at); err != nil {
			t.Fatal(err)
		}
	}
	d := testServer(t, Config{Store: store}).dash
	d.consumers = 2
	d.sample(nil)
	got := d.last(t)
	if len(got.Consumers) != 2 || !got.ConsumersTruncated || len(got.Errors) != 0 {
		t.Fatalf("consumers %+v, truncated %v, errors %v", got.Consumers, got.ConsumersTruncated, got.Errors)
	}
	a, b := got.Consumers[0], got.Consumers[1]
	if a.Name != "a-behind" || a.Lag != 2 || a.OldestMS == nil || *a.OldestMS < 0 {
		t.Fatalf("the consumer behind: %+v", a)
	}
	if b.Name != "b-caught-up" || b.Lag != 0 || b.OldestMS != nil {
		t.Fatalf("the consumer caught up: %+v", b)
	}
}
