// Package memory is varve's reference backend: everything in process
// memory, nothing durable. It defines the semantics the other backends are
// held to by the conformance suite, and it is the baseline of the lab.
//
// # Concurrency model
//
// Streams are spread over 256 shards, each with its own RWMutex padded to a
// cache line, so appends to different streams do not contend on one lock
// (the sharded-mutex layout of seed 004). The global log is one slice of
// pointers guarded by its own RWMutex. An append holds its stream's shard
// lock while it takes the log lock for the few instructions that assign
// positions and append pointers, so position order is commit order and a
// reader of $all can never see position P+1 before P.
//
// Each event is stored once; the stream and the global log hold pointers to
// it. A single append costs two allocations (the records and one buffer for
// all Data and Metadata bytes, copied so the caller may reuse its slices).
// Reads return the stored byte slices without copying them. Retries and
// duplicates are found by event id: while a stream's ids ascend (those of
// varve.NewEventID and uuid.NewV7 do) by binary search over its events,
// otherwise, from 8 events on, in a map of id fingerprints built the first
// time an id arrives out of order. Truncated and
// deleted events are marked dead in the log and the log is compacted once
// dead entries outnumber live ones, so a workload that prunes old streams
// runs in flat memory.
package memory
