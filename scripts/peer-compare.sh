#!/usr/bin/env bash
# Compares tlsgate with nginx and HAProxy, one core each, with `tlsgate bench` as the load on
# another core: full and resumed handshakes, keep-alive requests and one request per connection
# (the seed 002 table), server CPU seconds from /proc, rate per server CPU-second, ratio to nginx,
# tlsgate's /metrics checked against each scenario, and memory per idle TLS connection.
#
#   scripts/peer-compare.sh                 # ~6 minutes with the defaults
#   DURATION=10 ROUNDS=5 HOLD_CONNS=5000 scripts/peer-compare.sh
#
# Environment:
#   DURATION     seconds per cell (3)            CONNS       bench connections (10)
#   ROUNDS       interleaved repetitions (3); the tables show medians
#   HOLD_CONNS   idle connections held (2000)    HOLD_SECS   how long they are held (6)
#   SERVERS      "tlsgate nginx haproxy"         SCENARIOS   space-separated ids (all; see below)
#   SERVER_CPU   core for the server (0)         LOAD_CPU    core for the bench (1)
#   WORK         working directory (a new /tmp/tlsgate-peer.*; kept: configs, logs, JSON)
#   BUILD=1      rebuild tlsgate even if target/release/tlsgate exists
#   GATEWAY_BIN  the tlsgate binary to measure as a server (default: the one built here; the
#                load is always this tree's `tlsgate bench`): compares two builds, e.g. before
#                and after a refactor, each against the same nginx
# Output: Markdown tables on stdout, progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-3}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-10}
HOLD_CONNS=${HOLD_CONNS:-2000}
HOLD_SECS=${HOLD_SECS:-6}
SERVERS=${SERVERS:-"tlsgate nginx haproxy"}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-peer.XXXXXX)}
BIN=$ROOT/target/release/tlsgate
mkdir -p "$WORK/nginx-tmp"
BENCH_NAME=peer-compare
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh

# id | label | bench arguments | counted unit (h: handshakes, r: requests) | expected resumption
ALL_SCENARIOS=(
  "full13|Full handshake, TLS 1.3|--handshake-only --no-ticket --no-session-id --tls 1.3|h|full"
  "full12|Full handshake, TLS 1.2|--handshake-only --no-ticket --no-session-id --tls 1.2|h|full"
  "sid12|Resumed TLS 1.2, session ID|--handshake-only --no-ticket --tls 1.2|h|resumed"
  "tkt12|Resumed TLS 1.2, ticket|--handshake-only --no-session-id --tls 1.2|h|resumed"
  "tkt13|Resumed TLS 1.3, ticket (PSK-DHE)|--handshake-only --tls 1.3|h|resumed"
  "ka|Keep-alive, resumption on|--tls 1.3|r|any"
  "ka_off|Keep-alive, resumption off|--tls 1.3 --no-session-id --no-ticket|r|any"
  "close|New connection per request, resumption on|--tls 1.3 --new-conn|r|resumed"
  "close_off|New connection per request, resumption off|--tls 1.3 --new-conn --no-session-id --no-ticket|r|full"
)
SCENARIOS=${SCENARIOS:-all}

# REPORT_ONLY=1 WORK=DIR: print the tables of an earlier run again (no measurements).
bench_load_params

port_of() {
  case $1 in tlsgate) echo 19443 ;; nginx) echo 19543 ;; haproxy) echo 19643 ;; esac
}
ADMIN=19444
render() { # template out server
  bench_render "$1" "$2" WORK="$WORK" PORT="$(port_of "$3")" ADMIN="$ADMIN"
}

