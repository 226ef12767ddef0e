package postgres_test

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"sync"
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
		err  string // a word the error must hold; "" when the URL is good
	}{
		{"plain", "postgres://u@127.0.0.1:5432/db?sslmode=disable",
			postgres.Config{ConnString: "postgres://u@127.0.0.1:5432/db?sslmode=disable"}, ""},
		{"postgresql scheme", "postgresql://127.0.0.1/db",
			postgres.Config{ConnString: "postgresql://127.0.0.1/db"}, ""},
		{"varve parameters", "postgres://u:pw@h/db?sslmode=disable&varve_schema=orders&varve_max_conns=16&varve_no_migrate=true&varve_no_notify=1&varve_notify_interval=5ms&varve_watch_poll=2s",
			postgres.Config{ConnString: "postgres://u:pw@h/db?sslmode=disable", Schema: "orders", MaxConns: 16,
				NoMigrate: true, NoNotify: true, NotifyInterval: 5 * time.Millisecond, WatchPoll: 2 * time.Second}, ""},
		{"pgx parameters pass through", "postgres://h/db?pool_max_conns=9&connect_timeout=3&application_name=app&search_path=x",
			postgres.Config{ConnString: "postgres://h/db?application_name=app&connect_timeout=3&pool_max_conns=9&search_path=x"}, ""},
		{"schema with a quote", "postgres://h/db?varve_schema=o%27brien",
			postgres.Config{ConnString: "postgres://h/db", Schema: "o'brien"}, ""},
		{"wrong scheme", "nats://127.0.0.1:4222", postgres.Config{}, "scheme"},
		{"unknown varve parameter", "postgres://h/db?varve_shema=x", postgres.Config{}, "unknown parameter varve_shema"},
		{"upper-case varve parameter", "postgres://h/db?VARVE_SCHEMA=x", postgres.Config{}, "unknown parameter VARVE_SCHEMA"},
		{"parameter given twice", "postgres://h/db?varve_schema=a&varve_schema=b", postgres.Config{}, "varve_schema given 2 times"},
		{"semicolon in the query", "postgres://h/db?varve_schema=bad-schema;drop", postgres.Config{}, "malformed query"},
		{"bad escape in the query", "postgres://h/db?varve_schema=%zz", postgres.Config{}, "malformed query"},
		{"bad number", "postgres://h/db?varve_max_conns=many", postgres.Config{}, "varve_max_conns"},
		{"negative number", "postgres://h/db?varve_max_conns=-1", postgres.Config{}, "negative"},
		{"bad duration", "postgres://h/db?varve_watch_poll=soon", postgres.Config{}, "varve_watch_poll"},
		{"schema too long", "postgres://h/db?varve_schema=" + strings.Repeat("s", 64), postgres.Config{}, "63"},
		{"schema with NUL", "postgres://h/db?varve_schema=col%00x", postgres.Config{}, "NUL"},
		{"schema pg_", "postgres://h/db?varve_schema=pg_varve", postgres.Config{}, "pg_"},
		{"schema information_schema", "postgres://h/db?varve_schema=information_schema", postgres.Config{}, "information_schema"},
		{"schema public", "postgres://h/db?varve_schema=public", postgres.Config{}, "public"},
		{"not a url", "postgres://h/db\x7f", postgres.Config{}, "control character"},
		{"bad escape in the password", "postgres://u:p%zzword@h/db", postgres.Config{}, "escape"},
		{"bad port", "postgres://u:pw@h:port/db", postgres.Config{}, "port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := postgres.ParseURL(tc.raw)
			if tc.err != "" {
				if !errors.Is(err, varve.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseURL(%q) = %+v, %v; want ErrInvalidArgument saying %q", tc.raw, got, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseURL(%q)\n got %+v, %v\nwant %+v", tc.raw, got, err, tc.want)
			}
		})
	}
}

// TestNewHidesPassword: a connection string that pgx cannot parse, or
// whose server refuses it, gives an error that names the problem and not
// the password.
func TestNewHidesPassword(t *testing.T) {
	const secret = "Zq9Secret"
	for _, tc := range []struct {
		conn, problem string
	}{
		{"postgres://u:" + secret + "@127.0.0.1:port/db", "invalid port"},
		{"postgres://u:" + secret + "@127.0.0.1/db?connect_timeout=soon", "invalid connect_timeout"},
		{"postgres://u:" + secret + "@127.0.0.1/db?pool_max_conns=many", "cannot parse pool_max_conns"},
		{"host=127.0.0.1 password=" + secret + " port=x", "invalid port"},
		{"host=127.0.0.1 password='" + secret + "", "failed to parse as keyword/value"},
		{"postgres://u:" + secret + "@127.0.0.1:1/db?sslmode=disable", "connect"}, // nothing listens on port 1
	} {
		_, err := postgres.New(context.Background(), postgres.Config{ConnString: tc.conn, ConnectTimeout: 2 * time.Second})
		if err == nil || !strings.Contains(err.Error(), tc.problem) || strings.Contains(err.Error(), secret) {
			t.Errorf("New(%q): %v; want an error saying %q without the password", tc.conn, err, tc.problem)
		}
	}
}

