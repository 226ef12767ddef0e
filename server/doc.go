// Package server is varve's HTTP face for operators: an [http.Handler] that
// serves a JSON API under /api/v1 and a web console over one [varve.Store].
// `varve serve` runs it; a service may mount it in its own mux (under a
// path prefix with [http.StripPrefix]: the console uses relative URLs).
//
// # The API
//
//	GET  /api/v1/health                              liveness: 200 while the process serves (no token)
//	GET  /api/v1/ready                               readiness: 200 when the store answers, else 503 (no token)
//	GET  /api/v1/openapi.json                        this API in OpenAPI 3.1 (TestOpenAPI holds it to the routes)
//	GET  /api/v1/info                                backend, capabilities, writes, $all's last position
//	GET  /api/v1/dashboard?since=                    the dashboard's samples (see Dashboard), newer than since
//	GET  /api/v1/streams?prefix=&after=&limit=&system=   streams by prefix, in byte order, paged
//	GET  /api/v1/streams/{id}, /api/v1/streams/{id}/events?from=&direction=&limit=   a stream's info; a page of it
//	POST /api/v1/streams/{id}/events                 append (writes enabled)
//	POST /api/v1/streams/{id}/truncate               remove the events below {"before": N} (writes enabled)
//	DELETE /api/v1/streams/{id}?expected_version=&tombstone=   delete, or tombstone for good (writes enabled)
//	GET  /api/v1/all?after=&limit=&system=&category=&type=&stream_prefix=   a page of $all (next, more, end)
//	GET  /api/v1/all?direction=backward&before=&...  a page of $all newest first, before a position or from the end
//	GET  /api/v1/all/tail?after=&system=&category=&type=&stream_prefix=     $all live, as Server-Sent Events
//	GET  /api/v1/events?id=|correlation_id=&before=&scan=&limit=   find events, reading $all backward (next, end, scanned)
//	GET  /api/v1/dcb/read?query=&options=, POST /api/v1/dcb/append   the dcb.events interface (see dcbhttp.go)
//	GET  /api/v1/subscriptions?prefix=               consumers: checkpoints, lag, parked counts
//	GET  /api/v1/subscriptions/{name}                one consumer and its parked events
//	POST /api/v1/subscriptions/{name}/parked/replay  replay parked events (writes enabled, a replay sink or a projection)
//	POST /api/v1/subscriptions/{name}/parked/skip    drop parked events (writes enabled)
//	POST /api/v1/subscriptions/{name}/reset          move a checkpoint (writes enabled)
//	GET  /api/v1/projections, /api/v1/projections/{name}   projections: versions, current, state, lag, parked
//	POST /api/v1/projections/{name}/pause|resume|rebuild|promote   control a projection (writes enabled)
//	GET  /api/v1/retention                           retention policies and the scavenger's last pass (package retention)
//	PUT  /api/v1/retention, DELETE /api/v1/retention?stream=|category=   set or remove a policy (writes enabled)
//	GET  /api/v1/erasures?subject=&limit=, POST /api/v1/erasures   erasure reports; erase a subject (writes enabled, the store's Opener a shred.Shredder)
//	GET  /api/v1/workflows/{name}[/instances/{instance}], POST .../instances/{instance}/cancel|retry   workflow instances (package workflow); cancel or retry one (writes enabled)
//	GET  /api/v1/reports, /api/v1/reports/{name}     the lab's HTML reports of Config.Reports
//
// Stream ids and names in a path are path-escaped ("a%2Fb" for "a/b").
// Positions are in their text form ("12", "7:3"). Event data and metadata
// that are JSON in UTF-8 appear as JSON ("data": {...}); other bytes as
// base64 ("data_base64"). An append refuses JSON data or metadata that is
// not UTF-8 (send such bytes as base64). An append names its expected version ("any",
// "no-stream", "stream-exists" or a number) and may give each event an id:
// sending the same ids again after an ambiguous failure is an idempotent
// retry: it answers 201 with the first append's result and stores nothing
// new, whatever data the re-sent events carry (the store keeps the first
// payload; a client that must know compares it with a read). $all pages
// and the live tail leave the events of system streams out unless asked
// (system=true), as the CLI does; a page of $all gives where the next page
// starts (next: its after, or its before backward) and says whether it
// reached the end (end; the start, backward). No index serves a lookup by
// event id or correlation id ("correlation_id" in the metadata): a search
// reads $all backward, at most scan events (default 10,000), and answers
// its matches with where to go on.
//
// Truncate, delete and tombstone are the library's (a stream never
// written can be tombstoned, which reserves its id) and answer 200 with
// the stream's info read after the change; a stream not there is a 404, a
// tombstoned one a 410; system streams are refused with 403
// "system_stream".
//
// Read your writes: an append answers its position in the header
// Varve-Position; a read of a stream or of $all, and of a projection or a
// consumer, that names it as min_position waits until the log is readable
// through it, or until the projection or consumer has handled it, for at
// most wait (default 5s), then answers, or 504 "position_not_reached".
//
// Errors are JSON, {"error": {"code": "...", "message": "..."}}, with the
// status that fits: 400 for bad input (the message names the parameter or
// field), 401 without the token, 403 for a write while writes are
// disabled or to a system stream, 404, 405 (its Allow lists the path's methods, as the 204 of an
// OPTIONS does), 409 for a version conflict or a duplicate id, 410 for a
// tombstoned stream, 413 for a body over the limit, 415, 501 for what the
// backend or the server cannot do, 503 while the store is closed or while
// the server's read budget stays in use ("busy", see Memory), 504 when the
// request's time ran out. A panic in a handler is a 500 with the same
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
// runs is its heartbeat (subscription.Running): running, stopped since it
// was last seen (subscription.LastSeen), or never seen. Replaying parked
// events needs a sink, which Config.Replay gives per subscription; those of
// a projection's version (projection-<name>-v<version>) go back through
// its runner instead (projection.ReplayParked: 202 with the request,
// which the runner carries out within its control poll). Skipping and
// moving a checkpoint need only the store. A replay or skip that names
// a position with no parked event is refused (404 "not_parked", the
// positions in the error) and does nothing. A consumer that runs while
// its checkpoint is moved saves its own position over it: stop it first.
//
// # Dashboard
//
// The dashboard's figures are sampled by the server, one goroutine from
// the first /api/v1/dashboard request until [Server.Close] or
// DashboardWindow without a request, so that every viewer sees the same
// samples; docs/server.md says what a sample holds and how it is bounded.
//
// # Security
//
// Every request but health and readiness needs the bearer token of
// Config.Token, compared in constant time (or that token as the password
// of Basic authentication on the DCB interface, for the DCB suite); mutating
// requests also need Config.Writes. The console's static files are served without it: they
// are the same in every build and hold no data; the console asks for the
// token and sends it as a header, so no cookie and no ambient credential
// exist for a cross-site request to use. Request bodies are bounded
// (Config.MaxBodyBytes), every request but a live tail has a deadline
// (Config.RequestTimeout), which also ends the reading of its body (408
// for a body not sent in time), live tails are bounded in number
// (Config.MaxFollowers) and end when a client stops reading. Responses
// carry a Content-Security-Policy and no-store caching, and those to a
// request that came over TLS Strict-Transport-Security (two years; behind
// a proxy that ends TLS, that header is the proxy's to send). The token
// appears in no response and no log line; [NewHTTPServer] sets the listener's
// header, read and idle timeouts.
//
// # Memory
//
// What responses hold of events is bounded in bytes, whatever the size of
// the events and the number of requests. With P = Config.MaxPageBytes, R =
// Config.MaxReadBytes and E = the store's MaxEventSize: a page, and each
// batch a live tail writes, holds at most P + E bytes of data and
// metadata; all responses together hold at most R (a page takes P + E of
// it before it reads, in order of arrival, and gives each event's bytes
// back once written; 503 "busy" when its time runs out first); a response
// encodes one event at a time. The live heap of events in responses stays
// under 4 x R, about 256 MiB with the defaults (TestHeapBoundedByBytes);
// docs/server.md derives it and lists what is not counted.
//
// # Concurrency
//
// A Server is safe for concurrent use. Each request runs in its caller's
// goroutine, a live tail included; the one goroutine of its own is the
// dashboard's sampler (see Dashboard). [Server.Close] ends the live tails,
// so that an [http.Server.Shutdown] after it returns, and stops the
// sampler.
package server
