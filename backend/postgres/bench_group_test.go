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
	groups, members := postgres.GroupStats(on)
	if groups > 0 {
		b.ReportMetric(float64(members)/float64(groups), "appends/group")
	}
}