if [ "${REPORT_ONLY:-0}" != 1 ]; then
# ---- prerequisites --------------------------------------------------------------------------
bench_install_missing nginx:nginx-light haproxy:haproxy jq:jq openssl:openssl curl:curl taskset:util-linux
PATH=$PATH:/usr/sbin:/sbin
# The load is always this tree's `tlsgate bench`: it is needed even with GATEWAY_BIN.
GATEWAY_BIN="" bench_build_tlsgate "$BIN"
# Private copies, so a rebuild during the run cannot swap the binaries under the measurements.
cp "$BIN" "$WORK/tlsgate"
BIN=$WORK/tlsgate
bench_copy_gateway "$BIN"
bench_raise_nofile
if [ "$(ulimit -n)" -lt $((HOLD_CONNS + 200)) ]; then
  log "warning: ulimit -n is $(ulimit -n); HOLD_CONNS=$HOLD_CONNS may fail"
fi

# ---- one ECDSA P-256 certificate for everybody ---------------------------------------------
bench_mint_certificate peer-compare-ca

render scripts/peer/tlsgate.toml.in "$WORK/tlsgate.toml" tlsgate
render scripts/peer/nginx.conf.in "$WORK/nginx.conf" nginx
render scripts/peer/haproxy.cfg.in "$WORK/haproxy.cfg" haproxy
fi

# ---- process accounting ---------------------------------------------------------------------
declare -A PIDS=()
# utime+stime of the process and its children (all threads included), in clock ticks.
cpu_ticks() {
  local u k
  read -r u k <<<"$(bench_cpu_ticks "$1")"
  echo $((u + k))
}

start_server() {
  local s=$1
  : >"$WORK/$s.log"
  bench_start_server "$s" "$SERVER_CPU" "$(bench_conf "$s")" "$(port_of "$s")" 0.5
  PIDS[$s]=$BENCH_PID
}

stop_servers() {
  local s
  for s in "${!PIDS[@]}"; do
    bench_stop_pid "${PIDS[$s]}"
    unset "PIDS[$s]"
  done
}
trap stop_servers EXIT

# tlsgate's handshake counters: "full resumed failures".
tlsgate_counts() { bench_tlsgate_handshakes "$ADMIN"; }

bench() { # url json extra-args...
  local url=$1 json=$2
  shift 2
  taskset -c "$LOAD_CPU" "$BIN" bench --sni localhost --groups X25519:P-256 --json "$json" "$@" "$url"
}

RESULTS=$WORK/results.jsonl
MEMORY=$WORK/memory.tsv
if [ "${REPORT_ONLY:-0}" != 1 ]; then
  : >"$RESULTS"
  : >"$MEMORY"
fi

memory_test() { # server
  local s=$1 url pid before held per n
  url="https://127.0.0.1:$(port_of "$s")/"
  pid=${PIDS[$s]}
  # One warm-up request, then the baseline.
  bench "$url" "$WORK/$s-warm.json" -n 1 -c 1 >/dev/null
  sleep 0.3
  before=$(bench_rss_kb "$pid")
  bench "$url" "$WORK/$s-hold.json" --hold "${HOLD_SECS}s" -c "$HOLD_CONNS" --tls 1.3 \
    >"$WORK/$s-hold.txt" 2>"$WORK/$s-hold.err" &
  local bpid=$!
  for _ in $(seq 1 600); do
    grep -q "^bench: holding" "$WORK/$s-hold.err" 2>/dev/null && break
    kill -0 "$bpid" 2>/dev/null || break
    sleep 0.1
  done
  sleep 1
  held=$(bench_rss_kb "$pid")
  wait "$bpid" || true
  n=$(jq -r .held "$WORK/$s-hold.json" 2>/dev/null || echo 0)
  if [ "${n:-0}" -gt 0 ]; then
    per=$(awk -v a="$held" -v b="$before" -v n="$n" 'BEGIN { printf "%.1f", (a - b) / n }')
  else
    per=NaN
  fi
  log "$s: RSS $before kB -> $held kB with $n idle TLS connections = $per kB each"
  printf '%s\t%s\t%s\t%s\t%s\n' "$s" "$n" "$before" "$held" "$per" >>"$MEMORY"
}

