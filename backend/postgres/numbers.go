package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
)

// Position numbers (varve.PositionNumbers): the number of a position
// (tx, seq) is tx<<16 | (65535 - the count of the events of transaction tx
// after seq). The events of a transaction are numbered down from
// tx<<16 | 65535, its last, so that removing earlier events of the same
// transaction (a Truncate of a stream it wrote) leaves the numbers as they
// were; only removing later ones raises them. docs/server.md has the
// derivation.
const (
	// numberTxBits and numberRankBits split a number's 53 bits.
	numberRankBits = 16
	numberTxBits   = 53 - numberRankBits
	maxNumberRank  = 1<<numberRankBits - 1
	maxNumberTx    = 1<<numberTxBits - 1
)

// positionNumber returns the number of a position of transaction tx with
// after events of the same transaction after it.
func positionNumber(p varve.Position, after int64) (uint64, error) {
	switch {
	case p.Commit > maxNumberTx:
		return 0, fmt.Errorf("%w: position %s has no number: transaction ids over %d do not fit its %d bits",
			varve.ErrInvalidArgument, p, uint64(maxNumberTx), numberTxBits)
	case after > maxNumberRank:
		return 0, fmt.Errorf("%w: position %s has no number: %d events of its transaction come after it, at most %d fit its %d bits",
			varve.ErrInvalidArgument, p, after, maxNumberRank, numberRankBits)
	}
	return p.Commit<<numberRankBits | uint64(maxNumberRank-after), nil
}

// numberQueries returns the statements of position numbers. The count of
// the events of each position's transaction after it is a running count
// over the positions and the events of their transactions from the end
// down to the earliest position asked for in each, at most 65536 of them
// (a position with more after it has no number): one statement for a
// page, whose cost is the events it numbers and those after them in their
// transactions. A position whose event was removed since it was read is
// numbered too, between its neighbours.
func numberQueries(s string) (numbers, position string) {
	numbers = `SELECT a.i, a.n FROM (
    SELECT a.i, count(*) FILTER (WHERE a.i IS NULL)
           OVER (PARTITION BY a.tx ORDER BY a.seq DESC, a.i NULLS LAST ROWS UNBOUNDED PRECEDING) AS n
    FROM (
        SELECT m.tx, e.seq, NULL::bigint AS i
          FROM (SELECT p.tx, min(p.seq) AS seq FROM unnest($1::bigint[], $2::bigint[]) AS p(tx, seq) GROUP BY p.tx) m
         CROSS JOIN LATERAL (
            SELECT e.seq FROM ` + s + `.events e WHERE e.tx = m.tx AND e.seq > m.seq
             ORDER BY e.seq DESC LIMIT ` + strconv.Itoa(maxNumberRank+1) + `
        ) e
        UNION ALL
        SELECT p.tx, p.seq, p.i FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS p(tx, seq, i)
    ) a
) a
WHERE a.i IS NOT NULL`
	position = `SELECT e.seq FROM ` + s + `.events e WHERE e.tx = $1 ORDER BY e.seq DESC OFFSET $2 LIMIT 1`
	return numbers, position
}

// NumberPositions implements varve.PositionNumbers in one statement.
func (b *Backend) NumberPositions(ctx context.Context, ps []varve.Position) ([]uint64, error) {
	if err := b.begin(ctx); err != nil {
		return nil, err
	}
	out := make([]uint64, len(ps))
	txs, seqs := make([]int64, 0, len(ps)), make([]int64, 0, len(ps))
	at := make([]int, 0, len(ps)) // the index in ps of each position asked for
	for i, p := range ps {
		if p.IsZero() {
			continue
		}
		if _, err := positionNumber(p, 0); err != nil {
			return nil, err
		}
		if p.Seq > math.MaxInt64 {
			return nil, fmt.Errorf("%w: position %s has no number: sequence numbers go up to %d", varve.ErrInvalidArgument, p, int64(math.MaxInt64))
		}
		txs, seqs, at = append(txs, int64(p.Commit)), append(seqs, int64(p.Seq)), append(at, i)
	}
	if len(at) == 0 {
		return out, nil
	}
	b.requests.Add(1)
	rows, err := b.pool.Query(ctx, b.sql.numberPositions, txs, seqs)
	if err != nil {
		return nil, b.fail(ctx, err)
	}
	seen := 0
	var i, after int64
	_, err = pgx.ForEachRow(rows, []any{&i, &after}, func() error {
		if i < 1 || int(i) > len(at) {
			return fmt.Errorf("postgres: position numbers: row %d of %d", i, len(at))
		}
		k := at[i-1]
		n, err := positionNumber(ps[k], after)
		out[k] = n
		seen++
		return err
	})
	if err != nil {
		if errors.Is(err, varve.ErrInvalidArgument) {
			return nil, err
		}
		return nil, b.fail(ctx, err)
	}
	if seen != len(at) {
		return nil, fmt.Errorf("postgres: position numbers: %d rows for %d positions", seen, len(at))
	}
	return out, nil
}

// PositionOfNumber implements varve.PositionNumbers with one read of the
// primary key: the position of the event of transaction n>>16 that has
// 65535 - n&65535 events of its transaction after it, or, when the
// transaction has fewer events, the position before all of them.
func (b *Backend) PositionOfNumber(ctx context.Context, n uint64) (varve.Position, error) {
	if err := b.begin(ctx); err != nil {
		return varve.Position{}, err
	}
	tx, after := n>>numberRankBits, maxNumberRank-int64(n&maxNumberRank)
	if tx == 0 {
		return varve.Start, nil
	}
	var seq int64
	b.requests.Add(1)
	err := b.pool.QueryRow(ctx, b.sql.positionOfNumber, int64(tx), after).Scan(&seq)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return varve.Position{Commit: tx}, nil
	case err != nil:
		return varve.Position{}, b.fail(ctx, err)
	}
	return varve.Position{Commit: tx, Seq: uint64(seq)}, nil
}
