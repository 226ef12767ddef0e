// Package lab is varve's performance lab: the workloads, the latency
// histograms, the runners and the reports (table, JSON, HTML) behind the
// `varve` CLI's bench, loadtest, deliver-bench, matrix and soak commands.
//
// Open turns a store URL (memory:, sqlite:///path, postgres://..., nats://...)
// into a [varve.Store]; only this package and cmd/varve know every backend.
//
// [Bench] runs the workloads of package lab/workload (the same ones the Go
// benchmarks of backend/backendtest run) on stores one after the other, each
// between two runs of the store's raw baseline (a bare mutex+slice, a bare
// SQLite or PostgreSQL INSERT, a raw JetStream publish), which the lab opens
// with the drivers directly. [PrintBench] and [WriteBenchHTML] turn its
// [BenchReport] into tables and into one self-contained HTML page with SVG
// charts. Bench runs one measurement at a time; the goroutines of a
// measurement (workers, a sampler) and of the progress line belong to Bench
// and end before it returns.
package lab
