#!/usr/bin/env bash
# Memory per idle TLS keep-alive connection (issue 18), measured with a client that is not
# tlsgate's own: tlsgate, nginx and HAProxy (one worker each, the same ECDSA P-256 certificate,
# TLS 1.3, ALPN h2 + http/1.1, a fixed-response route "/" and a route "/p/" proxied to one nginx
# origin) each get N connections from scripts/idle-memory/client.py (Python's `ssl`, i.e.
# OpenSSL; HTTP/2 written by hand), one request on each, the whole response read, then idle.
# Figure: the serving process's RSS growth (VmRSS from /proc; nginx: its worker, not the master)
# ÷ connections held. Each measurement starts the server afresh; after the reading, every held
# connection must answer a second request (the server kept them all), else the run is a FAIL.
#
#   scripts/idle-memory.sh                           # ~4 minutes with the defaults
#   N=5000 ROUNDS=5 scripts/idle-memory.sh
#   SERVERS="tlsgate tlsgate-alt" ALT_BIN=/tmp/tlsgate-before PROTOS=h1 ROUTES=fixed scripts/idle-memory.sh
#   REPORT_ONLY=1 WORK=/tmp/tlsgate-idle.XXXX scripts/idle-memory.sh   # the tables of a run again
#
# Environment:
#   N            connections held (2000)             ROUNDS     interleaved repetitions (3)
#   SERVERS      "tlsgate nginx haproxy" (and tlsgate-alt: the binary ALT_BIN, labelled ALT_LABEL)
#   PROTOS       "h1 h2"                             ROUTES     "fixed proxy"
#   SERVER_CPU   core for the server (0)             LOAD_CPU   core for client and origin (1)
#   SETTLE       seconds between the last answer and the reading (6: an idle HTTP/2 connection
#                of tlsgate gives its buffers back 1-2 s after its last request, HTTP/1.1 after
#                0.25 s, and the worker hands the freed memory to the OS within about 2 s more:
#                mimalloc's purge delay, then `memory_release_interval`; 3 read the state before)
#   BROWSER_FIELDS  1: HTTP/2 requests also carry a browser's 13 request fields as literals with
#                indexing, as browsers send them (they fill the server's HPACK decoder table);
#                0 (default): no field indexed
#   CONCURRENCY  handshakes the client runs at once (32); with N at once every server's RSS also
#                keeps what N simultaneous handshakes needed (its allocator's peak), which is
#                what `tlsgate bench --hold -c N` measured (docs/BENCHMARKS.md)
#   GATEWAY_BIN  the tlsgate binary measured (default target/release/tlsgate, built if missing)
#   TLSGATE_ENV  extra environment for tlsgate, e.g. "MIMALLOC_PURGE_DELAY=0" (both binaries)
#   TLSGATE_EXTRA  TOML appended to tlsgate's configuration, e.g. $'[http2]\nheader_table_size = 0'
#   WORK         working directory (a new /tmp/tlsgate-idle.*; kept: configs, logs, results)
#   PORT_OFFSET  added to every port (0: 19760-19764)
# Output: Markdown tables on stdout, progress on stderr; raw results in $WORK/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

N=${N:-2000}
ROUNDS=${ROUNDS:-3}
SERVERS=${SERVERS:-"tlsgate nginx haproxy"}
PROTOS=${PROTOS:-"h1 h2"}
ROUTES=${ROUTES:-"fixed proxy"}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
SETTLE=${SETTLE:-6}
BROWSER_FIELDS=${BROWSER_FIELDS:-0}
CONCURRENCY=${CONCURRENCY:-32}
TLSGATE_ENV=${TLSGATE_ENV:-}
TLSGATE_EXTRA=${TLSGATE_EXTRA:-}
ALT_BIN=${ALT_BIN:-}
ALT_LABEL=${ALT_LABEL:-tlsgate (ALT_BIN)}
PORT_OFFSET=${PORT_OFFSET:-0}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-idle.XXXXXX)}
BIN=$ROOT/target/release/tlsgate
PATH=$PATH:/usr/sbin:/sbin
BENCH_NAME=idle-memory
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
bench_load_params

