// Package subscription follows the global log of a [varve.Store]: a catch-up
// read from a starting point, then a live tail, optionally filtered by
// stream, stream prefix (category) or event type, with named checkpoints.
//
// A [Subscription] reads $all page by page with [varve.Store.ReadAllPage].
// Once a read comes back short it is caught up and waits for new events: on
// a backend that declares [varve.Features.Watch] it blocks on
// [varve.Watcher.Watch] (LISTEN/NOTIFY, a JetStream consumer or an
// in-process signal, whatever the backend does), with a slow safety poll in
// case a wake-up is lost; on other backends it polls with a backoff that
// starts at [Config.MinPoll] and doubles up to [Config.MaxPoll].
//
// Checkpoints are kept in the backend when it declares
// [varve.Features.Checkpoints] (a table, a KV bucket, a map), in the
// [varve.CheckpointStore] of [Config.Checkpoints] when one is given, and
// otherwise in process memory: such a subscription says so with
// [Subscription.DurableCheckpoints] and starts afresh after a restart.
//
// Streams whose id begins with "$" are the store's own (for example the
// parked events of package delivery) and are skipped unless
// [Config.SystemStreams] is set.
//
// # Concurrency model
//
// A Subscription is a pull-based reader: it starts no goroutine and is used
// by one goroutine at a time ([Subscription.Next], [Subscription.Run]).
// Saving and loading checkpoints is safe from any goroutine. For concurrent,
// ordered delivery of a subscription's events, see package delivery.
//
// # Several processes
//
// On a store whose backend keeps leases ([varve.Store.Leases]) a
// subscription, or a delivery dispatcher built on one, can run in several
// processes: [Config.Lease] names the process (Holder), the lease's TTL
// and a number of segments, and [Run] and [RunWith] do the rest. With one
// segment the subscription runs in one of the processes at a time: the
// others wait and one takes over within the lease's ttl (plus a third of
// it) after the holder dies. With more, [RunWith] splits it into segments by the hash of the stream id ([SegmentOf]), each with its
// own lease and checkpoint, and spreads them over the processes, moving
// segments when processes join or leave; [SegmentStatus] says who holds
// what. In both, every checkpoint is saved fenced by the lease's token,
// so a process that paused past its lease cannot move a checkpoint back,
// and a new holder starts where the last one saved: each stream's events
// are handled in order within each holder's run, and an event is handled
// twice only across a fail-over (what the old holder handled after its
// last save). The lease ttl trades the fail-over time against how long a
// pause (GC, a slow network) may last before a holder loses its work.
//
// # What a consumer reads, and its lag
//
// [Open] records what the subscription reads (its filter, system streams,
// stream or segment) under its name, where the store keeps snapshots, and
// rewrites the record only when that changes; nothing is added to the log.
// [Described] reads the record and [Lag] counts the events after a
// position that such a consumer reads, so that a consumer's lag, wherever
// it is shown (package delivery's consumer status, the server, the CLI),
// is counted by its own filter. [RetryPolicy] and [Lease] are the settings
// that package delivery and package projection share with subscriptions.
//
// # Whether a consumer runs
//
// While [Subscription.Run] runs (and a delivery dispatcher or a projection
// runner over the subscription), a heartbeat says so: a lease named after
// the consumer and the process, renewed every [Config.Heartbeat] for
// three of them and released when the run ends. [Running] lists the
// heartbeats of a consumer; one of a process that died lasts until its
// lease expires. A store without leases cannot tell.
package subscription
