// Command readyourwrites is a small order service that reads its own
// writes from an asynchronous read model. POST /orders appends an event
// and answers the append's position as a consistency token (the header
// Varve-Position); GET /orders/{id}?after=<token> waits, bounded, until
// the projection that keeps the read model has applied that position,
// then answers from the read model. Without the token a read may not see
// the order yet: the projection runs behind the log.
//
//	go run ./examples/readyourwrites -store sqlite:///tmp/orders.db
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/projection"
)

// order is the read model's row of an order.
type order struct {
	ID    string `json:"id"`
	Items int    `json:"items"`
}

// service is the HTTP face over the store and the read model that its
// projection keeps.
type service struct {
	store  *varve.Store
	runner *projection.Runner
	mu     sync.Mutex
	orders map[string]order
}

func newService(store *varve.Store) (*service, error) {
	s := &service{store: store, orders: map[string]order{}}
	r, err := projection.NewRunner(store, projection.Projection{
		Name: "orders", Version: 1, Filter: varve.Filter{Categories: []string{"order"}},
		Handle: func(_ context.Context, b projection.Batch) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, e := range b.Events {
				var placed struct{ Items int }
				if err := json.Unmarshal(e.Data, &placed); err != nil {
					return err
				}
				id := e.Stream[len("order-"):]
				o := s.orders[id]
				o.ID, o.Items = id, o.Items+placed.Items
				s.orders[id] = o
			}
			return nil
		}}, projection.Config{Promote: true})
	s.runner = r
	return s, err
}

func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Items int }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil || body.Items <= 0 {
			http.Error(w, `want {"items": n}, n > 0`, http.StatusBadRequest)
			return
		}
		data, _ := json.Marshal(body)
		res, err := s.store.Append(r.Context(), "order-"+r.PathValue("id"), varve.Any, varve.NewEvent("ItemsAdded", data))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Varve-Position", res.Position.String())
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		if token := r.URL.Query().Get("after"); token != "" {
			pos, err := varve.ParsePosition(token)
			if err != nil {
				http.Error(w, "after: not a position", http.StatusBadRequest)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
			defer cancel()
			if err := s.runner.WaitFor(ctx, pos); err != nil {
				http.Error(w, "the read model has not caught up yet: ask again", http.StatusServiceUnavailable)
				return
			}
		}
		s.mu.Lock()
		o, ok := s.orders[r.PathValue("id")]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(o)
	})
	return mux
}

func main() {
	storeURL := flag.String("store", "memory:", "the store's URL (package open): memory:, sqlite:///path/orders.db, postgres://..., nats://...")
	addr := flag.String("addr", "127.0.0.1:8080", "where to listen")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	store, err := open.Store(ctx, *storeURL, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	s, err := newService(store)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		if err := s.runner.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Print(err)
			stop()
		}
	}()
	hs := &http.Server{Addr: *addr, Handler: s.routes(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = hs.Shutdown(context.Background())
	}()
	log.Printf("orders on http://%s", *addr)
	if err := hs.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
