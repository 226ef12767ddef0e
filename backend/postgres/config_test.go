package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

func TestParseURL(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want postgres.Config
		err  bool
	}{
		{"plain", "postgres://u@127.0.0.1:5432/db?sslmode=disable",
			postgres.Config{ConnString: "postgres://u@127.0.0.1:5432/db?sslmode=disable"}, false},
		{"postgresql scheme", "postgresql://127.0.0.1/db",
			postgres.Config{ConnString: "postgresql://127.0.0.1/db"}, false},
		{"varve parameters", "postgres://u:pw@h/db?sslmode=disable&varve_schema=orders&varve_max_conns=16&varve_no_migrate=true&varve_no_notify=1&varve_notify_interval=5ms&varve_watch_poll=2s",
			postgres.Config{ConnString: "postgres://u:pw@h/db?sslmode=disable", Schema: "orders", MaxConns: 16,
				NoMigrate: true, NoNotify: true, NotifyInterval: 5 * time.Millisecond, WatchPoll: 2 * time.Second}, false},
		{"pool parameters pass through", "postgres://h/db?pool_max_conns=9",
			postgres.Config{ConnString: "postgres://h/db?pool_max_conns=9"}, false},
		{"wrong scheme", "nats://127.0.0.1:4222", postgres.Config{}, true},
		{"unknown varve parameter", "postgres://h/db?varve_shema=x", postgres.Config{}, true},
		{"bad number", "postgres://h/db?varve_max_conns=many", postgres.Config{}, true},
		{"negative number", "postgres://h/db?varve_max_conns=-1", postgres.Config{}, true},
		{"bad duration", "postgres://h/db?varve_watch_poll=soon", postgres.Config{}, true},
		{"schema too long", "postgres://h/db?varve_schema=" + string(make([]byte, 64)), postgres.Config{}, true},
		{"not a url", "postgres://h/db\x7f", postgres.Config{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := postgres.ParseURL(tc.raw)
			if tc.err {
				if !errors.Is(err, varve.ErrInvalidArgument) {
					t.Fatalf("ParseURL(%q) = %+v, %v; want ErrInvalidArgument", tc.raw, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseURL(%q)\n got %+v, %v\nwant %+v", tc.raw, got, err, tc.want)
			}
		})
	}
}
