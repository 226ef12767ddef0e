package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
)

// resolveStores turns the --store values of a lab command into targets: the
// default store when none is given, and at most one unless repeatable.
// A malformed store is a usage error; nothing falls back to a default.
func resolveStores(command string, given []string, repeatable, keep bool) ([]*lab.Target, error) {
	if len(given) == 0 {
		given = []string{lab.DefaultStore}
	}
	if len(given) > 1 && !repeatable {
		return nil, usagef("--store given %d times: %s runs on one store", len(given), command)
	}
	run := lab.NewRunID(command)
	var out []*lab.Target
	for i, g := range given {
		id := run
		if len(given) > 1 {
			id = fmt.Sprintf("%s_%d", run, i+1)
		}
		t, err := lab.Resolve(g, id, lab.ForRun)
		if err != nil {
			releaseAll(context.Background(), out)
			return nil, usage(fmt.Errorf("--store: %w", err))
		}
		t.Keep = keep
		out = append(out, t)
	}
	lab.UniqueLabels(out)
	return out, nil
}

// announce tells on stderr where a run writes on a server.
func announce(w io.Writer, ts []*lab.Target) {
	for _, t := range ts {
		if t.Namespace == "" {
			continue
		}
		what := "schema"
		if t.Backend == "nats" {
			what = "stream"
		}
		fate := "dropped after the run (--keep keeps it)"
		if t.Keep {
			fate = "kept after the run (--keep)"
		}
		fmt.Fprintf(w, "%s: this run writes into %s %s, %s\n", t.Label, what, t.Namespace, fate)
	}
}

// releaseAll drops the namespaces and temporary files of the targets and
// returns their errors.
func releaseAll(ctx context.Context, ts []*lab.Target) []error {
	var errs []error
	for _, t := range ts {
		if err := t.Release(ctx); err != nil {
			errs = append(errs, lab.ScrubErr(err))
		}
	}
	return errs
}

// finishStores fills the envelope's stores (with their servers' versions,
// unless the run was interrupted) and releases the targets, recording what
// failed.
func finishStores(ctx context.Context, env *lab.Envelope, ts []*lab.Target) {
	for _, t := range ts {
		version := ""
		if ctx.Err() == nil {
			version = lab.ServerVersion(ctx, t)
		}
		env.Stores = append(env.Stores, t.Info(version))
	}
	for _, err := range releaseAll(ctx, ts) {
		env.AddError(err)
	}
}

// runError records the error a run returned, unless it only says the run
// was interrupted (the envelope says that).
func runError(ctx context.Context, env *lab.Envelope, err error) {
	if err == nil {
		return
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, errInterrupted)) {
		return
	}
	env.AddError(err)
}