ORIGIN_PORT=$((19760 + PORT_OFFSET))
ADMIN=$((19761 + PORT_OFFSET))
port_of() {
  case $1 in
    tlsgate | tlsgate-alt) echo $((19762 + PORT_OFFSET)) ;;
    nginx) echo $((19763 + PORT_OFFSET)) ;;
    haproxy) echo $((19764 + PORT_OFFSET)) ;;
  esac
}
path_of() { case $1 in fixed) echo / ;; proxy) echo /p/idle ;; esac; }
RESULTS=$WORK/results.jsonl
read -r -a servers <<<"$SERVERS"

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  bench_install_missing nginx:nginx-light haproxy:haproxy jq:jq openssl:openssl python3:python3 \
    taskset:util-linux
  mkdir -p "$WORK/nginx-tmp" "$WORK/origin-tmp"
  bench_build_tlsgate "$BIN"
  bench_copy_gateway "$BIN"
  if [[ " $SERVERS " == *" tlsgate-alt "* ]]; then
    [ -x "$ALT_BIN" ] || { log "SERVERS names tlsgate-alt: set ALT_BIN to a tlsgate binary"; exit 2; }
    cp "$ALT_BIN" "$WORK/tlsgate-alt"
  fi
  bench_raise_nofile
  if [ "$(ulimit -n)" -lt $((N + 100)) ]; then
    log "ulimit -n is $(ulimit -n): too low for N=$N"
    exit 2
  fi
  chmod 755 "$WORK"
  bench_mint_certificate idle-memory-ca
  for t in tlsgate.toml nginx.conf haproxy.cfg origin.conf; do
    s=${t%%.*}
    bench_render "scripts/idle-memory/$t.in" "$WORK/$t" WORK="$WORK" PORT="$(port_of "$s")" \
      ADMIN="$ADMIN" ORIGIN_PORT="$ORIGIN_PORT"
  done
  if [ -n "${TLSGATE_EXTRA:-}" ]; then printf '\n%s\n' "$TLSGATE_EXTRA" >>"$WORK/tlsgate.toml"; fi
  "$GW_BIN" check --config "$WORK/tlsgate.toml" --ca "$WORK/ca.pem" >"$WORK/tlsgate-check.txt" 2>&1 || {
    log "tlsgate check refused $WORK/tlsgate.toml:"
    cat "$WORK/tlsgate-check.txt" >&2
    exit 1
  }
  bench_save_params N ROUNDS SERVERS PROTOS ROUTES SETTLE CONCURRENCY BROWSER_FIELDS TLSGATE_ENV TLSGATE_EXTRA ALT_LABEL
fi

# ---- processes ------------------------------------------------------------------------------
ORIGIN_PID=""
SERVER_PID=""
CLIENT_PID=""
cleanup() {
  [ -z "$CLIENT_PID" ] || kill "$CLIENT_PID" 2>/dev/null || true
  bench_stop_pid "$SERVER_PID"
  bench_stop_pid "$ORIGIN_PID"
}
trap cleanup EXIT

start_server() { # server
  local s=$1 port
  port=$(port_of "$s")
  case $s in
    tlsgate | tlsgate-alt)
      local bin=$GW_BIN
      [ "$s" = tlsgate ] || bin=$WORK/tlsgate-alt
      # shellcheck disable=SC2086
      env RUST_LOG=warn $TLSGATE_ENV taskset -c "$SERVER_CPU" "$bin" serve --config "$WORK/tlsgate.toml" \
        >>"$WORK/$s.log" 2>&1 &
      ;;
    nginx)
      taskset -c "$SERVER_CPU" nginx -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log" \
        >>"$WORK/nginx.log" 2>&1 &
      ;;
    haproxy) taskset -c "$SERVER_CPU" haproxy -db -f "$WORK/haproxy.cfg" >>"$WORK/haproxy.log" 2>&1 & ;;
  esac
  SERVER_PID=$!
  bench_wait_port "$port" || {
    log "$s did not start:"
    tail -n 20 "$WORK/$s.log" >&2
    exit 1
  }
  # nginx forks its worker after binding.
  sleep 0.3
}
# The processes that serve connections: nginx's workers (not the master), else the process.
serving_pids() { # server pid
  if [ "$1" = nginx ]; then pgrep -P "$2"; else echo "$2"; fi
}
rss_kb() { # server pid
  local t=0 p
  for p in $(serving_pids "$1" "$2"); do
    t=$((t + $(awk '/^VmRSS/{print $2}' "/proc/$p/status")))
  done
  echo "$t"
}

