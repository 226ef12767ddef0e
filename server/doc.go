// Package server is varve's HTTP face for operators: an [http.Handler] that
// serves a JSON API under /api/v1 and a web console over one [varve.Store].
// `varve serve` runs it; a service may mount it in its own mux (under a
// path prefix with [http.StripPrefix]: the console uses relative URLs).
//
// # The API
//
//	GET  /api/v1/health                              liveness: 200 while the process serves (no token)
//	GET  /api/v1/ready                               readiness: 200 when the store answers, else 503 (no token)
//	GET  /api/v1/info                                backend, capabilities, writes, $all's last position
//	GET  /api/v1/streams?prefix=&after=&limit=&system=   streams by prefix, in byte order, paged
//	GET  /api/v1/streams/{id}                        one stream's info
//	GET  /api/v1/streams/{id}/events?from=&direction=&limit=   a page of the stream, forward or backward
//	POST /api/v1/streams/{id}/events                 append (writes enabled)
//	GET  /api/v1/all?after=&limit=                   a page of $all
//	GET  /api/v1/all/tail?after=                     $all live, as Server-Sent Events
//	GET  /api/v1/subscriptions?prefix=               consumers: checkpoints, lag, parked counts
//	GET  /api/v1/subscriptions/{name}                one consumer and its parked events
//	POST /api/v1/subscriptions/{name}/parked/replay  replay parked events (writes enabled, a replay sink)
//	POST /api/v1/subscriptions/{name}/parked/skip    drop parked events (writes enabled)
//	POST /api/v1/subscriptions/{name}/reset          move a checkpoint (writes enabled)
//	GET  /api/v1/reports, /api/v1/reports/{name}     the lab's HTML reports of Config.Reports
//
// Stream ids and names in a path are path-escaped ("a%2Fb" for "a/b").
// Positions are in their text form ("12", "7:3"). Event data and metadata
// that are JSON appear as JSON ("data": {...}); other bytes as base64
// ("data_base64"). An append names its expected version ("any",
// "no-stream", "stream-exists" or a number) and may give each event an id:
// sending the same ids again after an ambiguous failure is an idempotent
// retry.
//
// Errors are JSON, {"error": {"code": "...", "message": "..."}}, with the
// status that fits: 400 for bad input (the message names the parameter or
// field), 401 without the token, 403 for a write while writes are
// disabled, 404, 405, 409 for a version conflict or a duplicate id, 410 for
// a tombstoned stream, 413 for a body over the limit, 415, 501 for what the
// backend or the server cannot do, 503 while the store is closed, 504 when
// the request's time ran out. A panic in a handler is a 500 with the same
// shape; no response carries a stack.
//
// Pages of events are bounded in bytes as well as in events: a page ends
// at its limit or at the event that takes its data and metadata to
// Config.MaxPageBytes (default 4 MiB), whichever comes first, and holds at
// least one event however big. "more": true says the page stopped at one
// of these bounds, so more may be readable at once: a client pages on from
// "next" (a stream; null when nothing can follow) or "through" ($all)
// until "more" is false.
//
// # Consumers
//
// A store keeps no registry of consumers. What it has: checkpoints (named
// positions; a subscription's checkpoint has its name) and the parked
// events of delivery subscriptions, in the system streams
// "$parked-<name>". The server lists the union: each name with its
// checkpoint, its lag (the events of $all after the checkpoint, counted up
// to Config.LagLimit, system streams left out as subscriptions leave them
// out), whether it is caught up, and its parked events. Whether a consumer
// is running is not known to the store and not shown. Replaying parked
// events needs a sink, which Config.Replay gives per subscription; skipping
// and moving a checkpoint need only the store. A consumer that runs while
// its checkpoint is moved saves its own position over it: stop it first.
//
// # Security
//
// Every request but health and readiness needs the bearer token of
// Config.Token (compared in constant time); mutating requests also need
// Config.Writes. The console's static files are served without it: they
// are the same in every build and hold no data; the console asks for the
// token and sends it as a header, so no cookie and no ambient credential
// exist for a cross-site request to use. Request bodies are bounded
// (Config.MaxBodyBytes), every request but a live tail has a deadline
// (Config.RequestTimeout), live tails are bounded in number
// (Config.MaxFollowers) and end when a client stops reading. Responses
// carry a Content-Security-Policy and no-store caching. The token appears
// in no response and no log line; [NewHTTPServer] sets the listener's
// header, read and idle timeouts.
//
// # Memory
//
// What a response holds of events is bounded in bytes, whatever their
// size and the number of requests. Each page (of a stream or of $all, and
// each batch a live tail writes) holds at most MaxPageBytes plus one event
// of data and metadata; the live tail writes and flushes a batch before it
// reads the next. All responses together hold at most Config.MaxReadBytes
// (default 32 MiB) of it: before it reads, a page takes MaxPageBytes plus
// the store's MaxEventSize from this budget (all of it, when that is
// more), waiting its turn in order of arrival; it keeps what it read,
// gives back each event's bytes once the event is written, and the rest
// when done. A page request that waits for the request's time gets a 503
// "busy"; a live tail waits. Counting a consumer's lag holds one page of
// LagPageBytes plus an event, taken from the same budget. A response
// encodes one event at a time (its JSON, or base64, and the encoder's
// buffer), never the page at once, so with P = MaxPageBytes, R =
// MaxReadBytes and E = the store's MaxEventSize:
//
//	live heap of events in responses  <=  R (events) + 3 x R (their encoding, one event per response)  =  4 x R
//	heap                              ~<  2 x (4 x R) + 64 KiB per connection + the rest of the process
//
// the factor 2 being the garbage the Go collector lets grow between
// collections (GOGC=100; a GOMEMLIMIT lowers it). With the defaults that
// is 256 MiB over the rest of the process however many readers, tails and
// events there are; a page waits for R while P + E > R. An event stored
// under a larger MaxEventSize than the store's now counts beyond its
// page's share. Stream listings hold at most MaxPageLimit names; request
// bodies at most MaxBodyBytes each. What is not bounded here: the parked
// events of a subscription are listed whole (package delivery).
//
// # Concurrency
//
// A Server is safe for concurrent use. It starts no goroutine: each
// request runs in its caller's, a live tail included. [Server.Close] ends
// the live tails, so that an [http.Server.Shutdown] after it returns.
package server
