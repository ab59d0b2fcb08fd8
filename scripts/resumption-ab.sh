#!/usr/bin/env bash
# Two tlsgate builds side by side in one resumption cell, in alternating pairs (the order
# swapped every pair): each build serves the configuration of an earlier
# scripts/peer-compare.sh run (its WORK: tlsgate.toml, the certificate, the compiled sslload)
# on CPU 0 while OpenSSL's libssl (scripts/peer/sslload.c) resumes with a GET on each
# connection from CPU 1. Per pair: connections per server CPU-second (utime + stime from
# /proc) of B ÷ A; at the end the median of the pairs. For a change too small for the rounds of
# peer-compare's own table (docs/BENCHMARKS.md, "The end of a short connection in one segment").
#
#   WORK=/tmp/pl1 scripts/resumption-ab.sh /tmp/tlsgate-before /tmp/tlsgate-after
#   WORK=/tmp/pl1 PAIRS=10 ARGS="-v 1.2 -r id -q" scripts/resumption-ab.sh A B
#   WORK=/tmp/pl1 CLIENT=flood scripts/resumption-ab.sh A B   # full TLS 1.3 handshake + GET
#
# Environment: WORK (required: a peer-compare.sh work directory), ARGS (sslload's: "-v 1.3 -r
# ticket -q"), PAIRS (10), DURATION (3 s), CONNS (10), SERVER_CPU (0), LOAD_CPU (1), CLIENT
# (sslload; flood: the saturating full-handshake client of peer-compare's fullsat13 cell,
# `flood -finish`, instead — ARGS is then not used).
set -euo pipefail
A=${1:?usage: WORK=DIR $0 BINARY_A BINARY_B}
B=${2:?usage: WORK=DIR $0 BINARY_A BINARY_B}
WORK=${WORK:?WORK: the work directory of an earlier scripts/peer-compare.sh run}
ARGS=${ARGS:-"-v 1.3 -r ticket -q"}
PAIRS=${PAIRS:-10}
DURATION=${DURATION:-3}
CONNS=${CONNS:-10}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
CLIENT=${CLIENT:-sslload}
for f in tlsgate.toml "$CLIENT"; do
  [ -e "$WORK/$f" ] || { echo "resumption-ab: $WORK/$f missing (run scripts/peer-compare.sh with WORK=$WORK first)" >&2; exit 1; }
done
PORT=$(sed -n 's/^listen = "127.0.0.1:\([0-9]*\)"/\1/p' "$WORK/tlsgate.toml" | tail -1)
[ -n "$PORT" ] || { echo "resumption-ab: no HTTPS listener in $WORK/tlsgate.toml" >&2; exit 1; }

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# One run of BINARY: prints connections per server CPU-second; fails loudly on client errors.
run() {
  local bin=$1 pid t0 t1 out n errors
  taskset -c "$SERVER_CPU" "$bin" serve --config "$WORK/tlsgate.toml" >"$WORK/ab-gateway.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
  done
  t0=$(ticks "$pid")
  if [ "$CLIENT" = flood ]; then
    out=$(taskset -c "$LOAD_CPU" "$WORK/flood" -target "127.0.0.1:$PORT" -sources 127.0.0.1 -conns "$CONNS" \
      -duration "${DURATION}s" -finish | tail -n 1)
  else
    # shellcheck disable=SC2086
    out=$(taskset -c "$LOAD_CPU" "$WORK/sslload" -t "127.0.0.1:$PORT" -c "$CONNS" -d "$DURATION" $ARGS)
  fi
  t1=$(ticks "$pid")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  if [ "$CLIENT" = flood ]; then
    n=$(echo "$out" | grep -oE '"done": *[0-9]+' | grep -oE '[0-9]+$')
    errors=$(echo "$out" | grep -oE '"(refused|other)": *[0-9]+' | grep -oE '[0-9]+$' | awk '{s += $1} END {print s + 0}')
  else
    n=$(echo "$out" | grep -oE '"handshakes": *[0-9]+' | grep -oE '[0-9]+$')
    errors=$(echo "$out" | grep -oE '"errors": *[0-9]+' | grep -oE '[0-9]+$')
  fi
  if [ -z "$n" ] || [ "$n" = 0 ] || [ "${errors:-1}" != 0 ] || [ "$t1" = "$t0" ]; then
    echo "resumption-ab: $bin: no clean run: $out" >&2
    exit 1
  fi
  echo "$n $t0 $t1" | awk '{printf "%.0f\n", $1 / (($3 - $2) / 100)}'
}

ratios=()
for i in $(seq "$PAIRS"); do
  if ((i % 2)); then a=$(run "$A"); b=$(run "$B"); else b=$(run "$B"); a=$(run "$A"); fi
  r=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b / a}')
  ratios+=("$r")
  echo "pair $i: A $a, B $b per server CPU-second, B/A $r"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR] = $1} END {
  m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "median B/A over %d pairs: %.3f (%.3f to %.3f)\n", NR, m, v[1], v[NR] }'