# Starts the client with N connections against SERVER and waits until they have been answered;
# sets HELD (connections answered) and CLIENT_PID; its stdin stays open on fd 7.
client_run() { # server proto path n
  local port fifo_in out
  port=$(port_of "$1")
  fifo_in=$WORK/client.in
  out=$WORK/client.out
  rm -f "$fifo_in"
  mkfifo "$fifo_in"
  : >"$out"
  taskset -c "$LOAD_CPU" python3 scripts/idle-memory/client.py --port "$port" --ca "$WORK/ca.pem" \
    --proto "$2" --path "$3" -n "$4" --concurrency "$CONCURRENCY" \
    $([ "$BROWSER_FIELDS" = 1 ] && [ "$2" = h2 ] && echo --browser-fields) <"$fifo_in" >"$out" 2>>"$WORK/client.err" &
  CLIENT_PID=$!
  exec 7>"$fifo_in"
  local i
  HELD=""
  for i in $(seq 1 1200); do
    HELD=$(awk '/^ready/{print $2}' "$out")
    [ -n "$HELD" ] && break
    kill -0 "$CLIENT_PID" 2>/dev/null || break
    sleep 0.1
  done
  HELD=${HELD:-0}
}
# Tells the client to check (one more request on each connection) or close; sets CHECKED
# ("ok failed") after a check.
client_finish() { # check|close
  echo "$1" >&7 || true
  exec 7>&-
  wait "$CLIENT_PID" 2>/dev/null || true
  CLIENT_PID=""
  CHECKED=$(awk '/^checked/{print $2, $3}' "$WORK/client.out")
}

