// Package retention removes old events from a [varve.Store] by policy: per
// stream or per category, a maximum age, a maximum count and a version
// below which everything goes, enforced by a [Scavenger] that truncates
// streams on a schedule.
//
// # Policies
//
// A [Policy] applies to a [Target]: one stream (Target.Stream) or every
// stream of a category (Target.Category, the category as
// [varve.Store.Category] computes it). A stream's own policy replaces its category's, so a stream
// can be exempted with the zero Policy (no limit). The limits combine: the
// scavenger removes what any of them removes.
//
//   - MaxAge: the events before the first one not older than MaxAge (by
//     [varve.RecordedEvent.RecordedAt], the backend's clock, against the
//     scavenger's Config.Now). An older event after a newer one stays until
//     the newer one is removed: only a prefix of a stream goes.
//   - MaxCount: all but the last MaxCount events.
//   - TruncateBefore: the events below that version.
//
// The last event of a stream is never removed unless the policy sets
// AllowEmpty: a stream keeps its latest state however old it is. A
// truncated stream keeps its version, and its next append goes on after it.
//
// [Set], [Remove] and [List] keep the policies in the store itself, as the
// events of the system stream [PoliciesStream]: each event holds the whole
// set, written at the expected version of the one it replaces (concurrent
// changes retry, none is lost), so every backend keeps them without a
// schema of its own and the latest event is the set in force. Older sets
// are truncated away; the last [KeptPolicySets] stay as a history. At most
// [MaxRules] targets have a policy. Category policies need a store that
// lists its streams ([varve.Capabilities].ListStreams); without it Set
// refuses them with [varve.ErrNotSupported].
//
// # The scavenger
//
// A [Scavenger] applies the policies in passes: [Scavenger.ScavengeOnce] is
// one, [Scavenger.Run] makes one every Config.Interval until its context
// ends. A pass reads the policies once, visits each target's streams (a
// category's through [varve.Streams.List], page by page), computes where
// each stream is cut, and truncates it ([varve.Store.Truncate]) in steps of
// at most [TruncateStep] events. An age cut is found by reading the stream
// forward from its first event in pages bounded by count and bytes, sealed
// events left sealed; a stream is never loaded whole. Config.MaxRemove and
// Config.MaxReadBytes bound the events one pass removes and the event
// bytes it reads; a pass that spends either stops, says so in its report
// (Incomplete) and the next one goes on.
//
// Truncation is what keeps readers safe: each backend removes the events
// from the stream and from $all within the contract of $all (a reader that
// resumes after its last position never skips a committed event and never
// sees one twice; positions are not reused), so subscriptions, projections
// and readers of $all run on while the scavenger does. A truncation is
// monotone and idempotent, so two scavengers that overlap do the same work
// twice and no harm. Where the backend keeps leases ([varve.Store.Leases])
// a pass holds the lease Config.Lease for its duration, renewed as it goes,
// so that one process of a fleet scavenges at a time; a pass that finds the
// lease held elsewhere fails with [varve.ErrLeaseHeld] and Run waits for
// its next turn. A backend without leases scavenges from every process that
// runs a Scavenger.
//
// With Config.DryRun a pass only computes and reports what it would
// remove.
//
// A pass records its [Report] (streams visited and truncated, events
// removed, errors, space given back) as an event of the system stream
// [RunsStream], of which the last [KeptReports] stay; [LastReport] reads
// the latest. An error on one stream is counted in the report and the pass
// goes on with the next; the pass itself fails when the policies cannot be
// read, the lease is held or lost, or the context ends (a pass ended by its
// context records no report).
//
// A backend that gives the space of removed events back only when asked
// implements [SpaceReclaimer] (SQLite, with incremental auto-vacuum); a
// pass that removed events asks it. PostgreSQL's deletions are reclaimed by
// its autovacuum, NATS JetStream's truncations purge the messages.
//
// # Limits
//
// A policy changed during a pass applies from the next one. The scavenger
// reads a stream's version, then truncates: a stream deleted and written
// again in between may lose the events of its new life below the version
// computed for the old one (the scavenger looks at the stream's version
// again just before each truncation, which narrows that window to the
// truncation's round trip).
//
// # Concurrency
//
// Set, Remove, List and LastReport are safe for concurrent use, also from
// several processes. A Scavenger's passes run one at a time: ScavengeOnce
// and Run may be called from several goroutines, and wait for each other.
// Run starts no goroutine that outlives it.
package retention
