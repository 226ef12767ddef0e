// Package nats is a varve backend on NATS JetStream (github.com/nats-io/nats.go/jetstream),
// for teams that already run NATS and want their event store on it. It
// works with every server from 2.9 on, checked against Debian's 2.9.10 and
// the current release (2.15) in its tests.
//
// Open it with [New] and a [Config], or from a URL with [ParseURL]:
//
//	nats://127.0.0.1:4222?stream=ORDERS&prefix=orders
//
// # Layout
//
// One JetStream stream (Config.Stream, default "VARVE") holds every event
// stream, one subject per event stream: <prefix>.e.<category>.<rest>, where
// the stream id is <category><separator><rest> (the category of
// varve.Store.Category, Config.CategorySeparator, default "-") and each part
// is written with every byte outside [A-Za-z0-9_-] as =XX. Tokens that this
// encoding never writes stand for the edge cases: "=" for an empty
// category, "=" as <rest> for an id without the separator (the id is its
// category), "==" for an empty rest after it; so "order-42" is
// <prefix>.e.order.42, "order" <prefix>.e.order.=, "-" <prefix>.e.=.==.
// The mapping is injective for a given separator, and a category's
// commits are the subject filter <prefix>.e.<category>.*. Every stream
// operation (appends with the expected last subject sequence, head gets,
// walks, the id sets, chunks, deletes, truncations) works on the stream's
// exact subject as before. Beside them: <prefix>.c.<category>.<rest> for
// the chunks of large commits, <prefix>.f for floor entries (below) and
// <prefix>.l for the layout marker. Snapshots and checkpoints live in two
// key-value buckets, created on first use, keyed by the encoded stream id.
//
// # Layouts and migration
//
// Streams written before categories were part of subjects use one token,
// <prefix>.e.<id>. A stream has one layout for its whole life, named by the
// layout marker, a message on <prefix>.l holding the layout and the
// separator. New finds it with one direct get; a stream without one (an
// older version's, or one just created) gets the subject added to its
// configuration, and then the old layout if it holds any event message and
// the category layout if not; the marker is published with an expected last
// subject sequence of 0, so the first process decides for every other. A
// stream of the category layout fixes the separator: New fails with
// varve.ErrInvalidArgument when Config.CategorySeparator names another one,
// and an append whose varve.AppendRequest.Category is not the stream id's
// category at that separator (the Store's separator differs) fails the
// same way, as the category of every event must be the one it was
// appended with.
//
// Old-layout streams are not rewritten: this backend goes on reading and
// writing their one-token subjects (old and new processes agree on every
// subject and every expected sequence), and ReadAllFiltered returns
// varve.ErrNotSupported on them, so the Store filters pages of $all itself
// and misses nothing. To get pushdown, copy the events into a new
// JetStream stream. Reads of $all decode subjects of both layouts. A
// process of an older version must not write to a stream after a newer one
// has marked it with the category layout: its one-token subjects would be
// in $all but not in any category's subject filter.
//
// # Commits
//
// A commit is one message: a 66-byte header with the stream's state after
// the commit (version, truncation floor, creation and update time,
// incarnation, previous sequence on the subject) and the events. One message
// is atomic on every server version, and readers see a commit whole or not
// at all. A commit larger than the server's max_payload (1 MiB by default,
// so a 1 MiB event does not fit with its framing) stores its events in chunk
// messages first and then one commit message that lists them; the commit
// message is the atomic step, chunks nobody references are invisible and
// deleted. A single append does not use JetStream's atomic batch publish
// (2.12+): one message per commit is atomic on every server, and a batch
// costs far more (below); appends to several streams do.
//
// # Snapshots in commits
//
// The backend implements varve.CommitSnapshotStore: an append may carry a
// snapshot of the stream's state after it (varve.Snapshots.Append, which
// package aggregate uses on every save of a small state), and the snapshot
// is then a section of the commit message after its events: a kind byte
// 's', the schema version (varint), the time taken (8 bytes) and the data
// (uvarint length, bytes); its version is the commit's. It is stored with
// the events or not at all, and costs the append bytes, not a request.
// Readers stop after the events a commit counts, as every version of this
// package has, so processes of earlier versions read such commits as
// before and never see the section; $all, stream reads and id sets skip
// it too. varve.Snapshots.Read gets the stream's last message: when it is
// a commit with a snapshot, that one direct get is the whole read (a load
// and a save of an aggregate are two requests on every server version);
// otherwise the snapshot bucket's snapshot and the events after it, read
// from that head as ReadStream reads them (a get more, and the reads of
// the events after the bucket's snapshot that the head's commit does not
// hold). So a snapshot kept in a commit is the stream's while that commit
// is its last: an append without one or a delete ends it, and
// Snapshots.Load returns only the bucket's snapshots. A truncation carries
// the last commit's snapshot on in its marker (unless it is too large for
// one message), as it may purge that commit. A commit above max_payload
// keeps its snapshot in its chunks, with its events. A bucket snapshot
// that says it was taken in an earlier life of the stream (before a
// delete) is not used.
//
// Optimistic concurrency is checked by the server: a commit is published
// with Nats-Expected-Last-Subject-Sequence set to the subject's last
// sequence, which the backend caches per stream, so an append is one round
// trip. A wrong-sequence reply (error 10071, or 10164, which a clustered
// stream's leader sends while the subject's last message is still being
// replicated, as 2.15.2's source shows) makes the backend read the
// subject's last message; an expectation that still fails is a
// [varve.WrongExpectedVersionError] with the actual version, any other
// mismatch a retry with the new sequence.
//
// # Appends to several streams
//
// On servers from 2.12 on the backend implements varve.MultiAppender
// (varve.Store.AppendMulti) with one JetStream atomic batch: the server
// stores every message of it, with consecutive sequences, or none, and
// checks each message's expectations against the stream as it is when the
// batch commits (a single server holds the stream's isolation lock across
// the commit, so direct gets never see half a batch; a cluster proposes
// the batch as one). The batch holds, in order:
//   - one message on <prefix>.k for each stream that the append only
//     checks (varve.StreamCheck), with Nats-Expected-Last-Subject-Sequence
//     set to the checked stream's last subject sequence and
//     Nats-Expected-Last-Subject-Sequence-Subject to its subject, so the
//     check is atomic with the writes without touching the checked
//     stream's subject (its appenders are not disturbed); a per-message
//     TTL of 1 s (Nats-TTL) removes it, and it is not in $all;
//   - each part's commit, on its stream's subject, exactly as a single
//     append publishes it: Nats-Expected-Last-Subject-Sequence, the same
//     Nats-Msg-Id, chunks published before the batch for a part above
//     max_payload.
//
// The headers are Nats-Batch-Id (random, 32 hex digits), Nats-Batch-Sequence
// (1..n) and Nats-Batch-Commit: 1 on the last message; the messages before
// it are sent without waiting (nats.go 1.55 has no batch publish API) and
// the last one gets the answer, whose sequence is the last part's commit:
// the parts' positions follow from it. Each part is decided as a single
// append is (id sets, retries, tombstones, expected versions) at the
// heads the batch then expects; a refused batch makes the backend read
// every head again, so a failure is reported on fresh heads: a
// [varve.WrongExpectedVersionError] naming the stream, or a
// [varve.StreamError] around varve.ErrStreamDeleted or
// varve.ErrDuplicateEvent. In an atomic batch the server does not
// deduplicate a message whose Nats-Msg-Id it knows: it refuses the whole
// batch (error 10201). The backend then reads every head, and the id sets
// find the parts stored by the batch whose reply was lost, so a retry
// returns the original results as for single appends; if they do not (the
// events were truncated since), the parts go out under message ids of
// their own. Server limits: at most 1,000 messages in a batch (parts plus
// checks; more is varve.ErrInvalidArgument), 50 batches in flight per
// stream (a refusal for that, or for a lost message, is retried up to 50
// times, 1 ms more each time).
//
// New allows atomic publish and per-message TTLs on the stream, and adds
// the subject <prefix>.k, when the server has them: a stream created by an
// earlier version is updated in place (its events, layout and other
// settings stay; the settings cannot be turned off again, and processes of
// earlier versions ignore them). If the server refuses the update (a
// stream with async persistence, say), or on servers before 2.12 (the
// machine's 2.9.10), the backend reports CanAppendMulti false, the Store
// lacks the capability (varve.Store.CanAppendMulti, and AppendMulti gives
// varve.ErrNotSupported), and nothing else changes.
//
// Cost: the server stages each atomic batch of an R1 stream on file storage
// in a file store of its own, synced, before the commit. On this machine
// (BenchmarkPublishBatch, in-process 2.15.2, 3 runs) a batch of 2 messages
// took 2.3-3.2 ms against 0.040-0.046 ms for a single publish, and 10-12 ms
// while other processes loaded the disk; on memory storage 0.052-0.064 ms
// against 0.028-0.035 ms. A multi-stream append costs what its batch does:
// BenchmarkSuite/Consistency (-benchtime 2000x, medians of 3 runs, 1 event
// to each of 2 streams against 1 event to one stream) gave 149 events/s
// against 10,929 (0.014x) on file storage, and 8,913 against 13,700
// (0.65x) on memory storage (BenchmarkSuiteMemory).
//
// varve.TagStore (Dynamic Consistency Boundaries) is not implemented, so
// events with tags and conditional appends give varve.ErrNotSupported. It
// could be made atomic only with the tags in subjects: a marker message
// per tag of a commit in the same atomic batch, and a condition checked as
// the last sequence of a tag's marker subject. Then every append of tagged
// events would be a batch (about 30 times a single append's cost on file
// storage, above), a condition on types alone or on every event would
// expect the last sequence of the whole log, which every unrelated append
// breaks, and tags would change the commit format that processes of
// earlier versions read.
//
// # Event ids: idempotency and uniqueness
//
// Every event id of an append is checked against the stream, as in the
// other backends (Features.UniqueEventIDs): an append whose first id is
// stored is a retry, which returns the original result if its events are
// the stored events from that id on, one for one, and fails with
// [varve.ErrDuplicateEvent] otherwise, whatever it expects; an append that
// meets its expectation but carries any other stored id fails with
// ErrDuplicateEvent and stores nothing. "Stored" means a live event of the
// stream's current incarnation: a truncation frees the ids of the events it
// removes, a delete those of all, as in the memory backend.
//
// JetStream has no index to ask, so the backend keeps one per stream: the
// ids of its live events (64-bit fingerprints, each mapped to its version
// and verified against the stored event on a hit) as of one head of its
// subject. The append is checked against the set and published with that
// head's sequence as Nats-Expected-Last-Subject-Sequence, so a commit the
// set does not know (another process's) fails the publish; the backend then
// reads the commits after the set's head (a walk back from the new head, or
// a scan) and checks again. An append to a stream whose head and id set
// are cached costs no request beyond its publish, and a new stream needs
// none. Without a set (a cold process, or an evicted set) the append reads
// the ids of the stream's live events once: a walk back for a few
// versions, otherwise batched direct gets (2.11+) or a short-lived
// consumer. A read of the whole live stream fills the set for free, and a
// read of the head moves it past the next commit, truncation or delete.
// The sets are bounded by Config.CachedEventIDs (ids over all streams,
// default 1,000,000, 20-40 bytes an id); a stream with more live events
// than that pays the read on every append.
//
// Every commit also carries Nats-Msg-Id = first event id, stream and
// incarnation, so the server drops a resent publish within its dedupe
// window (Config.DuplicateWindow, default 2 minutes) and names the stored
// commit. If it is newer than the head the ids were checked at, the backend
// catches the set up and answers as for any retry; if the set does not
// hold its first id, its events were truncated, and the append is
// published again under a message id of its own. Retries from beyond the
// window are found by the id set, whatever the ids look like.
//
// # Positions
//
// Position{Commit: JetStream sequence of the commit, Seq: index of the event
// in the commit}. The JetStream sequence alone cannot order the events of a
// commit that share one message; the pair is totally ordered, never reused,
// and its text form is "seq:index".
//
// # Reads, and what they leave on the server
//
// Stream reads hold no server state after they return; a reader of $all
// holds at most one consumer between pages, on servers before 2.11 (a
// filtered reader one per category of its filter, at most 8).
//   - The head of a stream is one direct get (last message by subject). It
//     answers StreamInfo and every stream read that its last commit covers:
//     a tail, the last event, an aggregate catching up.
//   - Longer reads walk back along the previous-sequence field, one direct
//     get per commit, when at most 16 versions are needed (a consumer
//     costs about 1.3 ms to create and delete on this machine, a direct get
//     0.04-0.14 ms); otherwise servers from 2.11 on answer batched direct
//     gets (one request per 1024 messages), and older servers are read by a
//     short-lived push consumer (flow controlled, memory storage, 30 s
//     inactivity threshold as a backstop) that is deleted before the read
//     returns. Scans start at a remembered commit (from earlier reads or a
//     snapshot) or find their start by binary search over sequences.
//   - From 2.11 on, a read that the cached head says its last commit does
//     not answer (or a forward read of a stream not seen yet, from near its
//     start) skips the head get: one batched get from the cached head's
//     commit, a remembered commit or the incarnation's start (sequence 1
//     when nothing is known) returns the events and, when the server says
//     nothing follows its last message, the head too. The read is answered
//     from the batch only if it holds every commit from the one with the
//     first wanted version on; otherwise (more pending, a new incarnation
//     or a truncation it cannot vouch for) the read goes on from the head
//     the batch told, or gets it. A batch that holds the whole live
//     incarnation also fills the stream's id set, so the append after a
//     cold load is one publish.
//   - $all is read with a cursor over <prefix>.e.>: batched gets from 2.11
//     on, a push consumer before. The cursor of a page stays open for the
//     page that starts where it ended, so a reader that pages on reuses it
//     (and its consumer): the backend keeps up to 16 such cursors, releases
//     one after 5 s without a page, and all of them on Close (a consumer
//     whose process dies is deleted by the server after 30 s). A cursor
//     keeps at most 512 messages and 32 MiB (2.9) or one batch of at most
//     8 MiB (2.11+) between pages.
//   - Filtered reads of $all (varve.FilteredReader) read the subject filter
//     <prefix>.e.<category>.* of each category of the filter with a cursor
//     of the kind above, and merge the cursors by sequence; a filter of
//     more than 8 categories, or of types and stream prefixes alone, reads
//     <prefix>.e.>. Types and stream prefixes are checked on each commit
//     (the prefix before its events are decoded). The consumers of a
//     filter's cursors (2.9) filter on the server, so a reader of a sparse
//     category is sent only its messages; several filter subjects in one
//     consumer (2.10+) are not used, as the merge works on every server.
//     The merged cursors are kept between pages like those of $all (one
//     of the 16, with a consumer per category before 2.11), keyed by the
//     filter and the position the next page starts after.
//
// Through, the position a filtered page that is not full goes through: the
// backend gets the last message of $all, L, before the page is read. Every
// message up to L was stored before any cursor of the page asks the server
// where its subject filter ends (a batch that reached the end during an
// earlier page is not trusted: the cursor asks again), so the page holds
// every matching event up to L, and a commit stored later has a higher
// sequence. Through is L (the last event of its commit, or index 0 of a
// marker's sequence, which no event has), or the page's last event if that
// is later. When one of the merged cursors has nothing more, it has
// returned every message of its filter up to L, so the others are taken
// only up to L: a later message of the silent filter could precede
// theirs.
//
// What a $all page guarantees: its events follow the page's start position
// with no stored event left out, in position order, and no later commit
// can fill a gap in it (JetStream assigns sequences at store time, and
// cursors deliver only stored messages). Events of streams deleted or
// truncated during the read may or may not appear, but never twice. From
// 2.11 on, batched direct gets carry no server state, so there is nothing
// to go wrong. Before 2.11, a purge of one subject (every delete and
// truncation purges) moves consumers whose filter is wider, such as the
// $all cursor's, past live messages of other subjects: the cursor confirms
// every jump in sequence with a direct get of the filter's next message,
// which depends on no consumer state, and when that finds a message the
// consumer passed over, returns it and goes on with a new consumer after
// it; when the consumer is silent before the filter's last message, it
// checks the same way. A consumer of a single stream's subject moves only
// past that subject's purged messages, so stream reads need no check. The
// cursors of a category's filter, <prefix>.e.<category>.*, are moved by
// the purges of the category's streams and check their jumps the same way:
// on 2.9 a sparse category costs one direct get per message it reads.
//
// A page's byte budget (MaxBytes of a query) ends the page at the event
// that spends it, inside a commit if need be. A commit is one message, so
// a page cut inside one holds that message whole; a filtered read decodes
// a commit whole before it cuts; a backward stream read reads its span
// (at most Limit events) before it keeps the newest within the budget.
// These hold more than the budget, up to a commit's size or Limit events.
//
// # Failures, cancellation and Close
//
// Every call waits for the server only as long as its context allows, and
// when the context has no deadline for at most Config.RequestTimeout per
// request. Close makes every call in flight return varve.ErrClosed at
// once, also when Config.Conn is the caller's. While the connection is
// down (nats.go reconnects), calls fail at once with [ErrUnreachable], and
// a call waiting when it goes down fails within 0.1 s. Errors say "nats: "
// and what failed, never the stream (the Store adds it) nor the URL (it
// may hold credentials).
//
// # Delete, truncate, tombstone
//
// Delete publishes a delete marker on the stream's subject with the last
// sequence as the expected one (so the version check and the delete are one
// atomic step), then purges the subject below the marker. The marker starts
// a new incarnation: the next append gets version 1, and retries of appends
// from before the delete are new appends. A tombstone is a marker that no
// append passes. Truncate purges whole commits below the new floor; a commit
// that the floor cuts stays stored: the floor goes into a marker on the
// subject (stream reads) and a floor entry on <prefix>.f (which $all reads
// fetch before each page, one direct get when nothing changed). If the
// process dies between a marker and its purge, the events stay in $all
// until the next delete or truncate of the stream finishes the purge.
// Deleting a stream also deletes its snapshot.
//
// # Leases and fenced checkpoints
//
// Leases (varve.LeaseStore) are entries of the checkpoint bucket, changed
// by compare-and-set on their revision; expiry is judged by the clock of
// the process that acquires. A lease entry also lists the checkpoints that
// were saved fenced by it (at most 64; one more is refused with
// varve.ErrInvalidArgument, and names are never removed), and a fenced
// checkpoint stores the token of its last save. An Acquire that hands out a
// new token sets it in the entry, then stores it in every listed checkpoint,
// keeping its position, before it returns: two requests per checkpoint and
// one more. So the fence is atomic on every server version without a
// transaction over two keys: a fenced save with an older token that starts
// after a newer Acquire returned is refused with varve.ErrLeaseLost, and
// one in flight during that Acquire lands before it returns (the new
// holder then loads it) or not at all. An Acquire that fails after setting
// its token leaves its fence to the next Acquire of the lease, a renewal
// too, which completes it before it returns. A renewal costs a get and a
// compare-and-set, a fenced save of a listed checkpoint two gets and a
// compare-and-set, the first fenced save of a checkpoint one
// compare-and-set of the entry more. A checkpoint saved without the lease
// (varve.Checkpoints.Save) drops its stored token: do not mix both on one
// name. lease.go in this package argues the design.
//
// # Durability
//
// An append is acknowledged once the server has stored it. With file
// storage, server 2.9 writes asynchronously and syncs to disk every two
// minutes, and has no setting to change that (its configuration parser
// rejects sync_interval): an acknowledged append survives a crash of the
// client and a clean server restart, but a power loss or kernel crash can
// lose up to two minutes of them. Safe configurations: a replicated stream
// (Config.Replicas 3 on a cluster; an append is acknowledged once a quorum
// has it), or, from 2.10 on, "sync_interval: always" in the server's
// jetstream block, which syncs every write at a throughput cost.
// Features.Durable is set for file storage.
//
// # Replicas and clusters: what R1 and R3 promise
//
// Config.Replicas sets the replicas of the stream and the buckets when New
// creates them (1 to 5, default 1; an existing stream keeps its own).
//
// R1 (the default): one server holds the stream. An append is acknowledged
// once that server has stored it (synced as described under Durability).
// While the server is down, every call fails ([ErrUnreachable] or a
// timeout) until it is back, and its disk is the only copy.
//
// R3 (Replicas 3, on a cluster of at least 3 JetStream servers): the
// stream is a Raft group. An append is acknowledged once a quorum (2 of 3)
// has it, so an acknowledged append survives the loss of any one server.
// When the stream's leader is lost, appends fail until the others elect a
// new one; then they go on, and the expected-sequence check of every
// publish is made by the new leader, so optimistic concurrency holds
// across the fail-over. TestClusterLeaderFailover checks this on 2.15.2
// (3 in-process servers on loopback, the stream's leader stopped while 4
// writers append and a reader pages through $all): no acknowledged append
// was lost, $all read afterwards had no gap and no duplicate, the reader
// that ran through the fail-over read a prefix of it. On this machine the
// survivors had a new leader 29-299 ms after the stop (13 runs; the query
// for it may wait 250 ms on a stopped server), and the first append
// started after the stop succeeded 0.02-2.03 s after it (34 runs: 13 under
// 0.3 s, the others 1.94-2.03 s, when every writer was in a call whose
// reply the stop lost, which waited out the test's 2 s request timeout).
// One more run took 5.5 s, while the test's writers retried without a
// pause and kept both cores busy (they pause 20 ms now).
// Fail-over is not tested here on 2.9. Before the backend retried error
// 10164 (see Commits), appends to one stream by one writer failed now and
// then on R3 without any fail-over (BenchmarkClusterAppend, 4 runs of 6).
//
// An append that returns an error has an unknown outcome: it may have been
// stored (the acknowledgement was lost) or not. varve promises no more, and
// offers the way to find out: retry the same events (same ids) with the
// same expectation. If the first try was stored, the retry is answered
// with its original result (the server's dedupe window, then the stream's
// id set, see above), otherwise it is stored now, once. An append that is
// given up is in the log at most once. In the test, writers that retry got
// every append acknowledged exactly once; of the appends that writers gave
// up, some were stored and some not (from 0 of 48 to 3 of 3 in a run).
//
// By server version: this package runs a cluster only on 2.15.2; NATS
// documents the same Raft replication of streams for 2.9, untested here.
// What differs for certain is the disk. On 2.9 a replica writes
// asynchronously and syncs every two minutes (see Durability), so
// acknowledged appends survive the loss of one server but not a power
// loss of two at once; from 2.10 on "sync_interval: always" closes that
// gap. From 2.11 on this backend reads with batched direct gets, which
// with AllowDirect any replica answers, not only the leader (on 2.9 so are
// the single direct gets the backend makes). A follower has applied a
// prefix of the log, so a page read from it has no gap, but it can be
// behind: a read right after an acknowledged append may not see that
// append yet (no read-your-writes on R3), and a reader of $all catches up
// at its next page. Filtered reads could not trust the last message of
// $all as their Through there (it may come from a replica ahead of the one
// answering a category's cursor): in TestClusterLeaderFailover a category
// reader skipped commits in every run, with or without the leader's stop.
// On a replicated stream a filtered page now goes through its own events
// only, and a filter of several categories reads $all with one cursor
// (see ReadAllFiltered); the test's readers of one and of two categories
// then saw every commit in order. From 2.12 on, appends to several streams
// are atomic batches (above), which a cluster proposes as one; their
// fail-over is not tested here. A batch refused with 10164 (a subject of
// it still being replicated) is retried on fresh heads like 10071.
//
// # Concurrency
//
// A Backend is safe for concurrent use. Appends to different streams never
// wait for each other in the backend; appends to one stream race on the
// server's sequence check, and hold a stream's id set locked only to look
// ids up or add them. The backend starts no goroutines of its own but the
// timers that release idle $all cursors (each runs for as long as a
// release takes, and Close stops them); nats.go runs a goroutine for each
// of its subscriptions (request replies, open consumers, Watch), which end
// with Close. Close closes the connection if the backend opened it, not one
// passed in Config.Conn. Watch subscribes to the headers that the stream
// republishes (RePublish, headers only) after it stores an event message,
// so a woken reader finds the commit.
//
// The event-store layer (append, reads, ids, lifecycle) sends its requests
// through an internal JetStream client (internal/jsclient: publish with
// expectations, direct and batched gets, cursors, purges, deletes), which
// bounds every wait and counts requests; stream and key-value
// administration goes through nats.go's jetstream package.
//
// # Performance
//
// Measured on this machine (2 shared cores) in the package's benchmarks,
// medians of 3-5 runs, 100-byte events, file storage, against the machine's
// 2.9.10 server and the in-process 2.15.2 server (sharing the CPU with the
// benchmark; the 2.15.2 load+save figures are medians of 3 runs of
// -benchtime 3000x after stream reads became one batched get there):
//
//	                                     2.9.10              2.15.2 (in-process)
//	raw synchronous publish (baseline)   181 µs              71 µs
//	append 1 event, exact version        200 µs (0.91x rate) 84 µs (0.84x rate)   1 request
//	append 10 events                     213 µs (0.85x)      100 µs (0.70x)       1 request
//	load+save, aggregate cached          2,655 ops/s         6,155 ops/s          2 requests
//	load+save, snapshot + 0-9 events     941 ops/s           2,965 ops/s          6.4 / 3.1 requests
//	load+save, snapshot in each commit   2,301 ops/s         7,959 ops/s          2 / 2 requests
//	load+save, replay 20+ events         565 ops/s           1,886 ops/s          4 / 2 requests
//	$all, pages of 512                   276,000 events/s    352,000 events/s     1.1 requests a page
//	$all, pages of 7                     66,000 events/s     65,000 events/s      1.0 / 1.1 requests a page
//
// The row "snapshot in each commit" (BenchmarkLoadSave/commit-snapshot,
// the snapshot kept in every commit and read with the head; 2026-11-26,
// medians of 3 runs of -benchtime 3000x, alternating with the
// "snapshot" row, which then gave 802 and 2,661 ops/s): 2.87-3.26x the
// "snapshot" cycle on 2.9.10, 2.68-3.15x on 2.15.2 (run by run). A process that meets
// the aggregate for the first time (commit-snapshot-cold) pays 4 requests
// on 2.9.10 and 3 on 2.15.2 (the head, the stream's event ids for the
// append, the publish), against 8.4 and 3.1 with the bucket's snapshots.
//
// The $all rows are medians of 3 runs of BenchmarkReadAll (a reader that
// pages on through 20,000 events in commits of 10) after cursors were kept
// between pages. Before (a consumer created and deleted per page), in two
// runs alternating with this code on 2.9.10: pages of 512 read 18,000-54,000
// events/s against 371,000-824,000 now, pages of 7 805-1,143 against
// 79,000-144,000.
//
// Filtered reads (BenchmarkFilteredCatchUp: a catch-up of a category that
// is 1% of 100,000 events, commits of 10, pages of 512, three runs of 5
// iterations, each iteration timing pushdown, the Store's own filtering and
// an unfiltered read of as many events):
//
//	                                     2.9.10              2.15.2 (in-process)
//	filtered catch-up (1,000 events)     22-23 ms            3.9-4.9 ms
//	  the Store filtering $all instead   3.7-4.6x slower     37-49x slower
//	  requests                           107                 6
//	events/s over unfiltered $all        0.13-0.22x          3.6-4.8x
//
// On 2.9 the consumer of the category's filter confirms each of its jumps
// in sequence with a direct get (see above): one request per commit of a
// sparse category. Appends cost the same in both layouts
// (BenchmarkAppendLayouts, interleaved: 1.01-1.04x on 2.9.10,
// 1.00-1.03x on 2.15.2).
package nats
