// Package shred is crypto-shredding for varve: the personal data of a
// subject (a person, a customer) is sealed with a data key of its own, and
// erasing the subject destroys the key, so that what it sealed cannot be
// read again from the store, its backups or its replicas, while the log
// keeps every event, position and version.
//
// A [Shredder] seals an event's data as a whole ([Shredder.Seal]) or
// named fields of its JSON object ([Shredder.SealFields]) with AES-256-GCM
// under the subject's data key, made at its first use. Data keys are kept
// by the store's backend ([varve.KeyStore]: a table in SQLite and
// PostgreSQL, a key-value bucket on NATS, a map in memory) only wrapped
// by a [MasterKey] that the application holds (built in: a 32-byte AES
// key from the environment or a file; a key management service can stand
// behind the interface). Given to the store as its [varve.Config.Opener],
// the Shredder opens sealed events on every read: aggregates, projections,
// subscriptions, the server and the CLI see plaintext without a change.
// Readers that keep events ask for them [varve.Sealed] and open each at
// use (package delivery opens an event at each attempt to send it).
//
// [Shredder.Erase] destroys the subject's key and records a [Report] in
// [ErasureStream]. From then on a read returns, in place of the sealed
// data (or of each sealed field), the marker {"$erased":{"subject":...,
// "key":...}} ([Erased]); nothing fails. Read models that copied personal
// data follow ErasureStream and remove the subject's rows
// ([ReadModelErased] adds their counts to the report). Another process
// stops using an erased key within its [Config].CacheTTL.
//
// Subjects are stored in the clear beside the data they seal: use opaque
// ids. Event types, tags, metadata and stream ids are not sealed.
// [Shredder.Rotate] wraps every key again with a new master key while the
// store serves; destroying the old master key afterwards also erases what
// older backups hold of erased subjects. docs/privacy.md has the model, the
// reach of an erasure and what it cannot reach.
package shred
