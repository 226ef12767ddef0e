// Package workload defines the benchmark workloads of varve once, for every
// place that runs them: the Go benchmarks and opt-in scale tests of
// backend/backendtest, and the `varve bench` command of the lab.
//
// A [Workload] prepares a store (writes the streams a read workload reads)
// and hands out one [Op] per worker. Events are built before the clock
// starts: an op only zeroes the event ids (so that the store assigns fresh
// ones, as it does for every caller) and calls the store, so the figures are
// the store's, not an encoder's.
//
// [Drive] runs ops on a number of workers until an op budget, a time limit
// or the context ends, and tells an [Observer] how long each op took. It
// measures nothing itself: the lab records latencies in HDR histograms and
// the scale tests keep plain samples, so this package needs no measurement
// library. Everything here is written against the root package, so it runs
// on every backend.
package workload
