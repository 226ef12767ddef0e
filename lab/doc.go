// Package lab is varve's performance lab: the workloads, the latency
// histograms, the runners and the reports (table, JSON, HTML) behind the
// `varve` CLI's bench, loadtest, deliver-bench, matrix and soak commands.
//
// Open turns a store URL (memory:, sqlite:///path, postgres://..., nats://...)
// into a [varve.Store]; only this package and cmd/varve know every backend.
package lab
