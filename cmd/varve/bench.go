package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/lab"
)

func benchCmd() *cobra.Command {
	cfg := lab.BenchConfig{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run the benchmark workloads on one or more stores",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rs, err := lab.Bench(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rs)
			}
			return lab.PrintTable(cmd.OutOrStdout(), rs)
		},
	}
	cmd.Flags().StringArrayVar(&cfg.Stores, "store", []string{"memory:"}, "store URL (repeatable)")
	cmd.Flags().IntVar(&cfg.Events, "events", 20000, "events per workload")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
