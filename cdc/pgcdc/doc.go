// Package pgcdc captures changes to ordinary PostgreSQL tables through one
// logical replication slot (the pgoutput plugin) and hands them over as
// transactions: the commit's LSN and time and its inserts, updates, deletes
// and truncates in order, each with its column values decoded by pgx's type
// map.
//
// [Start] checks that the server runs with wal_level=logical, creates the
// publication and the slot when they do not exist (or reuses them), and
// starts streaming from the slot's confirmed flush LSN. [Stream.Next] returns
// the next committed [Transaction]; [Stream.Ack] acknowledges one. The
// slot's confirmed flush LSN moves only to the end of the contiguous prefix
// of acknowledged transactions, so transactions may be acknowledged out of
// order (by concurrent deliveries) and a crash re-delivers at most the
// transactions that were not yet acknowledged.
//
// There are two ways on from a Stream:
//
//   - Straight into a dispatcher: [NewSource] makes a delivery.Source (for
//     delivery.NewFromSource) whose events are the changes, keyed by table
//     and replica identity key ([SourceConfig]), at positions {commit LSN,
//     index + 1}. The dispatcher delivers many keys at once and each key in
//     order; its checkpoint, the contiguous prefix of delivered or parked
//     changes, acknowledges the transactions it covers whole, so the slot's
//     confirmed flush LSN never passes a change in flight and a crash
//     re-delivers at most the transactions that were. Nothing is stored on
//     the way; the dispatcher's parked store (delivery.Config.Parked, e.g.
//     on an embedded SQLite store) keeps the changes it gives up on.
//   - Into varve streams: [AppendToStore] and [Pump] write transactions
//     idempotently, so subscriptions, projections and delivery work on
//     them.
//
// Values: NULL is a nil [Value.Value]; a TOAST-ed value that an update left
// unchanged is not sent by PostgreSQL and is marked [Value.Unchanged], never
// reported as NULL. json and jsonb stay their text (json.RawMessage), uuid is
// a uuid.UUID, numeric a pgtype.Numeric, arrays a []any. A value of a type
// the type map does not know is a [*DecodeError] naming the table and the
// column unless [Config.UnknownTypesAsText] is set.
//
// # Concurrency model
//
// Start starts one goroutine that owns the replication connection: it reads
// and decodes the stream, hands whole transactions to Next through a
// bounded buffer ([Config.Buffer]), sends standby status updates every
// [Config.StatusInterval] (and answers the server's keepalive requests)
// whether or not the consumer is calling Next, and reconnects with back-off
// when the connection drops, resuming after the last transaction it handed
// over, so a dropped connection neither loses nor repeats a transaction
// within one Stream. Ack may be called from any goroutine. Close stops the
// goroutine, sends the last status update and closes the connection.
//
// The administration functions ([EnsurePublication], [EnsureSlot],
// [Inspect], [DropSlot], [DropPublication], [CheckWALLevel]) use an ordinary
// connection.
package pgcdc
