#!/usr/bin/env bash
# Instructions per proxied request of one or more tlsgate builds, counted by valgrind's callgrind
# (user space only: the gateway's own code, BoringSSL, the allocator, libc; not the kernel), for
# an A/B of a change to the request path that the proxy cells' rounds cannot resolve: on this
# shared machine requests per CPU-second move by ±15 % between rounds of the same binary, while
# the instruction count of a fixed number of requests repeats within ±0.1 %. It is not a figure of
# record (those are scripts/proxy-compare.sh's, per CPU-second with wrk and h2load); it says
# whether a change removed work, and how much.
#
#   WORK=/tmp/pc1 scripts/proxy-instructions.sh /tmp/tlsgate-before /tmp/tlsgate-after
#   WORK=/tmp/pc1 CELLS="h2_13 grpc" N=20000 scripts/proxy-instructions.sh A B
#
# WORK is the work directory of an earlier scripts/proxy-compare.sh run (its configurations,
# certificate, origin files and, for the grpc cell, the built gRPC origin); the same ports are
# used, so no proxy-compare run may be going on. Per cell and binary: the origin(s) on LOAD_CPU,
# the gateway (one worker) under callgrind on PROXY_CPU with instrumentation off, a warm-up of
# 3,000 requests, then N requests from h2load with instrumentation on; the figure is the
# instructions executed (callgrind's Ir, all threads) ÷ N. h2load drives the HTTP/1.1 cells too
# (`--h1`), so that one client paces every cell. The load is the same as proxy-compare's cells:
#   h1_13, h1_1k   HTTP/1.1 keep-alive, 32 connections          h2load --h1 -c32
#   h2_13, h2_1k   HTTP/2, 16 connections × 10 streams          h2load -c16 -m10
#   h2h2_13        the same to the HTTP/2 TLS origin (/h2o/13b)
#   grpc           SayHello calls to the Go gRPC origin (the request body from $WORK)
#
# Environment: WORK (required), CELLS ("h1_13 h2_13 h2h2_13 grpc"), N (20000), PROXY_CPU (0),
# LOAD_CPU (1).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${WORK:?WORK: the work directory of an earlier scripts/proxy-compare.sh run}
CELLS=${CELLS:-"h1_13 h2_13 h2h2_13 grpc"}
N=${N:-20000}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
BENCH_NAME=proxy-instructions
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
(($#)) || { echo "usage: WORK=DIR $0 BINARY..." >&2; exit 2; }
for f in tlsgate.toml origin.conf www/13b; do
  [ -e "$WORK/$f" ] || { log "$WORK/$f missing (run scripts/proxy-compare.sh with WORK=$WORK first)"; exit 1; }
done
bench_install_missing valgrind:valgrind h2load:nghttp2-client nginx:nginx-light
# The ports of that run: the HTTPS listener (the line after `[[listener]]`), the origin, and the
# gRPC origin (the `grpc` upstream's server).
PORT=$(sed -n '/^\[\[listener\]\]/{n;s/^listen = "127.0.0.1:\([0-9]*\)"/\1/p}' "$WORK/tlsgate.toml" | head -1)
ORIGIN_PORT=$(sed -n 's/^ *listen 127.0.0.1:\([0-9]*\)[ ;].*/\1/p' "$WORK/origin.conf" | head -1)
GRPC_PORT=$(sed -n '/^name = "grpc"/{n;s/^servers = \["127.0.0.1:\([0-9]*\)"\]/\1/p}' "$WORK/tlsgate.toml" | head -1)
OUT=$WORK/instructions
mkdir -p "$OUT"
sed 's/^workers = .*/workers = 1/' "$WORK/tlsgate.toml" >"$OUT/tlsgate.toml"

ORIGIN_PID="" GRPC_PID="" GW_PID=""
cleanup() {
  bench_stop_pid "$GW_PID"
  bench_stop_pid "$GRPC_PID"
  bench_stop_pid "$ORIGIN_PID"
}
trap cleanup EXIT

# The h2load arguments of a cell (its path last).
cell_args() {
  case $1 in
    h1_13) echo "--h1 -c32 /13b" ;;
    h1_1k) echo "--h1 -c32 /1k" ;;
    h2_13) echo "-c16 -m10 /13b" ;;
    h2_1k) echo "-c16 -m10 /1k" ;;
    h2h2_13) echo "-c16 -m10 /h2o/13b" ;;
    grpc) echo "-c16 -m10 /helloworld.Greeter/SayHello" ;;
    *) log "unknown cell $1"; exit 2 ;;
  esac
}

