// Package testenv finds the servers that tests talk to: PostgreSQL and NATS
// on loopback. Without CI=true a missing server skips the test with a loud
// message; with CI=true it fails the test.
package testenv

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// Default URLs of the machine's test servers.
const (
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultNATSURL     = "nats://127.0.0.1:4222"
)

// CI reports whether the tests run in CI (CI=true), where a missing server is
// a failure.
func CI() bool { return os.Getenv("CI") == "true" }

// PostgresURL returns VARVE_POSTGRES_URL or the default, after checking that
// the server accepts connections.
func PostgresURL(t testing.TB) string {
	t.Helper()
	return require(t, "PostgreSQL", "VARVE_POSTGRES_URL", DefaultPostgresURL)
}

// NATSURL returns VARVE_NATS_URL or the default, after checking that the
// server accepts connections.
func NATSURL(t testing.TB) string {
	t.Helper()
	return require(t, "NATS", "VARVE_NATS_URL", DefaultNATSURL)
}

func require(t testing.TB, name, env, def string) string {
	t.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		raw = def
	}
	if err := reachable(raw); err != nil {
		msg := fmt.Sprintf("\n"+
			"#############################################################\n"+
			"## %s is not reachable: %v\n"+
			"## Set %s or start the server (scripts/services.sh).\n"+
			"#############################################################", name, err, env)
		if CI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return raw
}

// reachable dials the URL's host, which must be on loopback: tests never
// talk to another machine.
func reachable(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse url: %w", err)
	}
	host := u.Hostname()
	if host != "localhost" && !strings.HasPrefix(host, "127.") && host != "::1" {
		return fmt.Errorf("host %q is not loopback; tests only talk to loopback", host)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"nats": "4222", "postgres": "5432", "postgresql": "5432"}[u.Scheme]
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 2*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}
