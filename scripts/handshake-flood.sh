#!/usr/bin/env bash
# What a flood of full TLS handshakes from a few sources does to everyone else (issue 28), with
# tlsgate's [server.handshake_budget] off and on, and nginx with limit_conn/limit_req beside it.
# A measurement, not a test: results go to docs/BENCHMARKS.md ("Handshake floods").
#
#   scripts/handshake-flood.sh                    # ~2 minutes with the defaults
#   DURATION=30 KEY=ecdsa scripts/handshake-flood.sh
#
# Each run: the server, one worker pinned to SERVER_CPU; on LOAD_CPU the flood
# (scripts/handshake-flood/main.go, built with go into $WORK): SOURCES source addresses
# (127.0.0.2, 127.0.0.3, ...) × CONNS loops each of connect, send one fixed TLS 1.3 ClientHello
# (X25519 share computed once, nothing to resume), read until the server's encrypted first
# flight (it has signed by then) or an alert, reset — the cheapest flood, with no cryptography
# on the client, so one client core keeps a server core signing; and, on the same core, the
# canary: curl from 127.0.0.1 in a loop (a new process, so a new connection and a full
# handshake each time, then GET /), at most CANARY_RATE a second (within any budget a real
# browser would need). Measured while both run: the canary's success rate (HTTP 200 within
# 5 s) and its latency (curl's time_total: p50, p99), the server's CPU (ticks of its processes /
# wall time), and the flood's signed and refused handshakes a second. A run of the canary alone
# against each server gives the canary's own CPU per request; "CPU on the flood" is the
# server's CPU minus that times the canary requests served, as a share of the server's CPU.
#
# Runs: canary alone (tlsgate, nginx); flood against tlsgate without a budget, with each budget
# of BUDGETS (per source), and against nginx with limit_conn 16 and limit_req at the first
# budget's rate and burst per address (nginx limits requests after the handshake; see
# scripts/handshake-flood/nginx.conf.in).
#
# Environment:
#   DURATION         seconds the canary runs in each run (15); the flood runs 2 s longer
#   SOURCES          flooding source addresses (20)   CONNS      loops per source (4)
#   BUDGETS          the budgets run, "full_per_second:full_burst" each ("20:40 5:10": the
#                    defaults of the documentation's example, and one that keeps SOURCES × rate
#                    well under what one core signs)
#   CANARY_RATE      canary requests a second at most (4: within every budget above)
#   KEY              rsa (RSA-2048, default: the signature dominates) or ecdsa (P-256)
#   SERVER_CPU (0), LOAD_CPU (1)   cores: the server; the flood and the canary
#   WORK             working directory (a new /tmp/tlsgate-flood.*; kept: configs, logs, raw runs)
#   BUILD=1          rebuild tlsgate first; GATEWAY_BIN: the tlsgate binary measured
#   PORT_OFFSET      added to every port (0: 19560 tlsgate, 19561 its admin, 19562 nginx)
# Output: a Markdown table on stdout, progress on stderr, raw figures in $WORK/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-15}
SOURCES=${SOURCES:-20}
CONNS=${CONNS:-4}
BUDGETS=${BUDGETS:-"20:40 5:10"}
CANARY_RATE=${CANARY_RATE:-4}
read -r -a budgets <<<"$BUDGETS"
FIRST_RATE=${budgets[0]%%:*}
FIRST_BURST=${budgets[0]##*:}
KEY=${KEY:-rsa}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
PORT_OFFSET=${PORT_OFFSET:-0}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-flood.XXXXXX)}
BIN=$ROOT/target/release/tlsgate
PATH=$PATH:/usr/sbin:/sbin:/usr/local/go/bin
BENCH_NAME=handshake-flood
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh

TG_PORT=$((19560 + PORT_OFFSET))
ADMIN=$((19561 + PORT_OFFSET))
NGINX_PORT=$((19562 + PORT_OFFSET))
RESULTS=$WORK/results.jsonl

bench_install_missing curl:curl nginx:nginx-light taskset:util-linux jq:jq bc:bc
command -v go >/dev/null || {
  log "go is needed to build the flooding client (https://go.dev/dl/)"
  exit 1
}
bench_build_tlsgate "$BIN"
bench_copy_gateway "$BIN"
bench_raise_nofile
bench_ports_free "$TG_PORT" "$ADMIN" "$NGINX_PORT"
mkdir -p "$WORK/nginx-tmp"
: >"$RESULTS"

