#!/usr/bin/env bash
# Cluster-wide resumption, measured (issue 5; results in docs/BENCHMARKS.md):
#   1. resumed TLS 1.2 handshakes per server CPU-second with the session found in Redis (or
#      Memcached) vs in the local cache: one node pinned to CPU 0, `tlsgate bench` on CPU 1;
#   2. the handshake latency the remote lookup adds: bench handshake-phase p50/p99 with one
#      connection at a time (moderate load), store vs local;
#   3. cross-node resumption with three nodes behind a round-robin TCP balancer (HAProxy,
#      mode tcp): the fraction of returning sessions that resumed, session ID and tickets.
#
#   scripts/cluster-bench.sh                 # ~2 minutes with the defaults
#   DURATION=10 ROUNDS=5 scripts/cluster-bench.sh
#
# Environment: DURATION (5 s per cell), ROUNDS (3, medians shown), SERVER_CPU (0), LOAD_CPU (1),
# WORK (a new /tmp/tlsgate-cluster.*; configs, logs and JSON are kept there).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-cluster.XXXXXX)}
BENCH_NAME=cluster-bench
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
need=()
for p in redis-server:redis-server memcached:memcached haproxy:haproxy jq:jq taskset:util-linux; do
  command -v "${p%%:*}" >/dev/null 2>&1 || need+=("${p#*:}")
done
((${#need[@]})) && tlsgate_install_packages "${need[@]}"
PATH=$PATH:/usr/sbin:/sbin
[ -x target/release/tlsgate ] || cargo build --release -p tlsgate >&2
cp target/release/tlsgate "$WORK/tlsgate"
BIN=$WORK/tlsgate
TCK=$(getconf CLK_TCK)

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -keyout "$WORK/leaf.key" -out "$WORK/leaf.pem" 2>/dev/null
openssl rand -hex 32 >"$WORK/cluster.key"

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  pkill -f "$WORK/tlsgate serve" 2>/dev/null || true # nodes started inside $(start_node …)
  wait 2>/dev/null || true
}
trap cleanup EXIT

REDIS_PORT=29379 MC_PORT=29211
redis-server --port $REDIS_PORT --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
memcached -l 127.0.0.1 -p $MC_PORT -U 0 -m 64 -u root >"$WORK/memcached.log" 2>&1 &
PIDS+=($!)
taskset -cp "$LOAD_CPU" "${PIDS[0]}" >/dev/null
taskset -cp "$LOAD_CPU" "${PIDS[1]}" >/dev/null

# node NAME PORT ADMIN STORE CACHE_SIZE -> writes $WORK/NAME.toml
node_config() {
  local store_lines=""
  case $4 in
    redis) store_lines="store = \"redis\"
servers = [\"redis://127.0.0.1:$REDIS_PORT\"]" ;;
    memcached) store_lines="store = \"memcached\"
servers = [\"127.0.0.1:$MC_PORT\"]" ;;
    local) store_lines="store = \"local\"" ;;
  esac
  cat >"$WORK/$1.toml" <<TOML
[server]
workers = 1
[log]
level = "warn"
access_log = false
[admin]
listen = "127.0.0.1:$3"
[tls.session_cache]
size = $5
[cluster]
secret_files = ["$WORK/cluster.key"]
$store_lines
[[listener]]
listen = "127.0.0.1:$2"
[[site]]
name = "bench"
server_names = ["localhost", "127.0.0.1"]
default = true
[[site.certificate]]
chain = "$WORK/leaf.pem"
key = "$WORK/leaf.key"
[[site.route]]
path_prefix = "/"
fixed_response = { body = "Hello, world!" }
TOML
}

start_node() { # NAME PORT ADMIN STORE CACHE CPU
  node_config "$1" "$2" "$3" "$4" "$5"
  taskset -c "$6" "$BIN" serve --config "$WORK/$1.toml" >"$WORK/$1.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 100); do
    curl -s "http://127.0.0.1:$3/metrics" 2>/dev/null | grep -q 'name="session_store_breaker_open"} 0' && break
    [ "$4" = local ] && curl -s "http://127.0.0.1:$3/healthz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "$pid"
}
gauge() { curl -s "http://127.0.0.1:$1/metrics" | awk -v n="name=\"$2\"" 'index($0, n) {print $2}'; }

bench() { # PORT JSON ARGS...
  local port=$1 json=$2
  shift 2
  taskset -c "$LOAD_CPU" "$BIN" bench --json "$json" "$@" "https://127.0.0.1:$port/" >/dev/null 2>"$json.err" || true
}

RESULTS=$WORK/results.jsonl
: >"$RESULTS"
# ---- 1 and 2: one node, local cache vs remote store ------------------------------------------
# Four bench threads each resume their own session. "local": the default cache holds them all.
# "redis"/"memcached": a one-entry local cache, so nearly every lookup goes to the store.
for round in $(seq "$ROUNDS"); do
  for mode in local redis memcached; do
    size=20000
    [ "$mode" = local ] || size=1
    pid=$(start_node "n-$mode" 29443 29444 "$mode" $size "$SERVER_CPU")
    bench 29443 "$WORK/warm.json" --handshake-only --no-ticket --tls 1.2 -t 4 -c 4 -d 1s
    h0=$(gauge 29444 session_store_lookup_hit_total); h0=${h0:-0}
    c0=$(bench_cpu_total "$pid")
    bench 29443 "$WORK/tput-$mode-$round.json" --handshake-only --no-ticket --tls 1.2 -t 4 -c 8 -d "${DURATION}s"
    c1=$(bench_cpu_total "$pid")
    h1=$(gauge 29444 session_store_lookup_hit_total); h1=${h1:-0}
    bench 29443 "$WORK/lat-$mode-$round.json" --handshake-only --no-ticket --tls 1.2 -t 2 -c 2 -d "${DURATION}s"
    bench_stop_pid "$pid"
    jq -c --arg mode "$mode" --argjson round "$round" --argjson cpu "$(awk -v a="$c0" -v b="$c1" -v t="$TCK" 'BEGIN{print (b-a)/t}')" \
      --argjson remote "$((${h1%.*} - ${h0%.*}))" --slurpfile lat "$WORK/lat-$mode-$round.json" \
      '{kind: "tput", mode: $mode, round: $round, handshakes, resumed, errors_total, cpu: $cpu,
        per: (if $cpu > 0 then .handshakes / $cpu else 0 end), remote_hits: $remote,
        lat_p50: $lat[0].latency_us.handshake.p50, lat_p99: $lat[0].latency_us.handshake.p99,
        lat_resumed: $lat[0].resumed_fraction}' \
      "$WORK/tput-$mode-$round.json" >>"$RESULTS"
    log "round $round $mode: $(tail -1 "$RESULTS")"
  done
