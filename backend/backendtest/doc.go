// Package backendtest is the conformance suite that every varve backend
// runs, in the manner of testing/slogtest: a backend's _test.go calls
// [Run] with a [Factory] and gets a subtest per behaviour of the
// [varve.Backend] contract.
//
// Tests run in parallel and may share one server with other processes:
// each uses its own stream name prefix, judges only the events of its
// prefix, and waits for its own positions when it reads the global log.
// Capabilities a backend does not implement ([varve.SnapshotStore],
// [varve.CommitSnapshotStore], [varve.CheckpointStore], [varve.Watcher])
// are skipped by name.
//
// The Churn behaviour appends 20,000 events by default; set the
// environment variable named by [ChurnEventsEnv] for a longer run. The
// Retention behaviour runs package retention's scavenger against the
// backend, and sets and removes policies of its own targets in the store's
// $retention stream: two runs of it over one store's data at once would
// apply each other's policies by their own clocks.
package backendtest