# The certificate: a CA and a leaf for localhost (RSA-2048 or ECDSA P-256).
mint() {
  local kind
  case $KEY in
    rsa) kind=(-newkey rsa:2048) ;;
    ecdsa) kind=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1) ;;
    *) log "KEY is rsa or ecdsa"; exit 2 ;;
  esac
  openssl req -x509 "${kind[@]}" -nodes -days 30 -subj "/CN=flood CA" \
    -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
  openssl req "${kind[@]}" -nodes -subj /CN=localhost -keyout "$WORK/leaf.key" -out "$WORK/leaf.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
    >"$WORK/leaf.ext"
  openssl x509 -req -in "$WORK/leaf.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial \
    -days 30 -extfile "$WORK/leaf.ext" -out "$WORK/leaf.pem" 2>/dev/null
}
mint
log "building the flooding client"
(cd scripts/handshake-flood && GOFLAGS=-mod=mod go build -o "$WORK/flood" .) >&2

bench_render scripts/handshake-flood/tlsgate.toml.in "$WORK/tlsgate-off.toml" WORK="$WORK" PORT="$TG_PORT" ADMIN="$ADMIN" BUDGET=""
for b in "${budgets[@]}"; do
  budget="[server.handshake_budget]\\nfull_per_second = ${b%%:*}\\nfull_burst = ${b##*:}"
  bench_render scripts/handshake-flood/tlsgate.toml.in "$WORK/tlsgate-${b%%:*}.toml" WORK="$WORK" PORT="$TG_PORT" \
    ADMIN="$ADMIN" BUDGET="$budget"
done
bench_render scripts/handshake-flood/nginx.conf.in "$WORK/nginx.conf" WORK="$WORK" PORT="$NGINX_PORT" \
  RATE="$FIRST_RATE" BURST="$FIRST_BURST"
sources=$(seq 2 $((SOURCES + 1)) | sed 's/^/127.0.0./' | paste -sd, -)

# The canary from 127.0.0.1 for DURATION seconds: one line "code seconds" per request.
canary() { # port out
  local end=$((SECONDS + DURATION)) pause line
  pause=$(echo "1 / $CANARY_RATE" | bc -l)
  : >"$2"
  while [ "$SECONDS" -lt "$end" ]; do
    line=$(curl -sS --max-time 5 --cacert "$WORK/ca.pem" --resolve "localhost:$1:127.0.0.1" -o /dev/null \
      -w '%{http_code} %{time_total}' "https://localhost:$1/" 2>/dev/null) || true
    echo "${line:-000 5}" >>"$2"
    sleep "$pause"
  done
}
# The q-quantile (0..1) of the numbers on stdin.
quantile() { sort -n | awk -v q="$1" '{a[NR]=$1} END {if (NR == 0) {print "null"; exit} i = int(q * NR + 0.999999); if (i < 1) i = 1; print a[i]}'; }

