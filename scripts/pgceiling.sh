#!/usr/bin/env bash
# pgceiling.sh measures, with pgbench alone (no Go client), what grouping
# appends could at best give on a PostgreSQL server: the server's own rate
# for varve's append statements and for plain INSERTs, one at a time and in
# groups of k appends per transaction with c groups in flight. 8 appenders
# that each wait for their own append have at most 8 appends outstanding,
# so k x c <= 8 bounds any client-side group commit of theirs (issue #20,
# goal 1; docs/benchmarks.md, "PostgreSQL: what grouping could give").
#
#   scripts/pgceiling.sh [rounds] [seconds]      (defaults 3 and 10)
#
# $VARVE_POSTGRES_URL names the server (default the loopback test database).
# The schema varve_ceiling is made by `varve bench` (so it has every
# migration) and dropped at the end. The statements mirror the fast append of
# backend/postgres/queries.go (fastAppend), written for 1 and for k streams.
set -euo pipefail
rounds=${1:-3}
secs=${2:-10}
url=${VARVE_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
schema=varve_ceiling
sep='?'
[[ $url == *\?* ]] && sep='&'
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"; psql "$url" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true' EXIT

go run ./cmd/varve bench --store "$url${sep}varve_schema=$schema" --workload stream-info --events 10 >/dev/null 2>&1
psql "$url" -qc "CREATE TABLE $schema.bare (stream text, version bigint, id uuid, type text, data bytea, metadata bytea)
    ; CREATE TABLE $schema.bare_log (tx bigint, seq bigserial, stream text, version bigint, id uuid, type text, data bytea, metadata bytea, category text)"

data="'\\x7b22616d6f756e74223a34327d'::bytea"
# One append per transaction: the fast append statement, any expected version.
cat >"$dir/varve1.sql" <<EOF
\set a random(1, 1000)
WITH cur AS (SELECT st.version, st.xmin AS x FROM $schema.streams st WHERE st.stream = ('s' || :client_id || '-' || :a)::text),
up AS (INSERT INTO $schema.streams AS st (stream, version)
  SELECT ('s' || :client_id || '-' || :a), v + 1 FROM (SELECT coalesce((SELECT version FROM cur), 0) AS v) c
  ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version, updated_at = now()
   WHERE st.xmin = (SELECT x FROM cur) AND NOT st.deleted AND NOT st.tombstoned
  RETURNING st.version),
ins AS (INSERT INTO $schema.events (tx, stream, version, id, type, data, metadata, category)
  SELECT pg_current_xact_id()::text::bigint, ('s' || :client_id || '-' || :a), up.version, gen_random_uuid(), 'BenchEvent', $data, NULL::bytea, 's' FROM up
  RETURNING version, tx, seq)
SELECT version, tx, seq FROM ins;
EOF
echo "INSERT INTO $schema.bare (stream, version, id, type, data) VALUES ('s' || :client_id, 1, gen_random_uuid(), 'BenchEvent', $data);" >"$dir/bare1.sql"

# group k: k appends to k streams in one statement (the fast append over
# arrays); events k / bare_log k: k rows into the events table (all its
# indexes, no stream rows) or into a table like it without indexes;
# events1 is the first row of events2.
for k in 2 4 8; do
	arr=""
	for i in $(seq 1 "$k"); do
		echo "\\set a$i random(1, 1000)"
		arr="$arr${arr:+, }'s' || :client_id || '-$i-' || :a$i"
	done >"$dir/group$k.sql"
	cat >>"$dir/group$k.sql" <<EOF
WITH inp AS (SELECT s.stream, s.ord FROM unnest(ARRAY[$arr]::text[]) WITH ORDINALITY AS s(stream, ord)),
cur AS (SELECT st.stream, st.version, st.xmin AS x FROM $schema.streams st WHERE st.stream = ANY(ARRAY[$arr]::text[])),
up AS (INSERT INTO $schema.streams AS st (stream, version)
  SELECT i.stream, coalesce(c.version, 0) + 1 FROM inp i LEFT JOIN cur c ON c.stream = i.stream ORDER BY i.stream
  ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version, updated_at = now()
   WHERE st.xmin = (SELECT x FROM cur WHERE cur.stream = st.stream) AND NOT st.deleted AND NOT st.tombstoned
  RETURNING st.stream, st.version),
ins AS (INSERT INTO $schema.events (tx, stream, version, id, type, data, metadata, category)
  SELECT pg_current_xact_id()::text::bigint, up.stream, up.version, gen_random_uuid(), 'BenchEvent', $data, NULL::bytea, 's'
  FROM up JOIN inp i ON i.stream = up.stream ORDER BY i.ord
  RETURNING stream, version, tx, seq)
SELECT stream, version, tx, seq FROM ins;
EOF
	for t in events bare_log; do
		vals=""
		for i in $(seq 1 "$k"); do
			vals="$vals${vals:+, }(pg_current_xact_id()::text::bigint, gen_random_uuid()::text, 1, gen_random_uuid(), 'BenchEvent', $data, NULL::bytea, 's')"
		done
		echo "INSERT INTO $schema.$t (tx, stream, version, id, type, data, metadata, category) VALUES $vals;" >"$dir/$t$k.sql"
	done
done

# rate FILE CLIENTS ROWS: events/s of FILE from CLIENTS connections.
rate() {
	local tps
	tps=$(pgbench "$url" -n -M prepared -f "$dir/$1.sql" -c "$2" -j "$2" -T "$secs" 2>&1 | awk '/^tps/ {print $3}')
	[[ -n $tps ]] || { echo "pgbench failed on $1" >&2; exit 1; }
	awk -v t="$tps" -v k="$3" 'BEGIN {printf "%.0f", t * k}'
}

# Each case: file, connections, rows per transaction, the appenders it
# stands for (its ratio is to the bare INSERT from as many clients).
cases=("varve1 1 1 1" "events1 1 1 1" "varve1 8 1 8" "events1 8 1 8" "group8 1 8 8" "group4 2 4 8" "group2 4 2 8"
	"events8 1 8 8" "events4 2 4 8" "bare_log8 1 8 8" "bare_log4 2 4 8")
echo "PostgreSQL $(psql "$url" -Atc 'SHOW server_version'), synchronous_commit $(psql "$url" -Atc 'SHOW synchronous_commit'), $(nproc) cores"
echo "events/s of each case as NAME xCONNECTIONS, and its ratio to the bare INSERT from as many clients as it has appenders, same round"
cp "$dir/events2.sql" "$dir/events1.sql"
sed -i 's/), (pg_current.*;$/);/' "$dir/events1.sql"
for r in $(seq 1 "$rounds"); do
	base1=$(rate bare1 1 1)
	base8=$(rate bare1 8 1)
	line="round $r (load $(cut -d' ' -f1 /proc/loadavg)): bare x1 $base1 | bare x8 $base8"
	for c in "${cases[@]}"; do
		set -- $c
		v=$(rate "$1" "$2" "$3")
		base=$base8
		[[ $4 == 1 ]] && base=$base1
		line="$line | $1 x$2 $v ($(awk -v a="$v" -v b="$base" 'BEGIN {printf "%.2f", a / b}')x)"
	done
	echo "$line"
done
