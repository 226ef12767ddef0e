//go:build !linux

package main

import (
	"errors"
	"io"
)

func capped([]string, int64, io.Writer, io.Writer) (int, error) {
	return 0, errors.New("--hard-limit needs Linux memory cgroups")
}
