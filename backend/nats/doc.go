// Package nats is a varve backend on NATS JetStream
// (github.com/nats-io/nats.go/jetstream), for teams that already run NATS and
// want their event store on it. It works with every server from 2.9 on
// (tested: 2.9.10, 2.15); a replicated stream needs 2.9.21 or later. This is
// the contract; design, history and figures are in docs/backends/nats.md.
//
// Open it with [New] and a [Config], or from a URL with [ParseURL]:
//
//	nats://127.0.0.1:4222?stream=ORDERS&prefix=orders
//
// # Layout
//
// One JetStream stream (Config.Stream, default "VARVE") holds every event
// stream, one subject per event stream: <prefix>.e.<category>.<rest>, where
// the stream id is <category><separator><rest> (Config.CategorySeparator,
// default "-", which must equal the Store's), each part escaped so that the
// mapping is injective for a given separator. Snapshots, checkpoints and keys
// live in three key-value buckets. A stream keeps the separator it was created with
// ([Backend.CategorySeparator]): New fails with varve.ErrInvalidArgument for
// another one, and so does an append whose varve.AppendRequest.Category is not
// the stream id's category at that separator. A stream written by a version
// before categories were part of subjects (<prefix>.e.<id>) fails New with
// [ErrOldLayout] (a varve.ErrNotSupported); no event of it is read or written.
//
// # Appends and positions
//
// Readers see a commit whole or not at all, at any size. Optimistic
// concurrency is checked by the server; a failed expectation is a
// [varve.WrongExpectedVersionError] with the actual version. Every event id of
// an append is checked against the stream (Features.UniqueEventIDs): an append
// whose first id is stored is a retry, which returns the original result if
// its events are the stored events from that id on, one for one, and fails
// with varve.ErrDuplicateEvent otherwise, whatever it expects; an append that
// meets its expectation but carries any other stored id fails with
// ErrDuplicateEvent and stores nothing. "Stored" means a live event of the
// stream's current incarnation: a truncation frees the ids it removes, a
// delete all of them. Retries are recognised by the stream's ids at any age,
// and within the server's dedupe window (Config.DuplicateWindow, default 2
// minutes) by the server too.
//
// [varve.Position] is {Commit: the commit's JetStream sequence, Seq: the
// event's index in the commit}; positions are totally ordered, never reused,
// and written "seq:index".
//
// Snapshots (varve.CommitSnapshotStore): a snapshot given with an append is
// stored in the commit, all or nothing, and is the stream's while that commit
// is its last; varve.Snapshots.Read returns it, or else the bucket's snapshot
// (not one taken before a delete of the stream) and the events after it.
//
// Appends to several streams (varve.MultiAppender): on servers from 2.12 on,
// one JetStream atomic batch stores every part or none, each part and checked
// stream at its expectation, at most 1,000 messages a batch; New turns the
// stream's atomic publish on, which cannot be turned off again. Before 2.12
// MultiAppendAvailable is false and AppendMulti gives varve.ErrNotSupported.
// docs/backends/nats.md has the details and the costs.
//
// # Reads
//
// Stream reads hold no server state after they return. Before server 2.11, a
// reader of $all holds one consumer between pages (a filtered one, one per
// category, at most 8); the backend keeps at most 16 readers' consumers,
// releases each after 5 s without a page and all on Close, and the server
// deletes a dead process's after 30 s. [Backend.Watch] wakes readers after
// every commit stored, by any process (Config.NoNotify: its own, and others'
// within Config.WatchPoll).
//
// A page of $all follows its start position with no stored event left out, in
// position order, and no later commit can fill a gap in it. Events of streams
// deleted or truncated during the read may or may not appear, but never twice.
// A filtered page that is not full goes through a position up to which it
// holds every matching event. A page's byte budget (MaxBytes) ends it at the
// event that spends it, but a page cut inside a commit, a filtered read and a
// backward stream read may hold more than the budget, up to a commit's size or
// Limit events. On a replicated stream replicas answer the backend's direct
// gets: a read right after an acknowledged append may not see it yet (no
// read-your-writes on R3), and a page never has a gap.
//
// # Delete, truncate, tombstone
//
// Delete checks the expected version and deletes in one atomic step. It starts
// a new incarnation: the next append gets version 1, retries of appends from
// before the delete are new appends, and the stream's snapshot is deleted. A
// tombstone is a delete that no later append passes. Truncate removes the
// events below the new floor from stream reads and $all; whole commits below
// it are purged, a commit the floor cuts stays stored. If the process dies
// between a delete's or truncation's marker and its purge, the removed events
// stay in $all until the next delete or truncation of the stream finishes it.
//
// # Leases and fenced checkpoints
//
// Leases (varve.LeaseStore) are entries of the checkpoint bucket, changed by
// compare-and-set; expiry is judged by the clock of the process that acquires.
// A lease fences at most 64 checkpoints (one more is varve.ErrInvalidArgument;
// names are never removed from its list). A fenced save with an older token
// that starts after a newer Acquire returned is refused with
// varve.ErrLeaseLost; one in flight during that Acquire lands before it
// returns or not at all. This holds on every server version. A checkpoint
// saved without the lease (varve.Checkpoints.Save) drops its stored token: do
// not mix both on one name.
//
// # Keys
//
// Keys ([varve.KeyStore]) are entries of the bucket Config.KeyBucket, made
// like nats.go's buckets of history 1 but with message deletes allowed; a
// PutKey over a key is refused by the server. DeleteKey erases the key's
// message with the server's secure delete, which overwrites its bytes in the
// stream's files, but not the bytes a rewrap replaced (destroy the old master
// key after a rotation) nor a replica's Raft log.
//
// # Durability, replicas and failures
//
// An append is acknowledged once the server (R1) or a quorum of the stream's
// replicas has stored it. Config.Replicas (1 to 5, default 1) applies when New
// creates the stream and buckets. Server 2.9 syncs file storage to disk every
// two minutes and cannot be told otherwise: an acknowledged append survives a
// crash of the client and a clean server restart, but a power loss or kernel
// crash can lose up to two minutes of them (on R3: a power loss of two servers
// at once). Safe configurations: Replicas 3 on a cluster, or from 2.10 on
// "sync_interval: always" in the server's jetstream block, which syncs every
// write. Features.Durable is set for file storage; Config.MemoryStorage loses
// everything when the server stops. On R3 an acknowledged append survives
// a SIGKILL or a freeze of any one server, leader or follower, and
// optimistic concurrency holds across the fail-over; appends fail while a
// leader is elected (tested on 2.15 with real server processes:
// internal/natschaos, docs/scale.md). Servers before 2.9.21 store
// concurrent publishes to a replicated stream at the same expected subject
// sequence (nats-server #4320): New refuses a replicated stream on them
// with varve.ErrNotSupported. An R1 stream whose server loses its store
// loses what it acknowledged.
//
// An append that returns an error has an unknown outcome. Retry it with the
// same events (same ids) and expectation: it is then stored exactly once, or
// answered with its original result. An append given up is in the log at most
// once.
//
// Every call waits only as long as its context allows, and at most
// Config.RequestTimeout per request when the context has no deadline: a
// request in flight to a server that dies gets no answer, so give each call
// a deadline of seconds, not the life of a process. While the connection is
// down calls fail at once with [ErrUnreachable]; a call waiting when it goes
// down fails within 0.1 s. Close makes every call in flight return
// varve.ErrClosed, also when Config.Conn is the caller's. Its errors say
// "nats: " and what failed, never the stream nor the URL (it may hold secrets).
//
// # Concurrency
//
// A Backend is safe for concurrent use; appends to different streams never
// wait for each other in it. Its timers and nats.go's subscriptions end with
// Close, which closes the connection only if the backend opened it.
//
// # Not supported
//
// varve.TagStore (Dynamic Consistency Boundaries): events with tags and
// conditional appends give varve.ErrNotSupported.
package nats
