package main

import (
	"io"
	"os"
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