// TestSchemaNamesRefused: a Config with a schema varve cannot own is
// refused before any connection is made.
func TestSchemaNamesRefused(t *testing.T) {
	for _, schema := range []string{"col\x00x", "pg_catalog", "pg_x", "information_schema", "public", strings.Repeat("é", 32), "\xff"} {
		_, err := postgres.New(context.Background(), postgres.Config{ConnString: "postgres://127.0.0.1:1/none", Schema: schema})
		if !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("schema %q: %v, want ErrInvalidArgument", schema, err)
		}
	}
}

// FuzzParseURL: whatever else is wrong with a URL, an error never shows its
// password, in the user info or in the password and sslpassword
// parameters, nor a long piece of it.
func FuzzParseURL(f *testing.F) {
	for _, s := range [][5]string{
		{"u", "Zq9Secret", "127.0.0.1:5432", "db", "sslmode=disable"},
		{"u", "p%zzword", "h", "db", ""},
		{"u", "Zq9Secret", "h:badport", "db", ""},
		{"u", "Zq9Secret", "h:5432", "db", "varve_schema=bad-schema;drop"},
		{"u", "Zq9Secret", "h", "db", "varve_schema=%zz"},
		{"u", "Zq9Secret", "h", "db", "varve_unknown=1"},
		{"u", "Zq9Secret", "h", "db", "varve_max_conns=x"},
		{"u", "Zq9:Sec@ret", "h", "db", ""},
		{"u", "Zq9Secret", "[::1", "db", ""},
		{"u", "Zq9Secret\x7f", "h", "db", ""},
		{"u", "Zq9Secret", "h", "db", "varve_schema=public"},
		{"", "Zq9Secret", "h%zz", "d%b", "a=%"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Fuzz(func(t *testing.T, user, password, hostport, db, query string) {
		// Unescaped delimiters move the password out of its place: what
		// the URL then says is not a password.
		if len(password) < 6 || strings.ContainsAny(password, "@/?#&") || strings.ContainsAny(user, "@/?#:") ||
			strings.ContainsAny(hostport, "@/?#") || strings.ContainsAny(db, "?#") || strings.Contains(query, "#") {
			return
		}
		urls := []string{
			"postgres://" + user + ":" + password + "@" + hostport + "/" + db + "?" + query,
			"postgresql://" + user + "@" + hostport + "/" + db + "?password=" + password + "&" + query,
			"postgres://" + hostport + "/" + db + "?" + query + "&sslpassword=" + password,
		}
		for _, raw := range urls {
			_, err := postgres.ParseURL(raw)
			if err == nil {
				continue
			}
			msg := err.Error()
			// Only pieces with a byte that nothing but the password holds
			// can show it; the rest may come from other parts of the URL,
			// from the error's own words or from %XX escapes.
			rest := strings.Replace(raw, password, "", 1) + vocabulary + "%0123456789ABCDEFabcdef"
			own := func(piece string) bool {
				for i := 0; i < len(piece); i++ {
					if strings.IndexByte(rest, piece[i]) < 0 {
						return true
					}
				}
				return false
			}
			for n := 6; n <= min(12, len(password)); n++ {
				for i := 0; i+n <= len(password); i++ {
					if piece := password[i : i+n]; own(piece) && strings.Contains(msg, piece) {
						t.Fatalf("ParseURL(%q) error %q shows %q of the password", raw, msg, piece)
					}
				}
			}
		}
	})
}

// vocabulary is text the errors hold whatever the input.
const vocabulary = "postgres: parse URL xxxxx: scheme must be postgres or postgresql malformed query string " +
	"bad % escape invalid character in the host invalid port control character in the URL malformed URL " +
	"unknown parameter (a long name) (a name with unusual characters) is not a valid value given times " +
	"schema name is bytes, PostgreSQL keeps 63 contains NUL is not valid UTF-8 invalid argument"

// TestConnectTimeout: against a server that accepts TCP connections and
// never answers, New fails once the connect timeout has passed, whether it
// comes from the URL, the Config or the default, and says so.
func TestConnectTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	base := "postgres://varve@" + ln.Addr().String() + "/none?sslmode=disable"
	for _, tc := range []struct {
		name    string
		url     string
		timeout time.Duration
		bound   time.Duration // how long the test waits before it calls the open stuck
	}{
		{"connect_timeout in the URL", base + "&connect_timeout=1", 0, 20 * time.Second},
		{"Config.ConnectTimeout", base, 300 * time.Millisecond, 20 * time.Second},
		{"default", base, 0, postgres.DefaultConnectTimeout + 20*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := postgres.ParseURL(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnectTimeout = tc.timeout
			cfg.NoNotify = true
			done := make(chan error, 1)
			go func() {
				b, err := postgres.New(context.Background(), cfg)
				if err == nil {
					_ = b.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "timeout") || !strings.Contains(err.Error(), "connect") {
					t.Fatalf("open against a silent server: %v; want a connect timeout", err)
				}
				t.Logf("open failed with: %v", err)
			case <-time.After(tc.bound):
				t.Fatalf("open against a silent server still waiting after %s", tc.bound)
				<-done
			}
		})
	}
}
