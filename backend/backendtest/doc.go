// Package backendtest is the conformance suite that every varve backend
// runs, in the manner of testing/slogtest: a backend's _test.go calls
// [Run] with a [Factory] and gets a subtest per behaviour of the
// [varve.Backend] contract.
//
// Tests run in parallel and may share one server: each uses its own stream
// name prefix and reads of the global log filter by it. Capabilities a
// backend does not declare in [varve.Features] are skipped by name.
package backendtest
