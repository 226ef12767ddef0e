package varve_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/varve-go/varve"

// TestDependencyRules checks the layering of docs/architecture.md with the
// go command: what each library package compiles in (tests excluded).
func TestDependencyRules(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-deps=false", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	deps := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		deps[f[0]] = f[1:]
	}
	if len(deps) < 10 {
		t.Fatalf("go list found %d packages; the check would prove nothing", len(deps))
	}
	backends := []string{module + "/backend/memory", module + "/backend/sqlite", module + "/backend/postgres", module + "/backend/nats"}
	drivers := []string{"github.com/jackc/pgx", "github.com/nats-io/", "modernc.org/sqlite"}
	has := func(pkg, prefix string) bool {
		for _, d := range deps[pkg] {
			if d == prefix || strings.HasPrefix(d, prefix+"/") || (strings.HasSuffix(prefix, "/") && strings.HasPrefix(d, prefix)) {
				return true
			}
		}
		return false
	}
	standard := func(p string) bool { return !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") }

	// The root imports only the standard library and uuid.
	for _, d := range deps[module] {
		if !standard(d) && d != "github.com/google/uuid" {
			t.Errorf("the root package depends on %s", d)
		}
	}
	// The tests' browser is for tests: no package depends on it.
	for pkg := range deps {
		if pkg != module+"/internal/browsertest" && has(pkg, module+"/internal/browsertest") {
			t.Errorf("%s depends on internal/browsertest, which only tests may import", pkg)
		}
	}
	// OpenTelemetry is opt-in: only otelvarve (and what imports it) compiles
	// it, never the root, a backend or the layers above the store.
	layers := []string{module, module + "/aggregate", module + "/subscription", module + "/delivery",
		module + "/delivery/webhook", module + "/delivery/natssink"}
	for _, pkg := range append(layers, backends...) {
		for _, b := range []string{module + "/otelvarve", "go.opentelemetry.io/otel"} {
			if has(pkg, b) {
				t.Errorf("%s imports %s", pkg, b)
			}
		}
	}
	if !has(module+"/otelvarve", "go.opentelemetry.io/otel") {
		t.Errorf("otelvarve no longer imports go.opentelemetry.io/otel: the check proves nothing")
	}
	for pkg := range deps {
		rel := strings.TrimPrefix(pkg, module+"/")
		switch {
		case strings.HasPrefix(rel, "backend/") && rel != "backend/backendtest":
			// No backend imports another.
			for _, b := range backends {
				if b != pkg && has(pkg, b) {
					t.Errorf("backend %s imports backend %s", rel, b)
				}
			}
		case rel == "aggregate" || rel == "subscription" || rel == "delivery" || rel == "projection" || rel == "schema" || rel == "retention" || rel == "workflow":
			// The layers above the seam import no backend and no driver or
			// transport client (a sink's transport lives in a sub-package).
			for _, b := range append(backends, append(drivers, "net/http")...) {
				if has(pkg, b) {
					t.Errorf("%s imports %s", rel, b)
				}
			}
		case rel == "server":
			// The server works on a Store: no backend, driver or opener
			// (the CLI opens the store), and nothing of its tests' browser.
			for _, b := range append(backends, append(drivers, module+"/open", "github.com/chromedp")...) {
				if has(pkg, b) {
					t.Errorf("%s imports %s", rel, b)
				}
			}
		}
		// The rules above could not fail if the sub-packages did not
		// import what the packages above them must not.
		if rel == "delivery/natssink" && !has(pkg, "github.com/nats-io/nats.go") || rel == "delivery/webhook" && !has(pkg, "net/http") ||
			rel == "projection/pgprojection" && !has(pkg, "github.com/jackc/pgx/v5") ||
			rel == "projection/sqliteprojection" && !has(pkg, module+"/backend/sqlite") {
			t.Errorf("%s no longer imports its transport: the check proves nothing", rel)
		}
		// The faster codec is opt-in: aggregate keeps encoding/json.
		if rel == "aggregate" && has(pkg, "github.com/goccy/go-json") {
			t.Errorf("aggregate imports github.com/goccy/go-json: it belongs in aggregate/gojson")
		}
		if rel == "aggregate/gojson" && !has(pkg, "github.com/goccy/go-json") {
			t.Errorf("%s no longer imports its library: the check proves nothing", rel)
		}
		// Change data capture is opt-in: neither the root nor a backend
		// compiles in pgcdc or its replication client.
		if pkg == module || strings.HasPrefix(rel, "backend/") {
			for _, b := range []string{module + "/cdc", "github.com/jackc/pglogrepl", module + "/projection"} {
				if has(pkg, b) {
					t.Errorf("%s imports %s", rel, b)
				}
			}
		}
		if rel == "cdc/pgcdc" && !has(pkg, "github.com/jackc/pglogrepl") {
			t.Errorf("%s no longer imports its library: the check proves nothing", rel)
		}
		// Nothing in the library imports the CLI or the lab.
		if has(pkg, module+"/cmd") {
			t.Errorf("%s imports the CLI module", rel)
		}
	}
}
