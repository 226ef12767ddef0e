package sqlite_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
)

func TestParseURL(t *testing.T) {
	cases := []struct {
		url  string
		want sqlite.Config
		ok   bool
	}{
		{"sqlite:///var/lib/varve/events.db", sqlite.Config{Path: "/var/lib/varve/events.db"}, true},
		{"sqlite://localhost/tmp/e.db", sqlite.Config{Path: "/tmp/e.db"}, true},
		{"sqlite::memory:", sqlite.Config{Path: sqlite.Memory}, true},
		{"sqlite:data/events.db", sqlite.Config{Path: "data/events.db"}, true},
		{"sqlite:///tmp/with%20space.db", sqlite.Config{Path: "/tmp/with space.db"}, true},
		{"sqlite:///tmp/e.db?synchronous=normal&busy_timeout=2s&read_conns=8&max_batch_events=500&max_batch_ops=64&max_batch_delay=1ms&max_size=1048576&quick_check=true&watch_interval=250ms",
			sqlite.Config{Path: "/tmp/e.db", Synchronous: sqlite.SyncNormal, BusyTimeout: 2 * time.Second, ReadConns: 8,
				MaxBatchEvents: 500, MaxBatchOps: 64, MaxBatchDelay: time.Millisecond, MaxSize: 1 << 20, QuickCheck: true,
				WatchInterval: 250 * time.Millisecond}, true},
		{"sqlite:///tmp/e.db?synchronous=FULL", sqlite.Config{Path: "/tmp/e.db"}, true},
		{"postgres:///tmp/e.db", sqlite.Config{}, false},
		{"sqlite://", sqlite.Config{}, false},
		{"sqlite://db.example.com/e.db", sqlite.Config{}, false},
		{"sqlite:///tmp/e.db?synchronous=off", sqlite.Config{}, false},
		{"sqlite:///tmp/e.db?busy_timeout=5", sqlite.Config{}, false},
		{"sqlite:///tmp/e.db?read_conns=-1", sqlite.Config{}, false},
		{"sqlite:///tmp/e.db?journal=delete", sqlite.Config{}, false},
		{"sqlite:///tmp/e.db?watch_interval=10us", sqlite.Config{}, false},
		{"sqlite:///tmp/e.db?watch_interval=1h", sqlite.Config{}, false},
		{"sqlite:///tmp/e.db?max_size=1&max_size=2", sqlite.Config{}, false},
		{"sqlite:///tmp/e.db?synchronous=normal;drop", sqlite.Config{}, false},
		{"sqlite:///tmp/e.db?read_conns=%zz", sqlite.Config{}, false},
		{"sqlite://u:pa55word@/tmp/e.db", sqlite.Config{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			got, err := sqlite.ParseURL(tc.url)
			if !tc.ok {
				if !errors.Is(err, varve.ErrInvalidArgument) {
					t.Fatalf("got %+v, %v; want an ErrInvalidArgument", got, err)
				}
				if strings.Contains(err.Error(), "pa55word") {
					t.Fatalf("error shows the password: %v", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	cases := []struct {
		name string
		cfg  sqlite.Config
	}{
		{"no path", sqlite.Config{}},
		{"unknown synchronous", sqlite.Config{Path: sqlite.Memory, Synchronous: 7}},
		{"negative busy timeout", sqlite.Config{Path: sqlite.Memory, BusyTimeout: -1}},
		{"negative max size", sqlite.Config{Path: sqlite.Memory, MaxSize: -1}},
		{"negative watch interval", sqlite.Config{Path: sqlite.Memory, WatchInterval: -time.Millisecond}},
		{"watch interval below the minimum", sqlite.Config{Path: sqlite.Memory, WatchInterval: sqlite.MinWatchInterval - 1}},
		{"watch interval above the maximum", sqlite.Config{Path: sqlite.Memory, WatchInterval: sqlite.MaxWatchInterval + 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := sqlite.New(t.Context(), tc.cfg)
			if err == nil {
				b.Close()
			}
			if !errors.Is(err, varve.ErrInvalidArgument) {
				t.Fatalf("New(%+v): %v, want ErrInvalidArgument", tc.cfg, err)
			}
		})
	}
}
