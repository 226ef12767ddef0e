package workload

import (
	"context"
	"strconv"

	"github.com/varve-go/varve"
)

// StoragePayload is the data of every event of the storage workloads:
// 100 bytes.
var StoragePayload = []byte(`{"order_id":"ord-000123","customer":"cus-4711","amount_cents":4999,"currency":"EUR","note":"urgent"}`)

// StorageStreams is how many streams a storage workload's worker appends
// to in turn. A lab run first runs one untimed round of StorageStreams ops
// per worker, so that the streams exist before it sizes the store: the
// figure is what an event costs in a stream that is there already.
const StorageStreams = 100

// Storage returns the workloads that measure the bytes an event costs on
// disk (issue #40): appends of events of 100 bytes of data, one or ten an
// append. A lab run settles the store before and after one (VACUUM on
// PostgreSQL, a checkpoint on SQLite) and reports how many bytes its size
// grew by per event appended.
func Storage() []Workload {
	return []Workload{
		storageWorkload("storage-single", "Storage/Single", "append 1 event of 100 bytes to one of 100 streams; bytes on disk per event", 1),
		storageWorkload("storage-batch10", "Storage/Batch10", "append 10 events of 100 bytes to one of 100 streams; bytes on disk per event", 10),
	}
}

func storageWorkload(name, bench, about string, batch int) Workload {
	return Workload{
		Name: name, Bench: bench, About: about, Workers: 1, Unit: Events, Bytes: true,
		Setup: func(_ context.Context, s *varve.Store, p Params) (Prepared, error) {
			return Prepared{PerOp: batch, NewOp: func(w int) Op {
				return appendOp(s, streamNames(p.Prefix+"w"+strconv.Itoa(w)+"-", StorageStreams), StoragePayload, batch, false, false)
			}}, nil
		},
	}
}
