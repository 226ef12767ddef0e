package varve_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

func Example() {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	// A new stream: expect that it does not exist yet.
	res, err := store.Append(ctx, "order-1", varve.NoStream,
		varve.Event{Type: "OrderPlaced", Data: []byte(`{"sku":"A-1","qty":2}`)},
		varve.Event{Type: "OrderPaid", Data: []byte(`{"amount":40}`)},
	)
	if err != nil {
		panic(err)
	}
	fmt.Println("versions", res.FirstVersion, "to", res.LastVersion)

	// A writer that read version 1 loses the race.
	_, err = store.Append(ctx, "order-1", varve.Exact(1), varve.Event{Type: "OrderCancelled"})
	var conflict *varve.WrongExpectedVersionError
	if errors.As(err, &conflict) {
		fmt.Println("conflict: expected", conflict.Expected, "actual", conflict.Actual)
	}

	for e, err := range store.ReadStream(ctx, "order-1") {
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Version, e.Type, string(e.Data))
	}
	// Output:
	// versions 1 to 2
	// conflict: expected 1 actual 2
	// 1 OrderPlaced {"sku":"A-1","qty":2}
	// 2 OrderPaid {"amount":40}
}

func ExampleStore_ReadAll() {
	ctx := context.Background()
	store, _ := varve.New(memory.New(), varve.Config{})
	defer store.Close()
	store.Append(ctx, "cart-1", varve.Any, varve.Event{Type: "ItemAdded"})
	store.Append(ctx, "cart-2", varve.Any, varve.Event{Type: "ItemAdded"})
	store.Append(ctx, "cart-1", varve.Any, varve.Event{Type: "CheckedOut"})

	// Follow the global log from a checkpoint, a page at a time.
	checkpoint := varve.Start
	for e, err := range store.ReadAll(ctx, checkpoint, varve.PageSize(2)) {
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Position, e.Stream, e.Type)
		checkpoint = e.Position
	}
	fmt.Println("checkpoint", checkpoint)
	// Output:
	// 1 cart-1 ItemAdded
	// 2 cart-2 ItemAdded
	// 3 cart-1 CheckedOut
	// checkpoint 3
}

// The newest events first, as a console shows them: a page of the global
// log read backward from its end, then the page before it.
func ExampleStore_ReadAllPage_backward() {
	ctx := context.Background()
	store, _ := varve.New(memory.New(), varve.Config{})
	defer store.Close()
	for i := range 5 {
		store.Append(ctx, fmt.Sprintf("sensor-%d", i%2), varve.Any, varve.Event{Type: "Measured"})
	}

	page, _ := store.ReadAllPage(ctx, varve.Start, nil, varve.ReadBackward(), varve.Limit(2))
	for _, e := range page.Events {
		fmt.Println(e.Position, e.Stream)
	}
	older, _ := store.ReadAllPage(ctx, page.Through, nil, varve.ReadBackward(), varve.Limit(2))
	for _, e := range older.Events {
		fmt.Println(e.Position, e.Stream)
	}
	fmt.Println("more:", older.Full)
	// Output:
	// 5 sensor-0
	// 4 sensor-1
	// 3 sensor-0
	// 2 sensor-1
	// more: true
}

// A filter reads only the events of some categories, types or streams of
// the global log; the backend serves it from its indexes.
func ExampleFilter() {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	for _, stream := range []string{"order-1", "cart-1", "order-2"} {
		if _, err := store.Append(ctx, stream, varve.Any, varve.NewEvent("Created", nil), varve.NewEvent("Closed", nil)); err != nil {
			panic(err)
		}
	}
	orders := varve.Filter{Categories: []string{"order"}, Types: []string{"Closed"}}
	for e, err := range store.ReadAll(ctx, varve.Start, orders) {
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Stream, e.Version, e.Type)
	}

	// A page goes through the events it passed over, so that a sparse
	// reader's checkpoint moves on.
	page, err := store.ReadAllPage(ctx, varve.Start, nil, varve.Filter{Categories: []string{"cart"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(page.Events), "cart events, through", page.Through)
	// Output:
	// order-1 2 Closed
	// order-2 2 Closed
	// 2 cart events, through 6
}

// A transfer between two accounts: both streams at the versions the
// decision was made on, or neither.
func ExampleStore_AppendMulti() {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	for _, acct := range []string{"account-a", "account-b"} {
		if _, err := store.Append(ctx, acct, varve.NoStream, varve.NewEvent("Opened", nil)); err != nil {
			panic(err)
		}
	}
	transfer := func(from, to string, fromVersion, toVersion varve.Version) error {
		_, err := store.AppendMulti(ctx, []varve.StreamAppend{
			{Stream: from, Expected: varve.Exact(fromVersion), Events: []varve.Event{varve.NewEvent("Debited", []byte(`{"amount":10}`))}},
			{Stream: to, Expected: varve.Exact(toVersion), Events: []varve.Event{varve.NewEvent("Credited", []byte(`{"amount":10}`))}},
		})
		return err
	}
	fmt.Println(transfer("account-a", "account-b", 1, 1))
	// A decision on stale versions changes nothing.
	err = transfer("account-a", "account-b", 2, 1)
	var conflict *varve.WrongExpectedVersionError
	if errors.As(err, &conflict) {
		fmt.Println("conflict on", conflict.Stream, "at version", conflict.Actual)
	}
	info, _ := store.StreamInfo(ctx, "account-a")
	fmt.Println("account-a at version", info.Version)
	// Output:
	// <nil>
	// conflict on account-b at version 2
	// account-a at version 2
}

func ExampleStore_Capabilities() {
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	caps := store.Capabilities()
	fmt.Println("tags:", caps.Tags, "durable:", caps.Durable)
	// Output:
	// tags: true durable: false
}

// A decorator finds the capability of the backend it wraps with As.
func ExampleAs() {
	var b varve.Backend = memory.New()
	defer b.Close()
	if w, ok := varve.As[varve.Watcher](b); ok {
		fmt.Println("wakes readers:", w.Watch() != nil)
	}
	// Output: wakes readers: true
}

// An interface that carries positions as JSON numbers hands out each
// event's number and takes a number back as the position to read after.
func ExampleStore_NumberPositions() {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if _, err := store.Append(ctx, "order-1", varve.NoStream, varve.Event{Type: "OrderPlaced"}, varve.Event{Type: "OrderPaid"}); err != nil {
		panic(err)
	}
	page, err := store.ReadAllPage(ctx, varve.Start, nil)
	if err != nil {
		panic(err)
	}
	ns, err := store.NumberPositions(ctx, []varve.Position{page.Events[0].Position, page.Events[1].Position})
	if err != nil {
		panic(err)
	}
	fmt.Println("numbers:", ns)

	// A client that has seen the first event goes on after its number.
	after, err := store.PositionOfNumber(ctx, ns[0])
	if err != nil {
		panic(err)
	}
	for e, err := range store.ReadAll(ctx, after) {
		if err != nil {
			panic(err)
		}
		fmt.Println("next:", e.Type)
	}
	// Output:
	// numbers: [1 2]
	// next: OrderPaid
}
