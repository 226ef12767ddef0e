// Package filescan finds byte patterns in the files a store keeps on disk:
// the proofs that an erased plaintext or a deleted key is in no byte of a
// backend's files (shred's reach tests, the backends' key tests) share it.
//
// Count reads every regular file under a directory whole, so it is meant
// for the small stores of tests. A file or directory that disappears while
// the walk runs (a server removing a block) is skipped, not an error.
package filescan

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Count returns the files under dir that hold pattern, by slash-separated
// path relative to dir, with the number of occurrences in each. An empty
// pattern is refused.
func Count(dir string, pattern []byte) (map[string]int, error) {
	if len(pattern) == 0 {
		return nil, errors.New("filescan: empty pattern")
	}
	found := map[string]int{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if n := bytes.Count(b, pattern); n > 0 {
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			found[filepath.ToSlash(rel)] = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}
