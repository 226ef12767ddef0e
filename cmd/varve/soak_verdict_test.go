package main

import (
	"testing"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
)

// TestGrewWrongly: only a sustained run that ran to its end with a growing
// verdict fails for its memory; a discovery run grows by design.
func TestGrewWrongly(t *testing.T) {
	for _, tc := range []struct {
		name        string
		mode        string
		status      string
		interrupted bool
		want        bool
	}{
		{"sustained, growing", lab.Sustained, lab.Growing, false, true},
		{"sustained, growing, interrupted", lab.Sustained, lab.Growing, true, false},
		{"sustained, flat", lab.Sustained, lab.Flat, false, false},
		{"sustained, insufficient data", lab.Sustained, lab.Insufficient, false, false},
		{"discovery, growing", lab.Discovery, lab.Growing, false, false},
		{"discovery, flat", lab.Discovery, lab.Flat, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := lab.SoakReport{Mode: tc.mode, Verdict: lab.Verdict{Status: tc.status}, Interrupted: tc.interrupted}
			if got := grewWrongly(rep); got != tc.want {
				t.Errorf("grewWrongly = %v, want %v", got, tc.want)
			}
		})
	}
}
