package main

import (
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/lab"
)

func matrixCmd() *cobra.Command {
	var (
		cfg          lab.MatrixConfig
		mixes, procs string
		asJSON       bool
		htmlFile     string
	)
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Measure point reads and writes for read/write mixes x goroutine counts",
		Long: `matrix fills a store with --streams streams, then for every read/write mix and
goroutine count measures point reads (the last event of a random stream) and point
writes (an append to a random stream) for --duration each, and prints the rates.
Each cell is measured in two halves, one in a pass up through the goroutine counts and
one in a pass back down, so that the store growing with the writes does not favour the
cells measured first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Mixes, err = lab.ParseMixes(mixes); err != nil {
				return err
			}
			if cfg.Procs, err = lab.ParseInts(procs); err != nil {
				return err
			}
			if !cmd.Flags().Changed("streams") && !strings.HasPrefix(cfg.Store, "mem") {
				cfg.Streams = 10_000 // a million single-event streams takes minutes on a durable store
			}
			cfg.Progress = cmd.ErrOrStderr()
			rep, err := lab.RunMatrix(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return report(cmd, rep, asJSON, htmlFile,
				func(w io.Writer) error { return lab.PrintMatrix(w, rep) },
				func(w io.Writer) error { return lab.WriteMatrixHTML(w, rep) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Store, "store", defaultStore, "store URL")
	f.IntVar(&cfg.Streams, "streams", 1_000_000, "streams to fill before the run (default 10,000 on stores other than memory)")
	f.StringVar(&mixes, "mix", "100/0,90/10,50/50,10/90,0/100", "read/write mixes in percent")
	f.StringVar(&procs, "procs", "1,2,4,8,16,32,64,128,256,512", "goroutine counts")
	f.DurationVar(&cfg.Duration, "duration", time.Second, "measuring time per cell")
	f.StringVar(&htmlFile, "html", "", "also write a self-contained HTML report with charts to this file")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
