// Package delivery hands the events of a subscription to other systems,
// many at once, in order per stream, without losing one across a crash.
//
// A [Dispatcher] reads one [subscription.Subscription] ([New]), or any other
// ordered feed of events that implements [Source] ([NewFromSource]; package
// github.com/varve-go/varve/cdc/pgcdc has one over a PostgreSQL logical
// replication slot), and runs up to C deliveries at once to a [Sink]: a Go function ([SinkFunc]), or a
// transport from a sub-package of its own, so that a program compiles only
// the clients it uses: an HTTP endpoint (package
// github.com/varve-go/varve/delivery/webhook) or a NATS JetStream subject
// (package github.com/varve-go/varve/delivery/natssink). A sink of another
// transport sends the [Payload] and the shared headers ([HeaderIdempotencyKey],
// [HeaderAttempt], ...).
//
// # Concurrency model
//
// Run starts one reader, C workers and one maintenance goroutine, and runs
// the coordinator itself; all of them stop before Run returns.
//
//   - The reader pulls pages from the subscription and hands them to the
//     coordinator. It waits while the window (events read but not yet
//     delivered or parked, [Config.Window]) is full: backpressure, and the
//     bound on memory.
//   - The coordinator alone owns the state: a queue per stream, a ready
//     heap ordered by log position, a heap of retries ordered by due time
//     (served by one timer, so no worker ever sleeps) and the list of
//     pending events in read order. In [PerStream] mode only the head of
//     each stream's queue is ready, so at most one event per stream is in
//     flight and a stream's events go in version order; a slow or failing
//     stream holds up only itself, there is no batch barrier. In
//     [Unordered] mode every event is ready at once.
//   - Workers take the oldest ready event, run one attempt (or one park) and
//     report back. A failed attempt is retried with exponential backoff and
//     jitter ([subscription.RetryPolicy]) until its MaxAttempts or
//     MaxAge, or at once parked when the sink says the
//     failure is permanent ([Permanent]).
//   - Parking writes a reference to the event to the subscription's
//     [Parked] store, a stream of the event store itself, so it is durable
//     wherever the store is. A source that keeps its events in no store
//     gets a Parked of the caller's ([Config.Parked]), and the record then
//     holds the event itself. In PerStream mode a parked event also parks
//     every later event of its stream, so that no event overtakes it, until
//     `varve parked replay` or `skip` resolves them ([Parked.Replay],
//     [Parked.Skip]); the maintenance goroutine notices and the stream flows
//     again. The other streams never wait for it.
//   - The checkpoint is the end of the contiguous prefix of events that are
//     delivered or parked: the position read just before the oldest pending
//     event. It costs O(1) to keep and never moves past an event that is
//     not done. The maintenance goroutine saves it every
//     [Config.CheckpointInterval] when it moved, off the hot path, and Run
//     saves it once more on the way out.
//
// Delivery is at least once: after a crash the dispatcher resumes after the
// saved checkpoint (the source's SaveCheckpoint), so the events delivered since then are delivered again.
// Every attempt carries the same idempotency key, "<subscription>:<position>"
// ([Key]), for the receiver to drop duplicates.
package delivery
