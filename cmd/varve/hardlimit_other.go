//go:build !linux

package main

import (
	"errors"
	"io"
)

// Ways to cap the child, for --cap.
const (
	capAuto         = "auto"
	capCgroupV2     = "cgroup-v2"
	capCgroupV1     = "cgroup-v1"
	capAddressSpace = "address-space"
)

func capped([]string, string, int64, string, io.Writer, io.Writer) (string, ending, error) {
	return "", ending{}, errors.New("--hard-limit needs Linux (memory cgroups or RLIMIT_AS)")
}

func applyAddressLimit() (uint64, error) { return 0, nil }