run_cell() { # round server scenario-line
  local round=$1 s=$2 line=$3 id label args unit expect
  IFS='|' read -r id label args unit expect <<<"$line"
  local url pid json txt
  url="https://127.0.0.1:$(port_of "$s")/"
  pid=${PIDS[$s]}
  json=$WORK/$s-$id-$round.json
  txt=$WORK/$s-$id-$round.txt
  local m0="" m1="" c0 c1
  [ "$s" = tlsgate ] && m0=$(tlsgate_counts)
  c0=$(cpu_ticks "$pid")
  # shellcheck disable=SC2086
  bench "$url" "$json" -d "$DURATION" -c "$CONNS" -t 1 $args >"$txt" 2>&1 || true
  c1=$(cpu_ticks "$pid")
  if [ ! -s "$json" ]; then
    log "$s $id: bench produced no summary:"
    cat "$txt" >&2
    jq -cn --arg id "$id" --arg s "$s" --argjson r "$round" \
      '{id: $id, server: $s, round: $r, count: 0, rate: 0, cpu: 0, per: 0, resumed: 0, errors: -1, neg: "-", check: "no result"}' >>"$RESULTS"
    return
  fi
  local count rate full resumed errors frac cpu per check neg
  if [ "$unit" = h ]; then
    count=$(jq .handshakes "$json") rate=$(jq .handshakes_per_s "$json")
  else
    count=$(jq .requests "$json") rate=$(jq .requests_per_s "$json")
  fi
  full=$(jq .full "$json") resumed=$(jq .resumed "$json") errors=$(jq .errors_total "$json")
  frac=$(jq .resumed_fraction "$json")
  neg=$(jq -r '.negotiated | to_entries | max_by(.value) | .key // "-"' "$json" 2>/dev/null | awk '{print $1, $3}')
  cpu=$(awk -v a="$c0" -v b="$c1" -v t="$TCK" 'BEGIN { printf "%.2f", (b - a) / t }')
  per=$(awk -v n="$count" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.0f", n / c; else print 0 }')
  # The scenario's own expectation, from what the client's TLS stack reported.
  check=ok
  case $expect in
    full) [ "$resumed" = 0 ] || check="expected no resumption, got $resumed" ;;
    resumed) awk -v f="$frac" 'BEGIN { exit !(f >= 0.9) }' || check="expected resumption, got $frac" ;;
  esac
  if [ "$s" = tlsgate ]; then
    # tlsgate's own counters must agree with what the client saw.
    sleep 0.3
    m1=$(tlsgate_counts)
    local f0 r0 f1 r1 sf sr
    read -r f0 r0 _ <<<"$m0"
    read -r f1 r1 _ <<<"$m1"
    sf=$((f1 - f0)) sr=$((r1 - r0))
    if [ "$sf" != "$full" ] || [ "$sr" != "$resumed" ]; then
      check="/metrics MISMATCH: server full $sf resumed $sr, bench full $full resumed $resumed"
    elif [ "$check" = ok ]; then
      check="ok: /metrics full $sf, resumed $sr"
    fi
  fi
  log "round $round, $s $id: $(printf %.0f "$rate")/s, server CPU ${cpu}s, $per per CPU-s, resumed $frac, errors $errors, $neg ($check)"
  jq -cn --arg id "$id" --arg s "$s" --argjson r "$round" --argjson count "$count" --argjson rate "$rate" \
    --argjson cpu "$cpu" --argjson per "$per" --argjson resumed "$frac" --argjson errors "$errors" \
    --arg neg "$neg" --arg check "$check" \
    '{id: $id, server: $s, round: $r, count: $count, rate: $rate, cpu: $cpu, per: $per, resumed: $resumed, errors: $errors, neg: $neg, check: $check}' \
    >>"$RESULTS"
}

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  bench_save_params DURATION ROUNDS CONNS HOLD_CONNS HOLD_SECS SERVERS SCENARIOS SERVER_CPU LOAD_CPU
fi

