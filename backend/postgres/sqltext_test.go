package postgres

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve/internal/migrate"
)

func TestExpand(t *testing.T) {
	cases := []struct {
		name, schema, in, want string
	}{
		{"identifier", "o'brien", "CREATE TABLE __SCHEMA__.t (x int);", `CREATE TABLE "o'brien".t (x int);`},
		{"seed", "s", "SELECT __SEED__, '__SEED__'", "SELECT 42, '42'"},
		{"literal", "o'brien", "nextval('__SCHEMA__.event_seq')", `nextval('"o''brien".event_seq')`},
		{"literal with quotes", "a'||'b", "x('__SCHEMA__.s', 'it''s')", `x('"a''||''b".s', 'it''s')`},
		{"quote in the name", `q"x`, "__SCHEMA__.t '__SCHEMA__'", `"q""x".t '"q""x"'`},
		{"comments stay", "a\nDROP TABLE x; --", "-- __SCHEMA__ here\n/* __SCHEMA__ /* nested */ */__SCHEMA__.t",
			"-- __SCHEMA__ here\n/* __SCHEMA__ /* nested */ */\"a\nDROP TABLE x; --\".t"},
		{"function body", "s", "AS $$ BEGIN PERFORM __SCHEMA__.f('__SCHEMA__'); END $$;", `AS $$ BEGIN PERFORM "s".f('"s"'); END $$;`},
		{"dollars in the name", "a$$b", "AS $$ SELECT __SCHEMA__.f() $$;", `AS $varve0$ SELECT "a$$b".f() $varve0$;`},
		{"tagged body", "a$$b", "AS $fn$ SELECT __SCHEMA__.f() $fn$;", `AS $fn$ SELECT "a$$b".f() $fn$;`},
		{"name ends like a tag", "x$", "AS $$ SELECT '__SCHEMA__' $$", `AS $$ SELECT '"x$"' $$`},
		{"name holds the fallback tag", "$$varve0$", "AS $$ SELECT __SCHEMA__.f() $$", `AS $varve1$ SELECT "$$varve0$".f() $varve1$`},
		{"parameters and identifiers with $", "s", "SELECT $1, a$b FROM __SCHEMA__.t", `SELECT $1, a$b FROM "s".t`},
		{"backslash", `a\b`, "'__SCHEMA__' __SCHEMA__", `'"a\b"' "a\b"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newExpander(pgx.Identifier{tc.schema}.Sanitize(), 42).expand(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("expand(%q) with schema %q\n got %q, %v\nwant %q", tc.in, tc.schema, got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{`"__SCHEMA__"`, `E'__SCHEMA__'`, `U&'__SCHEMA__'`, "'open", "$$ open", "/* open"} {
		if got, err := newExpander(`"s"`, 1).expand(bad); err == nil {
			t.Errorf("expand(%q) = %q, want an error", bad, got)
		}
	}
}

// TestMigrationsExpand: every embedded migration and code file, and every
// migration of the squashed history, expands, and no placeholder is left
// outside a comment.
func TestMigrationsExpand(t *testing.T) {
	ms, err := migrate.Load(embedded, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	old, err := migrate.Load(os.DirFS("testdata"), "migrations-v13")
	if err != nil {
		t.Fatal(err)
	}
	code, err := migrate.LoadCode(embedded, "code")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, m := range append(ms, old...) {
		files[m.Name] = m.SQL
	}
	for _, c := range code {
		files["code/"+c.Name] = c.SQL
	}
	if len(ms) == 0 || len(old) != 13 || len(code) == 0 {
		t.Fatalf("%d migrations, %d of the history, %d code files", len(ms), len(old), len(code))
	}
	for name, sql := range files {
		out, err := newExpander(`"x'$$y"`, 7).expand(sql)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, line := range strings.Split(out, "\n") {
			code, _, _ := strings.Cut(line, "--")
			if hasPlaceholder(code) {
				t.Errorf("%s: placeholder left in %q", name, line)
			}
		}
	}
}

// TestRefusedInputDriver: pgx refuses to send a message over the protocol's
// 1 GiB with this text (an append that large is not sent in a test).
func TestRefusedInputDriver(t *testing.T) {
	if !refusedInput(errors.New("message body too large")) || refusedInput(errors.New("conn closed")) {
		t.Fatal("refusedInput misreads pgx's words")
	}
}
