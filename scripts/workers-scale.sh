#!/usr/bin/env bash
# 1 vs N workers (issue 18: N workers must give at least 0.9 × N × one worker's throughput for
# handshakes and keep-alive requests): tlsgate with `workers = N` for each N of WORKERS, the same
# loads as scripts/peer-compare.sh, interleaved rounds, server CPU from /proc.
#
# Cells (each with an independent client, and `tlsgate bench` beside it where it applies):
#   fullsat13  full TLS 1.3 handshake + GET per connection: scripts/handshake-flood -finish (Go)
#              and `tlsgate bench --lean` (both cheap enough to keep server cores busy)
#   tkt13      resumed TLS 1.3 (ticket, PSK-DHE) + GET per connection: scripts/peer/sslload.c
#   ka         keep-alive HTTP/1.1 requests: wrk
#
# Where the machine has at least 2 × max(WORKERS) cores, the workers get cores 0..N-1 and the
# load the upper half of the cores, the same for every N: the table then shows the throughput
# scaling, rate(N) ÷ (N × rate(1)), the issue's figure. On a smaller machine (2 cores here) the
# server and the load share every core, so throughput cannot scale; what still shows is whether
# a worker does less per CPU-second when others run beside it (locks, shared cache lines,
# cross-thread wake-ups): the efficiency column, per CPU-second of N workers ÷ that of one.
#
#   scripts/workers-scale.sh                      # WORKERS="1 2", 3 rounds of 3 s
#   WORKERS="1 2 4 8" ROUNDS=5 scripts/workers-scale.sh   # on a 16-core machine
#
# Environment: WORKERS ("1 2"), CELLS (all), ROUNDS (3), DURATION (3 s), CONNS (client
# connections or loops per load core: 10), LOADS ("independent bench"), WORK (a new
# /tmp/tlsgate-workers.*), BUILD=1 (rebuild), GATEWAY_BIN (the server binary to measure).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

WORKERS=${WORKERS:-"1 2"}
CELLS=${CELLS:-all}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
CONNS=${CONNS:-10}
LOADS=${LOADS:-"independent bench"}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-workers.XXXXXX)}
BIN=$ROOT/target/release/tlsgate
BENCH_NAME=workers-scale
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
PORT=19743
ADMIN=19744

# id | label | bench arguments (-: none) | independent client
ALL_CELLS=(
  "fullsat13|Full TLS 1.3 handshake + GET per connection|--lean|flood"
  "tkt13|Resumed TLS 1.3 (ticket) + GET per connection|-|ssl"
  "ka|Keep-alive requests|--tls 1.3|wrk"
)
bench_select ALL_CELLS "$CELLS"

# ---- cores ----------------------------------------------------------------------------------
NCPU=$(nproc)
MAXW=0
for n in $WORKERS; do [ "$n" -gt "$MAXW" ] && MAXW=$n; done
if [ "$NCPU" -ge $((2 * MAXW)) ]; then
  LAYOUT=dedicated
  LOAD_CPUS="$((NCPU / 2))-$((NCPU - 1))"
  LOAD_CORES=$((NCPU - NCPU / 2))
else
  LAYOUT=shared
  LOAD_CPUS="0-$((NCPU - 1))"
  LOAD_CORES=$NCPU
fi
server_cpus() { # workers
  if [ "$LAYOUT" = dedicated ]; then echo "0-$(($1 - 1))"; else echo "0-$((NCPU - 1))"; fi
}
log "$NCPU cores, $LAYOUT layout: load on CPUs $LOAD_CPUS; results in $WORK"

# ---- prerequisites --------------------------------------------------------------------------
bench_install_missing jq:jq openssl:openssl curl:curl taskset:util-linux
bench_independent_clients
GATEWAY_BIN="" bench_build_tlsgate "$BIN"
cp "$BIN" "$WORK/tlsgate"
BIN=$WORK/tlsgate
bench_copy_gateway "$BIN"
bench_raise_nofile
bench_mint_certificate workers-scale-ca
for n in $WORKERS; do
  bench_render scripts/peer/tlsgate.toml.in "$WORK/tlsgate-w$n.toml" WORK="$WORK" PORT="$PORT" ADMIN="$ADMIN"
  sed -i "s/^workers = 1$/workers = $n/" "$WORK/tlsgate-w$n.toml"
  grep -q "^workers = $n$" "$WORK/tlsgate-w$n.toml" || {
    log "cannot set workers = $n in the configuration"
    exit 1
  }
done

# ---- one measurement ------------------------------------------------------------------------
RESULTS=$WORK/results.jsonl
: >"$RESULTS"

# The client's count of completed operations (requests; handshakes for nothing here) from OUT.
count_of() { # client out
  case $1 in
    flood) jq '.done' "$2" ;;
    ssl) jq '.requests' "$2" ;;
    wrk) awk '/ requests in / { print $1 }' "$2" ;;
    bench) jq '.requests' "$2" ;;
  esac
}
errors_of() { # client out
  case $1 in
    flood) jq '.refused + .other' "$2" ;;
    ssl) jq '.errors' "$2" ;;
    wrk) awk '/Socket errors:/ { gsub(",", ""); e += $4 + $6 + $8 + $10 } /Non-2xx/ { e += $NF } END { print e + 0 }' "$2" ;;
    bench) jq '.errors_total' "$2" ;;
  esac
}

