package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// defaultStore is the store the lab commands use when --store is not given:
// the embedded SQLite backend in a temporary file, removed after the run.
const defaultStore = "sqlite://{tmp}/varve.db"

// writeFile writes a report file through write, closing it and reporting
// the first error.
func writeFile(name string, write func(io.Writer) error) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return write(f)
}

// report prints a lab command's result: the text (or JSON with asJSON) on
// stdout, and the HTML report to htmlFile when one is named.
func report(cmd *cobra.Command, rep any, asJSON bool, htmlFile string, text, html func(io.Writer) error) error {
	if htmlFile != "" {
		if err := writeFile(htmlFile, html); err != nil {
			return err
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "wrote", htmlFile)
	}
	if asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return text(cmd.OutOrStdout())
}
