// Command varve runs varve's lab against any store: bench, loadtest,
// deliver-bench, matrix and soak. Each command is a thin layer over package
// lab; run `varve help` for the list.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := rootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "varve:", err)
		os.Exit(1)
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "varve",
		Short:         "varve's lab: measure an event store on any backend",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var cpuProfile string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		cmd.PersistentPostRunE = func(*cobra.Command, []string) error {
			pprof.StopCPUProfile()
			return f.Close()
		}
		return nil
	}
	root.AddCommand(versionCmd(), benchCmd(), loadtestCmd(), deliverBenchCmd(), parkedCmd(), matrixCmd(), soakCmd())
	return root
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of varve and of Go",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			version := "(devel)"
			if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
				version = bi.Main.Version
			}
			bi, _ := debug.ReadBuildInfo()
			goVersion := "unknown"
			if bi != nil {
				goVersion = bi.GoVersion
			}
			fmt.Fprintf(cmd.OutOrStdout(), "varve %s (%s)\n", version, goVersion)
		},
	}
}
