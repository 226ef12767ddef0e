package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// groupPhase is how long each variant runs in a round of
// BenchmarkGroupCommit; VARVE_GROUP_PHASE (a Go duration) overrides it.
func groupPhase(b *testing.B) time.Duration {
	d := 1500 * time.Millisecond
	if s := os.Getenv("VARVE_GROUP_PHASE"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			b.Fatal(err)
		}
	}
	return d
}

// walSyncs is the server's count of WAL flushes (pg_stat_wal, PostgreSQL
// 14 and later; 0 before). It counts the whole server's, and backends
// report theirs up to a second late, so a phase's figure is a rough one.
func walSyncs(b *testing.B, pool *pgxpool.Pool) int64 {
	var n int64
	if err := pool.QueryRow(context.Background(), "SELECT wal_sync FROM pg_stat_wal").Scan(&n); err != nil {
		b.Logf("pg_stat_wal: %v", err)
	}
	return n
}

// BenchmarkGroupCommit measures group commit (issue 20) against the bare
// one-row INSERT of issue 3's baseline. Each iteration is a round: 1 and 8
// clients each run, one after the other for a fixed time, the bare INSERT
// (each in its own transaction, on a pool of 8), single-event appends with
// group commit, and the same without, in an order that rotates from round
// to round, so that a noisy machine weighs on all variants alike. It
// reports events/s and the latency p50 and p99 of each variant, and the
// ratios to the bare INSERT, summed over the rounds; each round is logged
// too. Run with -benchtime Nx for N rounds.
func BenchmarkGroupCommit(b *testing.B) {
	ctx := context.Background()
	cfg := config(b, testSchema+"_group")
	cfg.MaxConns = 8
	pool, off := bareTable(b, cfg)
	onCfg := cfg
	onCfg.GroupCommit = true
	on := open(b, onCfg)
	insert := fmt.Sprintf(bareInsert, on.Schema())
	stores := map[string]*varve.Store{}
	for name, be := range map[string]varve.Backend{"group": on, "nogroup": off} {
		s, err := varve.New(be, varve.Config{})
		if err != nil {
			b.Fatal(err)
		}
		stores[name] = s
	}
	phase := groupPhase(b)
	variants := []string{"bare", "group", "nogroup"}
	type total struct {
		events int
		secs   float64
		lat    []time.Duration
	}
	totals := map[string]*total{}
	// run runs one variant with the given clients for one phase.
	run := func(variant string, clients int) (int, float64, []time.Duration) {
		lats := make([][]time.Duration, clients)
		var wg sync.WaitGroup
		start := time.Now()
		deadline := start.Add(phase)
		for c := range clients {
			stream := fmt.Sprintf("group-%s-%d-%d", variant, benchRun.Add(1), c)
			wg.Go(func() {
				ev := varve.Event{Type: "BenchEvent", Data: bareData}
				var version varve.Version
				for i := 0; time.Now().Before(deadline); i++ {
					t := time.Now()
					var err error
					if variant == "bare" {
						_, err = pool.Exec(ctx, insert, stream, i, [16]byte(varve.NewEventID()), "BenchEvent", bareData)
					} else {
						var res varve.AppendResult
						res, err = stores[variant].Append(ctx, stream, varve.Exact(version), ev)
						version = res.LastVersion
					}
					if err != nil {
						b.Error(err)
						return
					}
					lats[c] = append(lats[c], time.Since(t))
				}
			})
		}
		wg.Wait()
		all := slices.Concat(lats...)
		return len(all), time.Since(start).Seconds(), all
	}
	pct := func(lat []time.Duration, p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		slices.Sort(lat)
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	round := 0
	for b.Loop() {
		load, _ := os.ReadFile("/proc/loadavg")
		line := fmt.Sprintf("round %d (load %.14s):", round, load)
		for _, clients := range []int{1, 8} {
			rates := map[string]float64{}
			for k := range variants {
				v := variants[(k+round)%len(variants)]
				syncs0 := walSyncs(b, pool)
				n, secs, lat := run(v, clients)
				syncs := walSyncs(b, pool) - syncs0
				key := fmt.Sprintf("%s%d", v, clients)
				if totals[key] == nil {
					totals[key] = &total{}
				}
				t := totals[key]
				t.events += n
				t.secs += secs
				t.lat = append(t.lat, lat...)
				rates[v] = float64(n) / secs
				line += fmt.Sprintf(" %s %.0f/s p50 %v p99 %v wal_sync/event %.2f;", key, rates[v], pct(lat, 0.5).Round(time.Microsecond), pct(lat, 0.99).Round(time.Microsecond), float64(syncs)/float64(n))
			}
			line += fmt.Sprintf(" [%d clients: group/bare %.2fx, nogroup/bare %.2fx]", clients, rates["group"]/rates["bare"], rates["nogroup"]/rates["bare"])
		}
		b.Log(line)
		round++
	}
	rate := func(key string) float64 { return float64(totals[key].events) / totals[key].secs }
	for _, clients := range []int{1, 8} {
		for _, v := range variants {
			key := fmt.Sprintf("%s%d", v, clients)
			b.ReportMetric(rate(key), key+"-events/s")
			b.ReportMetric(float64(pct(totals[key].lat, 0.5).Microseconds()), key+"-p50-us")
			b.ReportMetric(float64(pct(totals[key].lat, 0.99).Microseconds()), key+"-p99-us")
		}
		b.ReportMetric(rate(fmt.Sprintf("group%d", clients))/rate(fmt.Sprintf("bare%d", clients)), fmt.Sprintf("group%d/bare", clients))
		b.ReportMetric(rate(fmt.Sprintf("nogroup%d", clients))/rate(fmt.Sprintf("bare%d", clients)), fmt.Sprintf("nogroup%d/bare", clients))
	}
	groups, members, alone := postgres.GroupStats(on)
	if groups > 0 {
		b.ReportMetric(float64(members)/float64(groups), "appends/group")
		b.ReportMetric(float64(alone)/float64(alone+members), "alone/appends")
	}
}

// BenchmarkGroupStatement is what one event costs from one client, with
// nothing else of this benchmark running: a bare one-row INSERT in its own
// transaction, a single-event append alone, and an append in a group of k
// single-event appends to k streams (one statement, one commit), each
// alternating with the others in the same loop. It reports the time per
// event of each; it shows what group commit saves at most, the commit and
// round trip of each append.
func BenchmarkGroupStatement(b *testing.B) {
	ctx := context.Background()
	cfg := config(b, testSchema+"_groupstmt")
	cfg.GroupCommit = true
	pool, be := bareTable(b, cfg)
	insert := fmt.Sprintf(bareInsert, be.Schema())
	ev := func() []varve.Event {
		return []varve.Event{{ID: varve.NewEventID(), Type: "BenchEvent", Data: bareData}}
	}
	for _, k := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("group=%d", k), func(b *testing.B) {
			run := benchRun.Add(1)
			var bare, alone, group time.Duration
			reqs := make([]varve.AppendRequest, k)
			n := 0
			for b.Loop() {
				t := time.Now()
				for i := range k {
					if _, err := pool.Exec(ctx, insert, "bare", n+i, [16]byte(varve.NewEventID()), "BenchEvent", bareData); err != nil {
						b.Fatal(err)
					}
				}
				bare += time.Since(t)
				t = time.Now()
				for i := range k {
					if _, err := be.Append(ctx, varve.AppendRequest{Stream: fmt.Sprintf("alone-%d-%d", run, i), Expected: varve.Any, Events: ev()}); err != nil {
						b.Fatal(err)
					}
				}
				alone += time.Since(t)
				for i := range reqs {
					reqs[i] = varve.AppendRequest{Stream: fmt.Sprintf("group-%d-%d", run, i), Expected: varve.Any, Events: ev()}
				}
				t = time.Now()
				res, err := postgres.GroupAppend(ctx, be, reqs)
				if err != nil {
					b.Fatal(err)
				}
				group += time.Since(t)
				for _, r := range res {
					if r.LastVersion == 0 {
						b.Fatal("the group declined an append")
					}
				}
				n += k
			}
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
			b.ReportMetric(per(bare), "bare-ns/event")
			b.ReportMetric(per(alone), "alone-ns/event")
			b.ReportMetric(per(group), "group-ns/event")
			b.ReportMetric(per(bare)/per(group), "bare/group")
		})
	}
}
