package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	natsbackend "github.com/varve-go/varve/backend/nats"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/open"
)

// initJSON is what varve init --json prints: the store, what it is made
// of (a SQLite file, a PostgreSQL schema, a JetStream stream) and whether
// init created it (false: it was there, and init changed nothing).
type initJSON struct {
	Store   string `json:"store"`
	Backend string `json:"backend"`
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Created bool   `json:"created"`
}

func initCmd() *cobra.Command {
	var (
		store string
		out   opsOutput
	)
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a store: a SQLite file, a PostgreSQL schema or a NATS JetStream stream",
		Long: `init creates what the store --store names needs, and says what it created: a SQLite
file and its tables (and the file's directory when missing), a PostgreSQL schema and
its tables (varve_schema of the URL, default "varve"), or a NATS JetStream stream
(stream of the URL, default "VARVE"; its key-value buckets are made when first used).
A store that is there already is left as it is: init says so and exits 0. The memory
store lives in one process and has nothing to create.` + opsStoreHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			res := initJSON{Store: t.Label, Backend: t.Backend}
			switch t.Backend {
			case "sqlite":
				c, err := sqlite.ParseURL(t.URL)
				if err != nil {
					return usage(lab.ScrubErr(err))
				}
				if c.Path == sqlite.Memory {
					return usagef("--store: an in-memory SQLite database lives in one process: init has nothing to create")
				}
				res.Kind, res.Name = "file", c.Path
			case "postgres":
				c, err := postgres.ParseURL(t.URL)
				if err != nil {
					return usage(lab.ScrubErr(err))
				}
				res.Kind, res.Name = "schema", c.Schema
				if res.Name == "" {
					res.Name = postgres.DefaultSchema
				}
			case "nats":
				c, err := natsbackend.ParseURL(t.URL)
				if err != nil {
					return usage(lab.ScrubErr(err))
				}
				res.Kind, res.Name = "stream", c.Stream
				if res.Name == "" {
					res.Name = natsbackend.DefaultStream
				}
			default:
				return usagef("--store: the %s store lives in one process: init has nothing to create", t.Backend)
			}
			ctx := cmd.Context()
			var madeDir string
			create := func() error {
				s, err := open.Existing(ctx, t.URL, storeConfig(ctx))
				if err == nil {
					return s.Close()
				}
				if !errors.Is(err, open.ErrNotFound) {
					return lab.ScrubErr(err)
				}
				if res.Kind == "file" {
					dir := filepath.Dir(res.Name)
					if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
						if err := os.MkdirAll(dir, 0o755); err != nil {
							return err
						}
						madeDir = dir
					}
				}
				s, err = open.Store(ctx, t.URL, storeConfig(ctx))
				if err != nil {
					return lab.ScrubErr(err)
				}
				res.Created = true
				return s.Close()
			}
			err = create()
			return out.finish(cmd, err, opsResult{
				value: res,
				text:  func(w io.Writer) error { return printInit(w, res, madeDir) },
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", "URL or SQLite file path of the store to create (default $"+storeEnv+")")
	out.register(f, false)
	return cmd
}

func printInit(w io.Writer, res initJSON, madeDir string) error {
	what := map[string]string{"file": "SQLite file", "schema": "PostgreSQL schema", "stream": "JetStream stream"}[res.Kind]
	name := termtext.Escape(res.Name)
	if !res.Created {
		_, err := fmt.Fprintf(w, "%s: the store exists already (%s %s); nothing changed\n", termtext.Escape(res.Store), what, name)
		return err
	}
	if madeDir != "" {
		if _, err := fmt.Fprintf(w, "created directory %s\n", termtext.Escape(madeDir)); err != nil {
			return err
		}
	}
	var err error
	switch res.Kind {
	case "file":
		_, err = fmt.Fprintf(w, "created %s %s and its tables: the store %s\n", what, name, termtext.Escape(res.Store))
	case "schema":
		_, err = fmt.Fprintf(w, "created %s %s and its tables on %s\n", what, name, termtext.Escape(res.Store))
	default:
		_, err = fmt.Fprintf(w, "created %s %s on %s (its key-value buckets are made when first used)\n", what, name, termtext.Escape(res.Store))
	}
	return err
}
