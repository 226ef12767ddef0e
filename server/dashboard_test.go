package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// dashboardJSON is the answer of GET /api/v1/dashboard, its samples kept
// as sent.
type dashboardJSON struct {
	IntervalMS int64             `json:"interval_ms"`
	MaxSamples int               `json:"max_samples"`
	Sampling   bool              `json:"sampling"`
	Measured   bool              `json:"measured"`
	Next       int64             `json:"next"`
	Consumers  []string          `json:"consumers"`
	Samples    []json.RawMessage `json:"samples"`
}

// sampleJSON is the part of a sample the tests read.
type sampleJSON struct {
	Seq           int64           `json:"seq"`
	Head          *varve.Position `json:"head"`
	Events        *int            `json:"events"`
	EventsAtLeast bool            `json:"events_at_least"`
	Server        *struct {
		Appends int64  `json:"appends"`
		Events  int64  `json:"events"`
		P50     *int64 `json:"append_p50_us"`
		P99     *int64 `json:"append_p99_us"`
	} `json:"through_server"`
	SizeBytes *int64 `json:"size_bytes"`
	Consumers []struct {
		Name     string `json:"name"`
		Lag      int    `json:"lag"`
		OldestMS *int64 `json:"oldest_unprocessed_ms"`
	} `json:"consumers"`
	Errors []string `json:"errors"`
}

func (a *api) dashboard(query string) (dashboardJSON, []sampleJSON) {
	a.t.Helper()
	r := a.want(a.do("GET", "/api/v1/dashboard"+query, nil), 200, "the dashboard")
	var d dashboardJSON
	if err := json.Unmarshal(r.raw, &d); err != nil {
		a.t.Fatal(err)
	}
	out := make([]sampleJSON, len(d.Samples))
	for i, raw := range d.Samples {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			a.t.Fatal(err)
		}
	}
	return d, out
}

// TestDashboardAPI: the first request starts the sampling; samples count
// the events appended from $all and, through the server's Meter, its
// appends with their latency; since= answers only newer samples; two
// clients get the same samples; a consumer behind shows its lag.
func TestDashboardAPI(t *testing.T) {
	m := server.NewMeter()
	store := teststore.Kinds[1].Open(t, varve.Config{Tracer: m})
	ctx := t.Context()
	a := serve(t, store, server.Config{Writes: true, Meter: m, SampleInterval: 100 * time.Millisecond})

	d, _ := a.dashboard("")
	if d.IntervalMS != 100 || !d.Sampling || !d.Measured || d.MaxSamples != 3000 {
		t.Fatalf("the first answer: %+v", d)
	}
	var first int64
	waitFor(t, "a first sample", func() bool { d, _ := a.dashboard(""); first = d.Next; return first > 0 })

	for i := range 3 {
		a.want(a.do("POST", "/api/v1/streams/order-1/events", map[string]any{"expected_version": "any",
			"events": []map[string]any{{"type": "Placed", "data": map[string]int{"n": i}}}}), 201, "an append")
	}
	if err := store.Checkpoints().Save(ctx, "billing", varve.Start); err != nil {
		t.Fatal(err)
	}
	// The samples after the first count what was appended after it.
	waitFor(t, "the appends counted", func() bool {
		_, ss := a.dashboard(fmt.Sprintf("?since=%d", first))
		events, own := 0, int64(0)
		for _, s := range ss {
			if s.Events != nil {
				events += *s.Events
			}
			if s.Server != nil {
				own += s.Server.Events
			}
		}
		return events == 3 && own == 3
	})
	var lagged sampleJSON
	waitFor(t, "a sample of billing behind", func() bool {
		_, ss := a.dashboard("")
		lagged = ss[len(ss)-1]
		return len(lagged.Consumers) == 1 && lagged.Consumers[0].Lag == 3
	})
	if c := lagged.Consumers[0]; c.Name != "billing" || c.OldestMS == nil || lagged.SizeBytes == nil || *lagged.SizeBytes <= 0 || len(lagged.Errors) != 0 {
		t.Fatalf("the newest sample: %+v", lagged)
	}
	d, ss := a.dashboard("")
	if len(d.Consumers) != 1 || d.Consumers[0] != "billing" {
		t.Fatalf("consumers %q", d.Consumers)
	}
	withP50 := false
	for _, s := range ss {
		withP50 = withP50 || s.Server != nil && s.Server.P50 != nil && *s.Server.P50 > 0 && *s.Server.P99 >= *s.Server.P50
	}
	if !withP50 {
		t.Fatal("no sample has the appends' latency")
	}

	// since= answers the newer samples only.
	newer, later := a.dashboard(fmt.Sprintf("?since=%d", d.Next))
	for _, s := range later {
		if s.Seq <= d.Next {
			t.Fatalf("since=%d answered sample %d", d.Next, s.Seq)
		}
	}
	if newer.Next < d.Next {
		t.Fatalf("next went back from %d to %d", d.Next, newer.Next)
	}
	if r := a.do("GET", "/api/v1/dashboard?since=yesterday", nil); r.status != 400 || r.errCode() != "invalid_argument" {
		t.Fatalf("since=yesterday: %d %s", r.status, r.raw)
	}
}

// TestDashboardSameForAll: two clients asking for the same range get the
// same samples, byte for byte: the server samples, not the client.
func TestDashboardSameForAll(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	a := serve(t, store, server.Config{SampleInterval: 100 * time.Millisecond})
	b := serve(t, store, server.Config{SampleInterval: 100 * time.Millisecond})
	waitFor(t, "three samples", func() bool { d, _ := a.dashboard(""); return d.Next >= 3 })
	one, _ := a.dashboard("")
	two, _ := a.dashboard("?since=0")
	if len(one.Samples) < 3 || len(two.Samples) < len(one.Samples) {
		t.Fatalf("%d samples, then %d", len(one.Samples), len(two.Samples))
	}
	for i := range one.Samples {
		if !bytes.Equal(one.Samples[i], two.Samples[i]) {
			t.Fatalf("sample %d differs between two requests:\n%s\n%s", i, one.Samples[i], two.Samples[i])
		}
	}
	// Another server samples on its own; without a Meter it says so.
	other, ss := b.dashboard("")
	if other.Measured || len(ss) > 0 && ss[0].Server != nil {
		t.Fatalf("a server without a Meter: %+v %+v", other, ss)
	}
}

// TestDashboardClose: Close stops the sampler (goleak checks its
// goroutine); the samples stay readable and no new ones come.
func TestDashboardClose(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	a := serve(t, store, server.Config{SampleInterval: 100 * time.Millisecond})
	waitFor(t, "a sample", func() bool { d, _ := a.dashboard(""); return d.Next >= 1 })
	if err := a.srv.Close(); err != nil {
		t.Fatal(err)
	}
	d, _ := a.dashboard("")
	if d.Sampling {
		t.Fatalf("sampling after Close: %+v", d)
	}
	if again, _ := a.dashboard(""); again.Next != d.Next || again.Sampling {
		t.Fatalf("after Close, sample %d then %d", d.Next, again.Next)
	}
}

// TestSampleIntervalConfig: a negative or too short SampleInterval is
// refused.
func TestSampleIntervalConfig(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	for _, iv := range []time.Duration{-time.Second, time.Millisecond} {
		if _, err := server.New(server.Config{Store: store, NoAuth: true, SampleInterval: iv}); err == nil {
			t.Errorf("SampleInterval %v accepted", iv)
		}
	}
}