# One run: ID (file names) NAME (table) SERVER CONF PORT FLOOD(0/1).
run() {
  local id=$1 name=$2 server=$3 conf=$4 port=$5 flood=$6 flood_pid="" t0 t1 c0 c1
  log "$name"
  case $server in
    tlsgate) bench_start_server tlsgate "$SERVER_CPU" "$conf" "$port" 0.3 ;;
    nginx) bench_start_server nginx "$SERVER_CPU" "$conf" "$port" 0.5 ;;
  esac
  if [ "$flood" = 1 ]; then
    taskset -c "$LOAD_CPU" "$WORK/flood" -target "127.0.0.1:$port" -sources "$sources" \
      -conns "$CONNS" -duration "$((DURATION + 2))s" >"$WORK/$id-flood.json" 2>"$WORK/$id-flood.err" &
    flood_pid=$!
    sleep 1
  fi
  read -r -a c0 <<<"$(bench_cpu_ticks "$BENCH_PID")"
  t0=$(date +%s.%N)
  taskset -c "$LOAD_CPU" bash -c "$(declare -f canary); DURATION=$DURATION CANARY_RATE=$CANARY_RATE WORK=$WORK canary $port $WORK/$id-canary.txt"
  t1=$(date +%s.%N)
  read -r -a c1 <<<"$(bench_cpu_ticks "$BENCH_PID")"
  local metrics=""
  [ "$server" = tlsgate ] && metrics=$(curl -s "http://127.0.0.1:$ADMIN/metrics" || true)
  [ -z "$flood_pid" ] || wait "$flood_pid"
  bench_stop_pid "$BENCH_PID"
  local n ok p50 p99 cpu_s wall refused_metric flood_json
  n=$(wc -l <"$WORK/$id-canary.txt")
  ok=$(awk '$1 == 200' "$WORK/$id-canary.txt" | wc -l)
  p50=$(awk '$1 == 200 {print $2}' "$WORK/$id-canary.txt" | quantile 0.50)
  p99=$(awk '$1 == 200 {print $2}' "$WORK/$id-canary.txt" | quantile 0.99)
  cpu_s=$(echo "(${c1[0]} + ${c1[1]} - ${c0[0]} - ${c0[1]}) / $TCK" | bc -l)
  wall=$(echo "$t1 - $t0" | bc -l)
  refused_metric=$(echo "$metrics" | awk '/^tlsgate_handshakes_refused_total\{/ {s += $NF} END {print s + 0}')
  flood_json=$(cat "$WORK/$id-flood.json" 2>/dev/null || true)
  [ -n "$flood_json" ] || flood_json='{"done":0,"refused":0,"other":0,"seconds":1}'
  jq -cn --arg name "$name" --arg server "$server" --argjson flood "$flood" --argjson n "$n" --argjson ok "$ok" \
    --argjson p50 "$p50" --argjson p99 "$p99" --argjson cpu "$cpu_s" --argjson wall "$wall" \
    --argjson refused_metric "$refused_metric" --argjson f "$flood_json" \
    '{name: $name, server: $server, flood: $flood, n: $n, ok: $ok, p50: $p50, p99: $p99, cpu: $cpu, wall: $wall,
      refused_metric: $refused_metric, f: $f}' >>"$RESULTS"
}

run tlsgate-alone "tlsgate, canary alone" tlsgate "$WORK/tlsgate-off.toml" "$TG_PORT" 0
run nginx-alone "nginx, canary alone" nginx "$WORK/nginx.conf" "$NGINX_PORT" 0
run tlsgate-off "tlsgate, no budget" tlsgate "$WORK/tlsgate-off.toml" "$TG_PORT" 1
for b in "${budgets[@]}"; do
  run "tlsgate-${b%%:*}" "tlsgate, budget ${b%%:*}/s burst ${b##*:} per source" tlsgate "$WORK/tlsgate-${b%%:*}.toml" "$TG_PORT" 1
done
run nginx-limits "nginx, limit_conn 16 + limit_req ${FIRST_RATE}r/s burst ${FIRST_BURST}" nginx "$WORK/nginx.conf" "$NGINX_PORT" 1

echo
echo "Handshake flood: $SOURCES sources × $CONNS loops of full TLS 1.3 ClientHellos ($KEY certificate), canary ≤ $CANARY_RATE req/s from 127.0.0.1, ${DURATION} s per run, server on core $SERVER_CPU, load on core $LOAD_CPU ($(nproc) cores)."
echo
echo "| run | canary ok | canary p50 | canary p99 | p99 vs alone | server CPU busy | CPU on the flood | flood signed/s | refused/s | closed or failed/s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
jq -rs '
  def ms: if . == null then "–" else "\(. * 1000 | round) ms" end;
  def per_s($x): if .flood == 1 then ($x / .f.seconds | round | tostring) else "–" end;
  (map(select(.flood == 0)) | map({key: .server, value: {per: (.cpu / ([.ok, 1] | max)), p99: .p99}}) | from_entries) as $alone
  | .[] | . as $r | $alone[$r.server] as $a
  | (if $r.flood == 1 then ([0, 1 - ($r.ok * $a.per) / ([$r.cpu, 0.000001] | max)] | max) else 0 end) as $share
  | "| \($r.name) | \($r.ok * 1000 / ([$r.n, 1] | max) | round / 10)% (\($r.ok)/\($r.n)) | \($r.p50 | ms) | \($r.p99 | ms) | \(if $r.flood == 0 then "1×" elif $r.p99 == null or $a.p99 == null then "–" else "\($r.p99 / $a.p99 * 10 | round / 10)×" end) | \($r.cpu / $r.wall * 100 | round)% | \(if $r.flood == 1 then "\($share * 100 | round)%" else "–" end) | \($r | per_s($r.f.done)) | \($r | per_s($r.f.refused)) | \($r | per_s($r.f.other)) |"
' "$RESULTS"
echo
echo "Raw figures: $RESULTS"
