package delivery

// Headers that the sinks of varve set on what they send, whatever the
// transport: the idempotency key ([Delivery.Key]), the attempt, and where
// the event is in the store.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderAttempt        = "Varve-Attempt"
	HeaderStream         = "Varve-Stream"
	HeaderVersion        = "Varve-Version"
	HeaderType           = "Varve-Type"
	HeaderPosition       = "Varve-Position"
)