measure() { # round server proto route
  local round=$1 s=$2 proto=$3 route=$4 path before held after ok failed per check=ok
  path=$(path_of "$route")
  : >>"$WORK/$s.log"
  start_server "$s"
  # Warm-up (lazily built state, the origin pool): 20 connections, closed again.
  client_run "$s" "$proto" "$path" 20
  client_finish close
  sleep 0.5
  before=$(rss_kb "$s" "$SERVER_PID")
  client_run "$s" "$proto" "$path" "$N"
  held=$HELD
  sleep "$SETTLE"
  after=$(rss_kb "$s" "$SERVER_PID")
  # tlsgate's own count of the connections waiting with their buffers given back ("-": other
  # servers).
  released="-"
  if [[ $s == tlsgate* ]]; then
    released=$(curl -s "http://127.0.0.1:$ADMIN/metrics" |
      awk '/^tlsgate_idle_released_connections/ { n += $NF } END { print n + 0 }')
  fi
  client_finish check
  read -r ok failed <<<"$CHECKED"
  bench_stop_pid "$SERVER_PID"
  SERVER_PID=""
  if [ "$held" != "$N" ]; then
    check="FAIL: $held of $N connections answered (see $WORK/client.err)"
  elif [ "${ok:-0}" != "$N" ]; then
    check="FAIL: ${ok:-0} of $N idle connections answered a second request"
  fi
  per=$(awk -v a="$after" -v b="$before" -v n="$held" 'BEGIN { if (n > 0) printf "%.2f", (a - b) / n; else print 0 }')
  log "round $round, $s $proto $route: RSS $before kB -> $after kB with $held idle connections = $per KiB each, $released released ($check)"
  jq -cn --argjson r "$round" --arg s "$s" --arg p "$proto" --arg route "$route" --argjson n "$held" \
    --argjson before "$before" --argjson after "$after" --argjson per "$per" --arg check "$check" \
    --arg released "$released" \
    '{round: $r, server: $s, proto: $p, route: $route, n: $n, before_kb: $before, after_kb: $after, per_kib: $per, released: $released, check: $check}' \
    >>"$RESULTS"
}

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  bench_ports_free "$ORIGIN_PORT" "$ADMIN" $(for s in "${servers[@]}"; do port_of "$s"; done | sort -u) || exit 1
  : >"$RESULTS"
  if [[ " $ROUTES " == *" proxy "* ]]; then
    taskset -c "$LOAD_CPU" nginx -p "$WORK" -c "$WORK/origin.conf" -e "$WORK/origin-error.log" \
      >"$WORK/origin.log" 2>&1 &
    ORIGIN_PID=$!
    bench_wait_port "$ORIGIN_PORT" || { log "the origin did not start"; exit 1; }
  fi
  log "work directory $WORK; servers on CPU $SERVER_CPU, client and origin on CPU $LOAD_CPU; N=$N, $ROUNDS rounds"
  n=${#servers[@]}
  for round in $(seq 1 "$ROUNDS"); do
    for proto in $PROTOS; do
      for route in $ROUTES; do
        # The order of the servers rotates per round: a burst of outside load hits one run.
        for i in $(seq 0 $((n - 1))); do
          measure "$round" "${servers[$(((i + round - 1) % n))]}" "$proto" "$route"
        done
      done
    done
  done
  bench_stop_pid "$ORIGIN_PID"
  ORIGIN_PID=""
fi

# ---- tables ---------------------------------------------------------------------------------
echo
echo "### Memory per idle TLS keep-alive connection (independent client)"
echo
echo "$N connections from Python's \`ssl\` (OpenSSL $(python3 -c 'import ssl; print(ssl.OPENSSL_VERSION.split()[1])'); TLS 1.3, X25519, ECDSA P-256), $CONCURRENCY handshakes at a time, one request each$([ "$BROWSER_FIELDS" = 1 ] && echo " (HTTP/2: with a browser's 13 request fields, indexed)"), the whole response read, then idle $SETTLE s; each server freshly started per measurement, one worker on one core; RSS growth of the serving process (VmRSS; nginx: the worker) ÷ connections. Median of $ROUNDS interleaved rounds (min–max). Every held connection answered a second request afterwards unless the check column says otherwise. Released: tlsgate's \`tlsgate_idle_released_connections\` at the reading (the values seen across rounds)."
echo
bench_table_head l:server l:protocol l:route "r:per connection (KiB)" r:min–max "r:RSS before (MiB)" \
  "r:RSS held (MiB)" "r:released (tlsgate)" l:check
jq -rs --arg alt "$ALT_LABEL" "$BENCH_JQ_MEDIAN"'
  def order: {"tlsgate": 0, "tlsgate-alt": 1, "nginx": 2, "haproxy": 3}[.] // 4;
  def name: {"tlsgate": "tlsgate", "tlsgate-alt": $alt, "nginx": "nginx", "haproxy": "HAProxy"}[.] // .;
  group_by([.proto, .route, (.server | order)])[]
  | { s: .[0].server, p: .[0].proto, r: .[0].route,
      per: (map(.per_kib) | median), lo: (map(.per_kib) | min), hi: (map(.per_kib) | max),
      b: (map(.before_kb) | median), a: (map(.after_kb) | median),
      rel: (map(.released // "-") | unique | join(", ")),
      check: (map(.check) | if all(. == "ok") then "ok (\(length)/\(length))" else (map(select(. != "ok")) | .[0]) end) }
  | "| \(.s | name) | \(if .p == "h2" then "HTTP/2" else "HTTP/1.1" end) | \(.r) | **\(.per * 10 | round / 10)** | \(.lo * 10 | round / 10)–\(.hi * 10 | round / 10) | \(.b / 1024 * 10 | round / 10) | \(.a / 1024 * 10 | round / 10) | \(.rel) | \(.check) |"
' "$RESULTS"
echo
log "raw results in $RESULTS"
nfail=$(jq -s 'map(select(.check != "ok")) | length' "$RESULTS")
[ "$nfail" = 0 ] || { log "$nfail measurement(s) FAILED"; exit 1; }
