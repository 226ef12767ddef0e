package varve

import (
	"encoding/binary"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
)

// NewEventID returns a UUIDv7 (RFC 9562): 48 bits of Unix milliseconds and 74
// random bits from the runtime's ChaCha8 generator, which is seeded from the
// operating system. It does not allocate, unlike uuid.NewV7, which reads
// crypto/rand through an interface on every call.
func NewEventID() uuid.UUID {
	var u uuid.UUID
	ms := uint64(time.Now().UnixMilli())
	binary.BigEndian.PutUint64(u[0:8], ms<<16|rand.Uint64()&0xffff)
	binary.BigEndian.PutUint64(u[8:16], rand.Uint64())
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // RFC 9562 variant
	return u
}
