package varve

import (
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// lastIDHigh is the first half of the last id NewEventID made: 48 bits of
// Unix milliseconds, the version and a 12-bit counter.
var lastIDHigh atomic.Uint64

// NewEventID returns a UUIDv7 (RFC 9562) that sorts after every id it
// returned before in this process: 48 bits of Unix milliseconds, a 12-bit
// counter that starts at a random value below 2,048 in each millisecond
// and counts up within it (RFC 9562's method 1; past 4,095 the
// millisecond field moves ahead of the clock until the clock catches up),
// and 62 random bits from the runtime's ChaCha8 generator, which is seeded
// from the operating system. Ids that ascend let a backend find them
// without an index (the memory backend does). It does not allocate, unlike
// uuid.NewV7, which reads crypto/rand through an interface on every call
// and serializes its callers on a mutex.
func NewEventID() uuid.UUID {
	ms := uint64(time.Now().UnixMilli())
	for {
		last := lastIDHigh.Load()
		hi := ms<<16 | 0x7000 | rand.Uint64()&0x7ff
		if hi <= last {
			if hi = last + 1; hi&0xfff == 0 {
				// The counter wrapped into the version bits: the next
				// millisecond, counter 0.
				hi = (last>>16+1)<<16 | 0x7000
			}
		}
		if lastIDHigh.CompareAndSwap(last, hi) {
			var u uuid.UUID
			binary.BigEndian.PutUint64(u[0:8], hi)
			binary.BigEndian.PutUint64(u[8:16], rand.Uint64())
			u[8] = 0x80 | u[8]&0x3f // RFC 9562 variant
			return u
		}
	}
}
