// Package workload defines the benchmark workloads of varve's lab once, for
// every place that runs them: the Go benchmarks of backend/backendtest, its
// opt-in scale tests, and the `varve bench` command of package lab.
//
// A [Workload] prepares a store (writes the streams a read workload reads)
// and hands out one [Op] per worker. Events are built before the clock
// starts: an op only zeroes the event ids (so that the store assigns fresh
// ones, as it does for every caller) and calls the store, so the figures are
// the store's, not an encoder's.
//
// [Measure] drives ops on a number of workers until an op budget, a time
// limit or the context ends, and records every op's latency in HDR
// histograms: one per worker for the whole run and one per worker for the
// current interval of the timeline. A sampler goroutine owned by Measure
// folds the interval histograms into a [Point] every [TimelineStep] and
// publishes the running totals in a [Live] for progress displays; it stops
// before Measure returns. Workers only share an atomic op counter.
//
// Everything here is written against the root package, so it runs on every
// backend.
package workload