bench_select ALL_SCENARIOS "$SCENARIOS"
read -r -a servers <<<"$SERVERS"

if [ "${REPORT_ONLY:-0}" != 1 ]; then
log "work directory $WORK; servers on CPU $SERVER_CPU, bench on CPU $LOAD_CPU; $ROUNDS rounds of ${DURATION}s per cell"
# All servers run side by side (idle ones cost nothing); each is measured fresh for memory first.
for s in "${servers[@]}"; do
  log "starting $s"
  start_server "$s"
  memory_test "$s"
done
# Rounds interleave the servers, so a burst of outside load hits one round, not one server.
bench_rounds "$ROUNDS" run_cell
stop_servers
fi

# ---- tables ---------------------------------------------------------------------------------
echo
echo "### Throughput per server CPU-second"
echo
echo "Each server pinned to CPU $SERVER_CPU (1 worker/thread); \`tlsgate bench -t 1 -c $CONNS -d $DURATION --groups X25519:P-256 --sni localhost\` pinned to CPU $LOAD_CPU; $ROUNDS interleaved rounds, medians shown (per server CPU-s: median and min–max over the rounds)."
echo
bench_table_head l:scenario l:server "r:rate /s" "r:server CPU s" "r:per server CPU-s" r:min–max "r:vs nginx" \
  r:resumed r:errors l:negotiated l:check
for line in "${selected[@]}"; do
  IFS='|' read -r id label _ _ _ <<<"$line"
  jq -rs --arg id "$id" --arg title "$label" "$BENCH_JQ_MEDIAN"'
    def order: {"tlsgate": 0, "nginx": 1, "haproxy": 2}[.] // 3;
    [ .[] | select(.id == $id) ] | group_by(.server) | sort_by(.[0].server | order) | map({
      server: .[0].server,
      rate: (map(.rate) | median), cpu: (map(.cpu) | median), per: (map(.per) | median),
      lo: (map(.per) | min), hi: (map(.per) | max), resumed: (map(.resumed) | median),
      errors: (map(.errors) | add), neg: .[0].neg,
      check: (map(.check) | if all(startswith("ok")) then
                (if .[0] | startswith("ok:") then "ok in \(length)/\(length) rounds (\(.[0] | ltrimstr("ok: ")), …)" else "ok" end)
              else (map(select(startswith("ok") | not)) | .[0]) end)
    }) as $rows
    | ($rows | map(select(.server == "nginx")) | .[0].per // 0) as $base
    | $rows[]
    | "| \($title) | \(.server) | \(.rate | round) | \(.cpu * 100 | round / 100) | \(.per | round) | \(.lo | round)–\(.hi | round) | \(if $base > 0 then "\(.per / $base * 100 | round / 100)×" else "—" end) | \(.resumed * 1000 | round / 10)% | \(.errors) | \(.neg) | \(.check) |"
  ' "$RESULTS"
done
echo
echo "### Memory per idle TLS keep-alive connection"
echo
echo "$HOLD_CONNS connections (TLS 1.3, X25519, one request each, then idle), each server freshly started; server RSS from /proc/PID/status (all processes)."
echo
bench_table_head l:server "r:connections held" "r:RSS before (MiB)" "r:RSS held (MiB)" "r:per connection (KiB)" \
  "r:vs nginx"
awk -F'\t' '
  { rows[++n] = $0; if ($1 == "nginx") base = $5 }
  END {
    for (i = 1; i <= n; i++) {
      split(rows[i], f, "\t")
      ratio = (base > 0) ? sprintf("%.2f×", f[5] / base) : "—"
      printf "| %s | %d | %.1f | %.1f | %s | %s |\n", f[1], f[2], f[3] / 1024, f[4] / 1024, f[5], ratio
    }
  }' "$MEMORY"
echo
log "raw results in $WORK (results.jsonl, memory.tsv, <server>-<scenario>-<round>.json/.txt)"
