package webhook_test

import (
	"io"
	"net/http"
	"time"

	"github.com/varve-go/varve/delivery/webhook"
)

func ExampleNew() {
	hook, err := webhook.New(webhook.Config{
		URL: "https://hooks.example.com/orders",
		// A Standard Webhooks secret; raw key bytes work too.
		Secret:         []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
		Timeout:        5 * time.Second,
		MaxConcurrency: 32,
	})
	if err != nil {
		panic(err)
	}
	defer hook.Close()
	// Pass hook as the sink of delivery.New.
}

func ExampleVerify() {
	secret := []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") // the sender's Config.Secret
	http.HandleFunc("/orders", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read failed", http.StatusServiceUnavailable) // retried
			return
		}
		if err := webhook.Verify(secret, r.Header, body, 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized) // parked
			return
		}
		// Drop a redelivery by r.Header.Get("Idempotency-Key"), handle the
		// delivery.Payload in body, then answer 2xx.
	})
}