done

# ---- 3: three nodes behind round-robin --------------------------------------------------------
cross_pids=()
for i in 1 2 3; do
  cross_pids+=("$(start_node "x$i" $((29500 + i)) $((29510 + i)) redis 20000 "$SERVER_CPU")")
done
cat >"$WORK/haproxy.cfg" <<CFG
global
  maxconn 4000
defaults
  mode tcp
  timeout connect 2s
  timeout client 30s
  timeout server 30s
listen rr
  bind 127.0.0.1:29500
  balance roundrobin
  server x1 127.0.0.1:29501
  server x2 127.0.0.1:29502
  server x3 127.0.0.1:29503
CFG
taskset -c "$LOAD_CPU" haproxy -f "$WORK/haproxy.cfg" >"$WORK/haproxy.log" 2>&1 &
PIDS+=($!)
sleep 0.5
for variant in "sid12|--new-conn --tls 1.2 --no-ticket" "tkt12|--new-conn --tls 1.2 --no-session-id" "tkt13|--new-conn --tls 1.3"; do
  id=${variant%%|*}
  # shellcheck disable=SC2086
  bench 29500 "$WORK/cross-$id.json" ${variant#*|} -t 8 -c 8 -d "${DURATION}s"
  jq -c --arg id "$id" '{kind: "cross", id: $id, handshakes, offered: .resumption_offered, resumed, errors_total,
     returning: (if .resumption_offered > 0 then .resumed / .resumption_offered else 0 end)}' \
    "$WORK/cross-$id.json" >>"$RESULTS"
  log "cross $id: $(tail -1 "$RESULTS")"
done

# ---- report --------------------------------------------------------------------------------
echo "Resumed TLS 1.2 handshakes (session ID), one node on CPU $SERVER_CPU, bench on CPU $LOAD_CPU, medians of $ROUNDS rounds of ${DURATION}s:"
echo
echo "| session found in | handshakes/s | per server CPU-s | vs local | lookups answered by the store | handshake p50 / p99 (2 connections) |"
echo "|---|---|---|---|---|---|"
jq -rs 'def median: sort | if length == 0 then 0 else .[length / 2 | floor] end;
  [ .[] | select(.kind == "tput") ] | group_by(.mode) | map({mode: .[0].mode,
    rate: ((map(.handshakes) | median) / '"$DURATION"'), per: (map(.per) | median),
    remote: (map(.remote_hits / (.handshakes + 0.001)) | median),
    p50: (map(.lat_p50) | median), p99: (map(.lat_p99) | median)}) as $rows
  | ($rows[] | select(.mode == "local") | .per) as $base
  | $rows | sort_by(.mode != "local") | .[]
  | "| \(.mode) | \(.rate | round) | \(.per | round) | \(.per / $base * 100 | round)% | \(.remote * 100 | round)% | \(.p50) / \(.p99) µs |"' "$RESULTS"
echo
echo "Cross-node resumption, three nodes (one worker each) behind HAProxy round-robin (mode tcp):"
echo
echo "| mechanism | handshakes | sessions offered | resumed | returning sessions resumed | errors |"
echo "|---|---|---|---|---|---|"
jq -r 'select(.kind == "cross") | "| \(.id) | \(.handshakes) | \(.offered) | \(.resumed) | \(.returning * 10000 | round / 100)% | \(.errors_total) |"' "$RESULTS"
echo
echo "(raw results: $RESULTS)"
