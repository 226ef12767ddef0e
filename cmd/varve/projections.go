package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/projection"
)

// errUnknownProjection: the store knows nothing of the projection.
var errUnknownProjection = errors.New("unknown projection")

const projectionsHelp = `

What a projection leaves in a store (package projection): a checkpoint and an origin per
version ("projection-<name>-v<N>"), and a control stream ("$projection-<name>") with the
current version, the operator's requests and the failures of runners. Runners read the
control stream about once a second (Config.ControlPoll) and follow it. Whether a runner
is running, the store does not know: the state shown is what its records say.`

func projectionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "projections",
		Short: "List projections and their versions; pause, resume or rebuild one",
		Long:  `projections works on the read models of package projection.` + projectionsHelp + opsStoreHelp,
	}
	cmd.AddCommand(projectionsListCmd(), projectionsStatusCmd(),
		projectionsRequestCmd("pause", "Ask the runners of a projection to stop after the batch in hand", projection.Pause),
		projectionsRequestCmd("resume", "Ask the paused runners of a projection to go on", projection.Resume),
		projectionsRebuildCmd())
	return cmd
}

// inspectAll inspects the projections of a store.
func inspectAll(ctx context.Context, s *varve.Store, only string) ([]projection.Info, error) {
	names, err := projection.List(ctx, s)
	if err != nil {
		return nil, err
	}
	infos := []projection.Info{}
	for _, n := range names {
		if only != "" && n != only {
			continue
		}
		info, err := projection.Inspect(ctx, s, n)
		if err != nil {
			return infos, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// inspectOne inspects projection name, which the store must know.
func inspectOne(ctx context.Context, s *varve.Store, t *lab.Target, name string) (projection.Info, error) {
	info, err := projection.Inspect(ctx, s, name)
	if err != nil {
		return info, err
	}
	if len(info.Versions) == 0 && info.Current == 0 && !info.Paused && info.Failure == nil && info.Parked == 0 {
		return info, fmt.Errorf("projection %q: %w on %s", name, errUnknownProjection, t.Label)
	}
	return info, nil
}

func projectionsListCmd() *cobra.Command {
	var (
		store string
		out   opsOutput
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the projections of a store: versions, current one, state, lag, parked events",
		Long: `list shows each projection with a checkpoint or a control stream: its current version,
whether it is paused, its events parked, and per version the state and lag (events of
$all after its checkpoint, system streams left out, counted up to 10,000). For an
alert, --max-lag N exits 1 (after the list, naming each one) when a version of a
projection lags more than N events (the current version and newer ones being built; an
older version that a promotion replaced is not served and is left out), --max-parked N
when a projection has more than N events parked.` + projectionsHelp + opsStoreHelp,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	maxLag := newBound(f, "max-lag", "lag", fmt.Sprintf("exit 1 when a version lags more than this many events (at most %d, as far as lags are counted)", projection.MaxInspectLag))
	maxParked := newBound(f, "max-parked", "parked", "exit 1 when a projection has more than this many events parked")
	out.register(f, true)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		if err := maxLag.parse(cmd.Flags(), projection.MaxInspectLag); err != nil {
			return err
		}
		if err := maxParked.parse(cmd.Flags(), maxEvents); err != nil {
			return err
		}
		t, err := resolveExisting(cmd, store)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		infos := []projection.Info{}
		s, err := openStore(ctx, t.URL)
		if err == nil {
			infos, err = inspectAll(ctx, s, "")
			s.Close()
		}
		for _, p := range infos {
			maxParked.check(p.Name, p.Name, p.Parked > maxParked.n, strconv.FormatInt(p.Parked, 10))
			for _, v := range p.Versions {
				if v.Version < p.Current {
					continue // replaced by the current version: not served
				}
				// A lag is counted up to MaxInspectLag, the bound's
				// maximum: LagMore is over any bound.
				maxLag.check(p.Name, fmt.Sprintf("%s v%d", p.Name, v.Version), v.Lag > maxLag.n || v.LagMore, lagOf(v))
			}
		}
		return out.finish(cmd, err, opsResult{
			value:  infos,
			text:   func(w io.Writer) error { return printProjections(w, infos) },
			csv:    func(w io.Writer) error { return writeProjectionsCSV(w, infos) },
			failed: overBounds(len(infos), "projections", maxLag, maxParked),
		})
	}
	return cmd
}

func versionsText(p projection.Info) string {
	var vs []string
	for _, v := range p.Versions {
		vs = append(vs, strconv.Itoa(v.Version))
	}
	if len(vs) == 0 {
		return "-"
	}
	return strings.Join(vs, ",")
}

func lagOf(v projection.VersionInfo) string {
	if v.LagMore {
		return "> " + strconv.FormatInt(v.Lag, 10)
	}
	return strconv.FormatInt(v.Lag, 10)
}

func printProjections(w io.Writer, infos []projection.Info) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCURRENT\tVERSIONS\tSTATE\tLAG\tPARKED")
	for _, p := range infos {
		cur, state, lag := "-", "-", "-"
		if p.Current > 0 {
			cur = strconv.Itoa(p.Current)
		}
		// The state and lag shown are the current version's, or the
		// latest version's when none is current.
		for _, v := range p.Versions {
			if v.Current || p.Current == 0 {
				state, lag = v.State, lagOf(v)
			}
		}
		if p.Paused {
			state = projection.Paused.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", termtext.Escape(p.Name), cur, versionsText(p), termtext.Escape(state), lag, p.Parked)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d projections\n", len(infos))
	return err
}

// writeProjectionsCSV writes a row per version of each projection; a
// projection without versions has one row with the version empty.
func writeProjectionsCSV(w io.Writer, infos []projection.Info) error {
	cw := newCSV(w)
	cw.row("name", "paused", "parked", "version", "current", "checkpoint", "origin", "lag", "lag_more", "state", "rebuild_pending", "replay_pending")
	for _, p := range infos {
		head := []string{p.Name, strconv.FormatBool(p.Paused), strconv.FormatInt(p.Parked, 10)}
		if len(p.Versions) == 0 {
			cw.row(append(head, "", "", "", "", "", "", "", "", "")...)
		}
		for _, v := range p.Versions {
			cp, origin := "", ""
			if v.Checkpoint != nil {
				cp = v.Checkpoint.String()
			}
			if v.Origin != nil {
				origin = v.Origin.String()
			}
			cw.row(append(head[:3:3], strconv.Itoa(v.Version), strconv.FormatBool(v.Current), cp, origin, strconv.FormatInt(v.Lag, 10),
				strconv.FormatBool(v.LagMore), v.State, strconv.FormatBool(v.RebuildPending), strconv.FormatBool(v.ReplayPending))...)
		}
	}
	return cw.flush()
}

func projectionsStatusCmd() *cobra.Command {
	var (
		store string
		out   opsOutput
	)
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a projection: each version's checkpoint, origin, lag and state; requests; last failure",
		Long: `status shows what the store knows of projection NAME: per version its checkpoint, its
origin (the head of the log when it first started: the events up to it are a replay),
its lag, its state (paused, failed, rebuilding, catching-up or live) and whether a
rebuild request waits for its runner; the current version; the last failure a runner
recorded; the events parked. A projection the store does not know is an error
(exit 1).` + projectionsHelp + opsStoreHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			name := args[0]
			if err := varve.CheckName(name); err != nil {
				return usage(fmt.Errorf("projection name: %w", err))
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var info projection.Info
			s, err := openStore(ctx, t.URL)
			if err == nil {
				info, err = inspectOne(ctx, s, t, name)
				s.Close()
			}
			return out.finish(cmd, err, opsResult{
				value: info,
				text:  func(w io.Writer) error { return printStatus(w, info) },
			})
		},
	}
	cmd.Flags().StringVar(&store, "store", "", storeFlagHelp)
	out.register(cmd.Flags(), false)
	return cmd
}

func printStatus(w io.Writer, p projection.Info) error {
	cur := "none"
	if p.Current > 0 {
		cur = strconv.Itoa(p.Current)
	}
	fmt.Fprintf(w, "projection %s: current version %s, paused %v, %d parked; $all ends at %s\n", termtext.Escape(p.Name), cur, p.Paused, p.Parked, p.Head)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tCURRENT\tCHECKPOINT\tORIGIN\tLAG\tSTATE\tREBUILD")
	for _, v := range p.Versions {
		current, rebuild := "", ""
		if v.Current {
			current = "*"
		}
		if v.RebuildPending {
			rebuild = "requested"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Version, current, positionText(v.Checkpoint), positionText(v.Origin), lagOf(v), termtext.Escape(v.State), rebuild)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if f := p.Failure; f != nil {
		if _, err := fmt.Fprintf(w, "last failure: version %d at %s: %s\n", f.Version, f.At.Format("2006-01-02T15:04:05Z07:00"), termtext.Escape(f.Error)); err != nil {
			return err
		}
	}
	return nil
}

// requestJSON is what pause, resume and rebuild print with --json: the
// request appended to the projection's control stream (a rebuild names
// its version).
type requestJSON struct {
	Projection string `json:"projection"`
	Requested  string `json:"requested"`
	Version    int    `json:"version,omitempty"`
}

// projectionsRequestCmd makes pause and resume: a request appended to the
// control stream of a projection the store knows.
func projectionsRequestCmd(verb, short string, request func(context.Context, *varve.Store, string) error) *cobra.Command {
	var (
		store string
		out   opsOutput
	)
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Long: verb + ` appends a request to the control stream of projection NAME; its runners follow it
within their ControlPoll (1s by default). A projection the store does not know is an
error (exit 1).` + projectionsHelp + opsStoreHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			name := args[0]
			if err := varve.CheckName(name); err != nil {
				return usage(fmt.Errorf("projection name: %w", err))
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := openStore(ctx, t.URL)
			if err == nil {
				if _, err = inspectOne(ctx, s, t, name); err == nil {
					err = request(ctx, s, name)
				}
				s.Close()
			}
			return out.finish(cmd, err, opsResult{
				value: requestJSON{Projection: name, Requested: verb},
				text: func(w io.Writer) error {
					_, werr := fmt.Fprintf(w, "%s of %s requested\n", verb, termtext.Escape(name))
					return werr
				},
			})
		},
	}
	cmd.Flags().StringVar(&store, "store", "", storeFlagHelp)
	out.register(cmd.Flags(), false)
	return cmd
}

func projectionsRebuildCmd() *cobra.Command {
	var (
		store   string
		version int
		yes     bool
		out     opsOutput
	)
	cmd := &cobra.Command{
		Use:   "rebuild NAME [--version N]",
		Short: "Ask the runner of a version to empty its read model and replay the log (asks first)",
		Long: `rebuild asks the runner of version --version of projection NAME (default: the current
version, or the only one) to rebuild in place: the runner calls the projection's Reset,
which empties its read model, moves its checkpoint back to the start and replays every
event, with Batch.Replaying set. The read model of that version is incomplete until the
runner is live again; to rebuild without downtime, deploy a new version beside the old
one instead (Config.Promote switches over when it has caught up). A projection without
Reset does not rebuild and says so in its runner's status. rebuild asks for the
projection's name on stdin before it writes (as given, or as the question quotes it);
an interrupt ends the question at once; --yes skips it.` + projectionsHelp + opsStoreHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			name := args[0]
			if err := varve.CheckName(name); err != nil {
				return usage(fmt.Errorf("projection name: %w", err))
			}
			if version < 0 {
				return usagef("--version %d: must be at least 1", version)
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			rebuild := func() error {
				s, err := openStore(ctx, t.URL)
				if err != nil {
					return err
				}
				defer s.Close()
				info, err := inspectOne(ctx, s, t, name)
				if err != nil {
					return err
				}
				switch {
				case version > 0:
				case info.Current > 0:
					version = info.Current
				case len(info.Versions) == 1:
					version = info.Versions[0].Version
				default:
					return usagef("--version: projection %q has no current version and %d versions (%s): say which", name, len(info.Versions), versionsText(info))
				}
				if !yes {
					fmt.Fprintf(cmd.ErrOrStderr(), "Empty the read model of %q version %d on %s and replay the log?\nType the name to confirm: ", name, version, t.Label)
					ok, err := confirmName(ctx, name)
					if err != nil || !ok {
						return notConfirmed(err, "no rebuild of %q requested", name)
					}
				}
				return projection.Rebuild(ctx, s, name, version)
			}
			err = rebuild()
			return out.finish(cmd, err, opsResult{
				value: requestJSON{Projection: name, Requested: "rebuild", Version: version},
				text: func(w io.Writer) error {
					_, werr := fmt.Fprintf(w, "rebuild of %s version %d requested\n", termtext.Escape(name), version)
					return werr
				},
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.IntVar(&version, "version", 0, "the version to rebuild (default: the current one, or the only one)")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask")
	out.register(f, false)
	return cmd
}
