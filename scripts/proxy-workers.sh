#!/usr/bin/env bash
# What several workers cost per proxied request on a machine too small to give each its own
# core: tlsgate with WORKERS workers all pinned to one core (CPU), HTTP/1.1 keep-alive through
# it to the nginx origin of a scripts/proxy-compare.sh work directory (wrk -t1 -c32 on
# LOAD_CPU, 13 B). Prints the gateway's CPU microseconds per request (from /proc over MEASURE
# seconds, ÷ its `tlsgate_requests_total`) and its system calls per request (`strace -c -f`
# over 2 s more): a wake-up of one worker by another shows as `write` (tokio's eventfd) and
# extra `epoll_wait`. Run it for 1 and 2 workers, and for two builds, in turns.
#
#   WORK=/tmp/pc1 scripts/proxy-workers.sh target/release/tlsgate 2
#   for b in /tmp/tlsgate-before /tmp/tlsgate-after; do for w in 1 2; do
#     WORK=/tmp/pc1 scripts/proxy-workers.sh $b $w; done; done
#
# Environment: WORK (a proxy-compare.sh work directory: its origin.conf and tlsgate.toml; run
# proxy-compare.sh once to make one), CPU (0), LOAD_CPU (1), MEASURE (3 s). Needs wrk, strace,
# nginx, curl.
set -euo pipefail
BIN=${1:?usage: $0 TLSGATE_BINARY WORKERS}
NW=${2:?usage: $0 TLSGATE_BINARY WORKERS}
W=${WORK:?WORK: a scripts/proxy-compare.sh work directory}
CPU=${CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
MEASURE=${MEASURE:-3}
[ -f "$W/origin.conf" ] && [ -f "$W/tlsgate.toml" ] || { echo "proxy-workers: $W has no origin.conf/tlsgate.toml" >&2; exit 2; }
CONF=$W/workers-$NW.toml
sed "s/^workers = .*/workers = $NW/" "$W/tlsgate.toml" > "$CONF"
https=$(awk -F'"' '/^\[\[listener\]\]/{l=1} l && /^listen/{print $2; exit}' "$CONF")
admin=$(awk -F'"' '/^\[admin\]/{a=1} a && /^listen/{print $2; exit}' "$CONF")
cleanup() {
  [ -n "${GP:-}" ] && kill "$GP" 2>/dev/null || true
  pkill -f "nginx -p $W -c $W/origin.conf" 2>/dev/null || true
}
trap cleanup EXIT
pkill -f "nginx -p $W -c $W/origin.conf" 2>/dev/null || true
sleep 0.3
# The origin's configuration says `daemon off`: it runs in the background here.
taskset -c "$LOAD_CPU" nginx -p "$W" -c "$W/origin.conf" -e "$W/origin-error.log" > /dev/null 2>&1 &
taskset -c "$CPU" "$BIN" serve --config "$CONF" > "$W/workers-$NW.log" 2>&1 &
GP=$!
for _ in $(seq 1 50); do
  sleep 0.2
  curl -sk "https://$https/13b" -o /dev/null && break
done
requests() { curl -s "http://$admin/metrics" | awk '/^tlsgate_requests_total/ {s += $NF} END {print s + 0}'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$GP/stat"; }
taskset -c "$LOAD_CPU" wrk -t1 -c32 -d$((MEASURE + 6))s "https://$https/13b" > "$W/workers-$NW-wrk.txt" 2>&1 &
WP=$!
sleep 2
r0=$(requests); c0=$(cpu_ticks)
sleep "$MEASURE"
r1=$(requests); c1=$(cpu_ticks)
timeout 2 strace -c -f -p "$GP" -o "$W/workers-$NW-strace.txt" 2>/dev/null || true
r2=$(requests)
wait "$WP"
hz=$(getconf CLK_TCK)
n=$((r1 - r0))
[ "$n" -gt 0 ] || { echo "proxy-workers: no requests counted" >&2; exit 1; }
echo "$(basename "$BIN") workers=$NW requests=$n gateway_cpu_us_per_request=$(echo "scale=2; ($c1 - $c0) * 1000000 / $hz / $n" | bc)"
awk -v n=$((r2 - r1)) 'NR > 2 && $4 ~ /^[0-9]+$/ && $NF != "total" {printf "  %-14s %6.3f per request\n", $NF, $4 / n}' "$W/workers-$NW-strace.txt" | sort -k2 -rn | head -6
