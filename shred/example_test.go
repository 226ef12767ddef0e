package shred_test

import (
	"context"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/shred"
)

func Example() {
	ctx := context.Background()
	// In production: shred.MasterKeyFromEnv("VARVE_MASTER_KEY"), or a KMS.
	text, _ := shred.NewMasterKeyText("m1")
	master, _ := shred.ParseMasterKey(text)

	b := memory.New()
	sh, _ := shred.New(b, shred.Config{Master: master})
	store, _ := varve.New(b, varve.Config{Opener: sh})
	defer store.Close()

	ev, _ := sh.SealFields(ctx, "customer-42", varve.NewEvent("CustomerRegistered",
		[]byte(`{"id":42,"email":"ada@example.com","plan":"pro"}`)), "email")
	_, _ = store.Append(ctx, "customer-42", varve.NoStream, ev)

	show := func() {
		for e, err := range store.ReadStream(ctx, "customer-42") {
			if err != nil {
				fmt.Println(err)
				return
			}
			if _, erased := shred.Erased(e.Data); erased {
				fmt.Println("the email is erased; the plan and id stay")
				continue
			}
			fmt.Println(string(e.Data))
		}
	}
	show()
	report, _ := sh.Erase(ctx, store, "customer-42", shred.EraseOptions{Count: true})
	fmt.Println("erased events:", report.Events)
	show()
	// Output:
	// {"id":42,"email":"ada@example.com","plan":"pro"}
	// erased events: 1
	// the email is erased; the plan and id stay
}
