package pgcdc_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/varve-go/varve/cdc/pgcdc"
)

const benchTxs, benchRows = 200, 50

// benchSlot creates a slot and writes benchTxs transactions of benchRows
// inserts of a row of seven typed columns after it; the cleanup drops it.
func benchSlot(b *testing.B) (url, name string) {
	url = cluster.URL(b)
	ctx := context.Background()
	name = fmt.Sprintf("cdc_bench_%d", seq.Add(1))
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	for _, sql := range []string{
		"CREATE SCHEMA " + name,
		"CREATE TABLE " + name + ".bench (id int PRIMARY KEY, n bigint, name text, amount numeric(12,2), at timestamptz, tag uuid, doc jsonb)",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_ = pgcdc.DropSlot(dctx, conn, name)
		_ = pgcdc.DropPublication(dctx, conn, name)
		_, _ = conn.Exec(dctx, "DROP SCHEMA "+name+" CASCADE")
		conn.Close(dctx)
	})
	if _, err := pgcdc.EnsurePublication(ctx, conn, name, []string{name + ".bench"}); err != nil {
		b.Fatal(err)
	}
	if _, err := pgcdc.EnsureSlot(ctx, conn, name); err != nil {
		b.Fatal(err)
	}
	for tx := range benchTxs {
		_, err := conn.Exec(ctx, `INSERT INTO `+name+`.bench
			SELECT i, i::bigint * 1000003, 'customer ' || i, i * 1.25, now(), gen_random_uuid(),
			       jsonb_build_object('i', i, 'tags', jsonb_build_array('a', 'b'))
			FROM generate_series($1::int, $2::int) AS i`, tx*benchRows, tx*benchRows+benchRows-1)
		if err != nil {
			b.Fatal(err)
		}
	}
	return url, name
}

// BenchmarkDecode reads the same captured WAL (benchTxs transactions of
// benchRows inserts of a row of seven typed columns) from one slot, which
// is never acknowledged, three ways per iteration, in turn: raw (pglogrepl
// reading the stream and looking at each message's first byte, no
// decoding), and pgcdc's Stream with text and with binary values. It
// reports each one's changes/s and the ratios to raw.
func BenchmarkDecode(b *testing.B) {
	url, name := benchSlot(b)
	cfg := pgcdc.Config{ConnString: url, Slot: name, Publication: name, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	binCfg := cfg
	binCfg.Binary = true

	runs := []struct {
		name string
		read func(b *testing.B) (int, time.Duration)
		d    time.Duration
		n    int
	}{
		{name: "raw", read: func(b *testing.B) (int, time.Duration) { return readRaw(b, url, name, benchTxs, nil) }},
		{name: "text", read: func(b *testing.B) (int, time.Duration) { return readDecoded(b, cfg, benchTxs) }},
		{name: "binary", read: func(b *testing.B) (int, time.Duration) { return readDecoded(b, binCfg, benchTxs) }},
	}
	for _, r := range runs { // warm the server's caches and the page cache
		r.read(b)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range runs {
			r := &runs[(i+j)%len(runs)] // rotate who goes first
			n, d := r.read(b)
			if n != benchTxs*benchRows {
				b.Fatalf("%s read %d changes, want %d", r.name, n, benchTxs*benchRows)
			}
			r.n += n
			r.d += d
		}
	}
	rate := func(r int) float64 { return float64(runs[r].n) / runs[r].d.Seconds() }
	b.ReportMetric(rate(0), "raw-changes/s")
	b.ReportMetric(rate(1), "text-changes/s")
	b.ReportMetric(rate(2), "binary-changes/s")
	b.ReportMetric(rate(1)/rate(0), "text/raw")
	b.ReportMetric(rate(2)/rate(0), "binary/raw")
}

// readRaw streams the slot from its confirmed position until txs commits
// went by and counts the inserts, decoding nothing.
// With keep, it keeps a copy of each message's WAL data and asks for
// binary values when binary is set.
func readRaw(b *testing.B, url, slot string, txs int, keep *capture) (int, time.Duration) {
	ctx := context.Background()
	pc, err := pgconn.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	pc.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	args := []string{"proto_version '1'", "publication_names '" + slot + "'"}
	if keep != nil && keep.binary {
		args = append(args, "binary 'true'")
	}
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: args})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	commits, inserts := 0, 0
	for commits < txs {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			b.Fatal(err)
		}
		if keep != nil {
			keep.msgs = append(keep.msgs, append([]byte(nil), xld.WALData...))
		}
		switch pglogrepl.MessageType(xld.WALData[0]) {
		case pglogrepl.MessageTypeInsert:
			inserts++
		case pglogrepl.MessageTypeCommit:
			commits++
		}
	}
	d := time.Since(start)
	if _, err := pglogrepl.SendStandbyCopyDone(ctx, conn); err != nil {
		b.Fatal(err)
	}
	return inserts, d
}

// readDecoded reads txs transactions with a Stream and acknowledges none.
func readDecoded(b *testing.B, cfg pgcdc.Config, txs int) (int, time.Duration) {
	ctx := context.Background()
	s, err := pgcdc.Start(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	n := 0
	for range txs {
		tx, err := s.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n += len(tx.Changes)
	}
	return n, time.Since(start)
}

type capture struct {
	binary bool
	msgs   [][]byte
}

// BenchmarkDecoder measures the client's work alone, on pgoutput messages
// captured once and kept in memory: pglogrepl's parse of each message (no
// values decoded) against pgcdc's decoder (parse, values through pgx's
// type map, envelopes), in turn, for text and binary values.
func BenchmarkDecoder(b *testing.B) {
	url, name := benchSlot(b)
	text, bin := &capture{}, &capture{binary: true}
	readRaw(b, url, name, benchTxs, text)
	readRaw(b, url, name, benchTxs, bin)
	parse := func(msgs [][]byte) (int, error) {
		n := 0
		for _, m := range msgs {
			msg, err := pglogrepl.Parse(m)
			if err != nil {
				return n, err
			}
			if _, ok := msg.(*pglogrepl.InsertMessage); ok {
				n++
			}
		}
		return n, nil
	}
	runs := []struct {
		name string
		run  func([][]byte) (int, error)
		msgs [][]byte
		d    time.Duration
		n    int
	}{
		{name: "parse-text", run: parse, msgs: text.msgs},
		{name: "decode-text", run: pgcdc.DecodeMessages, msgs: text.msgs},
		{name: "parse-binary", run: parse, msgs: bin.msgs},
		{name: "decode-binary", run: pgcdc.DecodeMessages, msgs: bin.msgs},
	}
	for i := 0; b.Loop(); i++ {
		for j := range runs {
			r := &runs[(i+j)%len(runs)]
			start := time.Now()
			n, err := r.run(r.msgs)
			r.d += time.Since(start)
			if err != nil || n != benchTxs*benchRows {
				b.Fatalf("%s: %d changes, %v", r.name, n, err)
			}
			r.n += n
		}
	}
	rate := func(r int) float64 { return float64(runs[r].n) / runs[r].d.Seconds() }
	for i, r := range runs {
		b.ReportMetric(rate(i), r.name+"-changes/s")
	}
	b.ReportMetric(rate(1)/rate(0), "decode/parse-text")
	b.ReportMetric(rate(3)/rate(2), "decode/parse-binary")
}
