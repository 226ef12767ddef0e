package varve_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeCompiles builds the README's Go snippet as the body of a
// function, in a module of its own that uses this checkout, so the
// snippet a newcomer copies compiles and does what it says.
func TestReadmeCompiles(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	snippet, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("README.md has no Go snippet")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"context\"\n\t\"errors\"\n\t\"fmt\"\n\n\t\"github.com/varve-go/varve\"\n\t\"github.com/varve-go/varve/backend/memory\"\n)\n\n" +
		"func run() error {\n" + snippet + "\treturn nil\n}\n\n" +
		"func main() {\n\tif err := run(); err != nil {\n\t\tpanic(err)\n\t}\n}\n"
	mod := "module readme\n\ngo 1.26.0\n\nrequire github.com/varve-go/varve v0.0.0\n\nreplace github.com/varve-go/varve => " + root + "\n"
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"main.go": []byte(src), "go.mod": []byte(mod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goTool, "run", "-mod=mod", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's snippet does not run: %v\n%s\n%s", err, out, src)
	}
	want := "order-1 is at version 2\ntrue\n2 OrderPaid\n1 OrderPlaced\norder-1 OrderPaid\n"
	if string(out) != want {
		t.Fatalf("the README's snippet printed\n%s\nwant\n%s", out, want)
	}
}
