package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/internal/testenv"
	"github.com/varve-go/varve/open"
)

// secretURL is a store URL that carries a secret, and whether its server
// answers.
type secretURL struct {
	name, url, secret string
	up                bool // the server answers and the store opens
}

func secretURLs(t *testing.T) []secretURL {
	pg, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	nats, err := url.Parse(testenv.NATSURL(t))
	if err != nil {
		t.Fatal(err)
	}
	withPassword := func(u url.URL, pass string) string {
		u.User = url.UserPassword(u.User.Username(), pass)
		return u.String()
	}
	withParam := func(u url.URL, k, v string) string {
		q := u.Query()
		q.Set(k, v)
		u.RawQuery = q.Encode()
		return u.String()
	}
	natsToken := *nats
	natsToken.User = url.User("NatsTokenS3cret5")
	down := refusedAddr(t)
	return []secretURL{
		// The test server trusts loopback, so these reach it and run.
		{"postgres password", withPassword(*pg, "PgPassS3cret1"), "PgPassS3cret1", true},
		{"postgres password parameter", withParam(*pg, "password", "PgParamS3cret2"), "PgParamS3cret2", true},
		{"nats token", natsToken.String(), "NatsTokenS3cret5", true},
		// These fail: nothing listens, a bad escape, a refused parameter.
		{"postgres unreachable", "postgres://u:PgDownS3cret3@" + down + "/test", "PgDownS3cret3", false},
		{"postgres bad escape", "postgres://u:PgEsc%ZZS3cret4@" + pg.Host + "/test", "PgEsc%ZZS3cret4", false},
		{"nats user_jwt", withParam(*nats, "user_jwt", "NatsJwtS3cret6"), "NatsJwtS3cret6", false},
		{"postgres sslpassword", withParam(*pg, "sslpassword", "PgSslS3cret8"), "PgSslS3cret8", false},
		{"nats nkey", withParam(*nats, "nkey", "NatsNkeyS3cret9"), "NatsNkeyS3cret9", false},
		{"nats unreachable", "nats://user:NatsDownS3cret7@" + down, "NatsDownS3cret7", false},
	}
}

// TestNoSecretInOutput runs every command on stores whose URLs carry
// secrets, reachable and not, and checks that no secret appears in
// stdout, stderr, the JSON or the HTML report of a lab command (its title
// included).
func TestNoSecretInOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every command against the test servers")
	}
	const hookSecret = "HookPassS3cret8"
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	defer hook.Close()
	hookURL := strings.Replace(hook.URL, "http://", "http://user:"+hookSecret+"@", 1) + "/?token=" + hookSecret
	commands := [][]string{
		{"bench", "--workload", "append-single", "--events", "20", "--duration", "2s"},
		{"loadtest", "-n", "20", "-u", "2", "-b", "10"},
		{"deliver-bench", "-t", "4", "-e", "1", "--streams", "2", "-l", "1", "-w", "1"},
		{"matrix", "--streams", "5", "--workers", "1", "--mix", "50/50", "--duration", "20ms"},
		{"soak", "--duration", "200ms", "--interval", "50ms", "--aggregates", "5"},
		{"parked", "list", "--subscription", "s"},
		{"parked", "replay", "--subscription", "s", "--webhook", hookURL, "--secret", "k"},
		{"parked", "skip", "--subscription", "s", "--all"},
		{"streams", "ls"},
		{"streams", "show", "x"},
		{"subs", "ls"},
		{"subs", "reset", "s", "--to", "start", "--yes"},
	}
	for _, su := range secretURLs(t) {
		t.Run(su.name, func(t *testing.T) {
			for _, c := range commands {
				name := c[0]
				if name == "parked" || name == "streams" || name == "subs" {
					name += " " + c[1]
				}
				t.Run(name, func(t *testing.T) {
					dir := t.TempDir()
					jsonFile, htmlFile := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.html")
					ops := operatorCommands[c[0]]
					args := append(append([]string{}, c...), "--store", su.url, "--json="+jsonFile)
					if !ops {
						args = append(args, "--html", htmlFile)
					}
					r := runIn(t, args...)
					outputs := map[string]string{"stdout": r.stdout, "stderr": r.stderr}
					for what, f := range map[string]string{"json": jsonFile, "html": htmlFile} {
						if b, err := os.ReadFile(f); err == nil {
							outputs[what] = string(b)
						}
					}
					for what, text := range outputs {
						for _, secret := range []string{su.secret, hookSecret} {
							if strings.Contains(text, secret) || strings.Contains(text, url.QueryEscape(secret)) {
								t.Errorf("exit %d: the secret %s is in %s:\n%s", r.code, secret, what, text)
							}
						}
					}
					// An operator command writes its JSON only when it
					// succeeds; a lab command's envelope also tells a failure.
					if _, ok := outputs["json"]; !ok && r.code != exitUsage && (!ops || r.code == exitOK) {
						t.Errorf("exit %d and no JSON; stderr: %s", r.code, r.stderr)
					}
				})
			}
		})
	}
}

// TestNoSecretInOpenErrors opens stores whose URLs carry secrets with every
// opener the CLI uses, and checks their errors.
func TestNoSecretInOpenErrors(t *testing.T) {
	ctx := context.Background()
	openers := map[string]func(string) error{
		"lab.Open": func(u string) error {
			s, err := lab.Open(ctx, u)
			if err == nil {
				s.Close()
			}
			return err
		},
		"lab.OpenBackend": func(u string) error {
			b, err := lab.OpenBackend(ctx, u)
			if err == nil {
				b.Close()
			}
			return err
		},
		"open.Existing": func(u string) error {
			s, err := open.Existing(ctx, u, varve.Config{})
			if err == nil {
				s.Close()
			}
			return err
		},
		"lab.Resolve": func(u string) error {
			tg, err := lab.Resolve(u, lab.NewRunID("redact"), lab.ForRun)
			if err == nil {
				return tg.Release(ctx)
			}
			return err
		},
	}
	for _, su := range secretURLs(t) {
		for name, openFn := range openers {
			u := su.url
			if su.up && strings.HasPrefix(name, "lab.Open") {
				continue // it would create a store; the commands above cover these
			}
			if strings.HasPrefix(u, "postgres") && !strings.Contains(u, "varve_schema") && name == "open.Existing" {
				// A schema of its own, which open.Existing does not find:
				// never the shared default.
				u += map[bool]string{true: "&", false: "?"}[strings.Contains(u, "?")] + "varve_schema=" + lab.NewRunID("redact")
			}
			err := openFn(u)
			if err != nil && strings.Contains(err.Error(), su.secret) {
				t.Errorf("%s(%s): the secret is in the error: %v", name, su.name, err)
			}
		}
	}
}