# Runs h2load for COUNT requests of CELL; fails loudly unless every one succeeded.
load() { # cell count
  local args path extra=()
  args=$(cell_args "$1")
  path=${args##* }
  args=${args% *}
  [ "$1" = grpc ] && extra=(-d "$WORK/grpc-request.bin" -H 'content-type: application/grpc' -H 'te: trailers')
  # shellcheck disable=SC2086
  taskset -c "$LOAD_CPU" h2load -t1 $args -n "$2" "${extra[@]}" "https://127.0.0.1:$PORT$path" >"$OUT/h2load.txt" 2>&1 || true
  grep -q "succeeded, 0 failed, 0 errored" "$OUT/h2load.txt" && grep -q "requests: $2 total" "$OUT/h2load.txt" || {
    log "$1: not every request succeeded:"
    grep -E 'requests:|status codes' "$OUT/h2load.txt" >&2 || cat "$OUT/h2load.txt" >&2
    exit 1
  }
}

# Instructions per request of BINARY in CELL (printed).
count() { # binary cell
  local bin=$1 cell=$2 ir
  rm -f "$OUT"/callgrind.out*
  taskset -c "$PROXY_CPU" valgrind --tool=callgrind --instr-atstart=no --cache-sim=no --branch-sim=no \
    --callgrind-out-file="$OUT/callgrind.out" "$bin" serve --config "$OUT/tlsgate.toml" >"$OUT/gateway.log" 2>&1 &
  GW_PID=$!
  bench_wait_port "$PORT" || { sleep 10; bench_wait_port "$PORT"; } || {
    log "the gateway did not start under valgrind:"
    tail -n 20 "$OUT/gateway.log" >&2
    exit 1
  }
  load "$cell" 3000
  callgrind_control -i on "$GW_PID" >/dev/null 2>&1
  load "$cell" "$N"
  callgrind_control -d "$GW_PID" >/dev/null 2>&1
  bench_stop_pid "$GW_PID"
  GW_PID=""
  ir=$(awk '/^summary:/ {s += $2} END {printf "%.0f", s}' "$OUT/callgrind.out.1")
  [ "${ir:-0}" -gt 0 ] || { log "no instruction count from callgrind ($OUT)"; exit 1; }
  echo $((ir / N))
}

bench_ports_free "$PORT" "$ORIGIN_PORT"
taskset -c "$LOAD_CPU" nginx -p "$WORK" -c "$WORK/origin.conf" -e "$WORK/origin-error.log" >"$OUT/origin.log" 2>&1 &
ORIGIN_PID=$!
bench_wait_port "$ORIGIN_PORT" || { log "the origin did not start"; exit 1; }
if [[ " $CELLS " == *" grpc "* ]]; then
  [ -x "$WORK/grpc-origin" ] || { log "$WORK/grpc-origin missing (a proxy-compare run with the grpc cell builds it)"; exit 1; }
  GOMAXPROCS=1 taskset -c "$LOAD_CPU" "$WORK/grpc-origin" -listen "127.0.0.1:$GRPC_PORT" \
    -status "127.0.0.1:$((GRPC_PORT + 1))" >"$OUT/grpc-origin.log" 2>&1 &
  GRPC_PID=$!
  bench_wait_port "$GRPC_PORT" || { log "the gRPC origin did not start"; exit 1; }
fi

printf '| cell |'
for b in "$@"; do printf ' %s |' "$(basename "$b")"; done
(($# > 1)) && printf ' last ÷ first |'
printf '\n|---|'
for _ in "$@"; do printf -- '---:|'; done
(($# > 1)) && printf -- '---:|'
printf '\n'
for cell in $CELLS; do
  figures=()
  for b in "$@"; do figures+=("$(count "$b" "$cell")"); done
  printf '| %s |' "$cell"
  for f in "${figures[@]}"; do printf ' %s |' "$f"; done
  (($# > 1)) && awk -v a="${figures[0]}" -v b="${figures[-1]}" 'BEGIN {printf " %.3f |", b / a}'
  printf '\n'
done