run_load() { # client cell-args out
  local client=$1 args=$2 out=$3 url="https://127.0.0.1:$PORT/"
  case $client in
    flood)
      GOMAXPROCS=$LOAD_CORES taskset -c "$LOAD_CPUS" "$WORK/flood" -target "127.0.0.1:$PORT" \
        -sources 127.0.0.1 -conns $((CONNS * LOAD_CORES)) -duration "${DURATION}s" -finish >"$out" 2>&1 || true
      ;;
    ssl)
      taskset -c "$LOAD_CPUS" "$WORK/sslload" -t "127.0.0.1:$PORT" -c $((CONNS * LOAD_CORES)) \
        -d "$DURATION" -v 1.3 -r ticket -q >"$out" 2>/dev/null || true
      ;;
    wrk)
      taskset -c "$LOAD_CPUS" wrk -t"$LOAD_CORES" -c$((CONNS * LOAD_CORES)) -d"${DURATION}s" "$url" >"$out" 2>&1 || true
      ;;
    bench)
      # shellcheck disable=SC2086
      taskset -c "$LOAD_CPUS" "$BIN" bench --sni localhost -t "$LOAD_CORES" -c $((CONNS * LOAD_CORES)) \
        -d "$DURATION" --json "$out" $args "$url" >"$out.txt" 2>&1 || true
      ;;
  esac
}

measure() { # round workers cell-line
  local round=$1 n=$2 line=$3 id label args client load pid
  IFS='|' read -r id label args client <<<"$line"
  bench_start_server tlsgate "$(server_cpus "$n")" "$WORK/tlsgate-w$n.toml" "$PORT" 0.5
  pid=$BENCH_PID
  for load in $LOADS; do
    local who=$client
    if [ "$load" = bench ]; then
      [ "$args" != - ] || continue
      who=bench
    fi
    local out=$WORK/w$n-$id-$load-$round.out c0 c1 t0 t1 count errors
    c0=$(bench_cpu_total "$pid")
    t0=$(date +%s.%N)
    run_load "$who" "$args" "$out"
    c1=$(bench_cpu_total "$pid")
    t1=$(date +%s.%N)
    count=$(count_of "$who" "$out" 2>/dev/null || echo 0)
    errors=$(errors_of "$who" "$out" 2>/dev/null || echo -1)
    jq -cn --arg id "$id" --arg load "$load" --arg client "$who" --argjson w "$n" --argjson r "$round" \
      --argjson count "${count:-0}" --argjson errors "${errors:--1}" \
      --argjson cpu "$(awk -v a="$c0" -v b="$c1" -v t="$TCK" 'BEGIN { print (b - a) / t }')" \
      --argjson wall "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
      '{id: $id, load: $load, client: $client, workers: $w, round: $r, count: $count, errors: $errors,
        cpu: $cpu, wall: $wall, rate: ($count / $wall), per: (if $cpu > 0 then $count / $cpu else 0 end)}' >>"$RESULTS"
    log "round $round, $n worker(s), $id ($who): $count in ${DURATION}s, server CPU $(awk -v a="$c0" -v b="$c1" -v t="$TCK" 'BEGIN { printf "%.2f", (b - a) / t }') s"
  done
  bench_stop_pid "$pid"
}

servers=()
for n in $WORKERS; do servers+=("$n"); done
bench_rounds "$ROUNDS" measure

# ---- table ----------------------------------------------------------------------------------
echo
echo "### tlsgate, 1 vs N workers ($LAYOUT layout, $NCPU cores)"
echo
echo "\`WORKERS=\"$WORKERS\" ROUNDS=$ROUNDS DURATION=$DURATION scripts/workers-scale.sh\`; load on CPUs $LOAD_CPUS; medians of $ROUNDS interleaved rounds; per server CPU-second."
echo
bench_table_head "l:cell" "l:client" "r:workers" "r:rate /s" "r:server CPU ÷ wall" "r:per server CPU-s" "r:efficiency vs 1 worker" "r:rate ÷ (N × rate of 1)" "r:errors"
jq -rs --arg layout "$LAYOUT" "$BENCH_JQ_MEDIAN"'
  group_by([.id, .load]) | .[] |
  (map(select(.workers == 1)) | {rate: (map(.rate) | median), per: (map(.per) | median)}) as $one |
  group_by(.workers) | .[] |
  {id: .[0].id, client: .[0].client, w: .[0].workers, rate: (map(.rate) | median),
   busy: (map(.cpu / .wall) | median), per: (map(.per) | median), errors: (map(.errors) | add)} |
  "| \(.id) | \(.client) | \(.w) | \(.rate | round) | \(.busy * 100 | round)% | \(.per | round) | \(if $one.per > 0 then "\(.per / $one.per * 100 | round / 100)×" else "—" end) | \(if $layout == "dedicated" and $one.rate > 0 then "\(.rate / (.w * $one.rate) * 100 | round / 100)×" else "n/a (shared cores)" end) | \(.errors) |"
' "$RESULTS"
