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
// transactions that were not yet acknowledged. [AppendToStore] and [Pump]
// write transactions into varve streams idempotently.
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
