#!/usr/bin/env bash
# Compares tlsgate's proxy path with nginx's and HAProxy's (issues #17, #25): each proxy with one
# worker on one core terminates TLS 1.3 (ECDSA P-256, ALPN h2 + http/1.1) and forwards to the same
# plain-HTTP/1.1 nginx origin (or, in two cells, to the same nginx's HTTP/2 TLS server or a Go
# gRPC server); the load comes from independent generators (wrk, h2load) on the other core, next
# to the origin. Proxy CPU seconds from /proc, requests (or MiB) per proxy CPU-second, median of
# interleaved rounds, and the ratio tlsgate ÷ best peer.
#
#   scripts/proxy-compare.sh                       # ~8 minutes with the defaults
#   DURATION=10 ROUNDS=5 scripts/proxy-compare.sh
#   CELLS="h1_13 h2_13" SERVERS="tlsgate nginx" GATEWAY_BIN=/tmp/tlsgate-before scripts/proxy-compare.sh
#   REPORT_ONLY=1 WORK=/tmp/tlsgate-proxy.XXXX scripts/proxy-compare.sh   # tables of a run again
#
# Cells (CELLS, space-separated ids; default all):
#   h1_13 h1_1k     HTTP/1.1 keep-alive, 13 B / 1 KiB      wrk -t1 -c32
#   h1_100k h1_1m   HTTP/1.1 keep-alive, 100 KiB / 1 MiB   wrk -t1 -c8 (figure: MiB per CPU-s)
#   h2_13 h2_1k     HTTP/2, 16 connections x 10 streams    h2load -t1 -c16 -m10 -D
#   h2_100k h2_1m   HTTP/2, 100 KiB (8 x 4 streams) / 1 MiB (8 x 2)   h2load -t1 -c8 -m4 / -m2
#                   (figure: MiB per CPU-s)
#   close           a new TLS connection per request, 13 B wrk -t1 -c16 -H 'Connection: close'
#   lat             one connection, back to back, 13 B     wrk -t1 -c1 --latency (p50, p99)
#   rate            a fixed rate below saturation (RATE req/s, default 10000) over 16 keep-alive
#                   connections, 13 B: scripts/proxy/ratelat (Go, open loop as wrk2: latency from
#                   the time each request was due; p50, p99); a run where more than 10 % of the
#                   requests went out over 1 ms late fails (the rate was not kept)
#   up_100k         HTTP/1.1 keep-alive POST of 100 KiB, 13 B answer   wrk -t1 -c8 -s upload.lua
#                   (figure: requests and MiB uploaded per CPU-s; the origin reads every body
#                   before it answers and logs its length, checked against the client's count)
#   h2h2_13         HTTP/2 client -> proxy -> HTTP/2 origin over TLS, 13 B   h2load -t1 -c16 -m10
#                   (nginx: n/a, its proxy_pass speaks HTTP/1.x to origins)
#   grpc            gRPC unary calls (helloworld SayHello) to a Go grpc-go origin   h2load -t1
#                   -c16 -m10 with gRPC framing; every proxy's answer checked for grpc-status 0
#   h1_1k_2w        h1_1k with 2 proxy workers on 2 cores, wrk -t2 -c64 on 2 more (needs ≥ 4
#                   cores: n/a on smaller machines)
#
# Environment:
#   DURATION     seconds per run (4)                ROUNDS      interleaved repetitions (3)
#   SERVERS      "tlsgate nginx haproxy"            CELLS       see above (all)
#   PROXY_CPU    core for the proxy (0)             LOAD_CPU    core for origin + load (1)
#   WORK         working directory (a new /tmp/tlsgate-proxy.*; kept: configs, logs, raw runs)
#   BUILD=1      rebuild tlsgate (cargo build --release -p tlsgate) even if the binary exists
#   GATEWAY_BIN  the tlsgate binary measured as the proxy (default target/release/tlsgate):
#                compares two builds against the same nginx and HAProxy
#   PROFILE      1 (default): after the rounds, one extra tlsgate run of the h2_13 cell under
#                `perf record -g` (not counted), its top user-space symbols printed; 0: skip
#   PROFILE_CELL the cell of that profiled run (default h2_13), e.g. h1_13
#   PROXY_CPU_2W, LOAD_CPU_2W   the second core of the proxy and of the load in h1_1k_2w (2, 3)
#   CORES        cores the machine is taken to have (nproc): h1_1k_2w needs 4
#   RATE         requests per second of the rate cell (10000: below every proxy's saturation)
#   PORT_OFFSET  added to every port the script uses (0: 19380-19383, 19743-19744, 19843, 19943)
#   BENCH=1      after each run's independent client, `tlsgate bench` loads the same proxy with the
#                same connections (and streams, --new-conn, upload body) for DURATION more, from
#                the same core, X25519 only as the others offer: its figure goes beside the
#                independent one in a table of its own (not in the get/upload cells' ratio);
#                rate, gRPC and 2-worker cells have none. A bench run with an error or an answer
#                other than 200 is a FAIL like the others.
# Missing tools are installed (Debian packages; Go, for the gRPC origin and the rate cell's
# client, which `go build` builds from scripts/proxy/grpc-origin and scripts/proxy/ratelat into
# $WORK: the first build of the gRPC origin downloads its modules; ratelat needs none).
# Only the proxy being measured runs (each run starts it, checks with curl that it proxies each
# size and protocol, measures, stops it); the rounds interleave servers and cells so a burst of
# outside load hits one run, not one server. A run with a non-2xx answer, a socket error, a
# failed curl check or fewer origin requests than the client counted is a FAIL: the table shows
# FAIL instead of a figure and the script exits 1. A cell a peer cannot do is n/a, with the reason.
# Output: Markdown tables on stdout, progress on stderr; raw runs in $WORK (results.jsonl,
# <server>-<cell>-<round>.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-4}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-10000}
SERVERS=${SERVERS:-"tlsgate nginx haproxy"}
CELLS=${CELLS:-all}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
PROFILE=${PROFILE:-1}
PROFILE_CELL=${PROFILE_CELL:-h2_13}
PROXY_CPU_2W=${PROXY_CPU_2W:-2}
LOAD_CPU_2W=${LOAD_CPU_2W:-3}
CORES=${CORES:-$(nproc)}
PORT_OFFSET=${PORT_OFFSET:-0}
BENCH=${BENCH:-0}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-proxy.XXXXXX)}
BIN=$ROOT/target/release/tlsgate
PATH=$PATH:/usr/sbin:/sbin
BENCH_NAME=proxy-compare
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh

ORIGIN_PORT=$((19380 + PORT_OFFSET))
ORIGIN_H2_PORT=$((19381 + PORT_OFFSET))
GRPC_PORT=$((19382 + PORT_OFFSET))
GRPC_STATUS_PORT=$((19383 + PORT_OFFSET))
ADMIN=$((19744 + PORT_OFFSET))
port_of() {
  case $1 in tlsgate) echo $((19743 + PORT_OFFSET)) ;; nginx) echo $((19843 + PORT_OFFSET)) ;; haproxy) echo $((19943 + PORT_OFFSET)) ;; esac
}
UPLOAD_BYTES=102400
GRPC_PATH=/helloworld.Greeter/SayHello

# id | label | tool (wrk/h2) | path | response body bytes | tool arguments
#    | figure (r: requests, m: MiB of response body, u: requests and MiB of request body)
#    | kind (get: GET from the HTTP/1.1 origin; upload: POST of UPLOAD_BYTES to it; h2origin: GET
#      from the HTTP/2 TLS origin; grpc: SayHello calls to the gRPC origin; 2w: get, 2 workers)
ALL_CELLS=(
  "h1_13|HTTP/1.1 keep-alive, 13 B|wrk|/13b|13|-t1 -c32|r|get"
  "h1_1k|HTTP/1.1 keep-alive, 1 KiB|wrk|/1k|1024|-t1 -c32|r|get"
  "h1_100k|HTTP/1.1 keep-alive, 100 KiB|wrk|/100k|102400|-t1 -c8|m|get"
  "h1_1m|HTTP/1.1 keep-alive, 1 MiB|wrk|/1m|1048576|-t1 -c8|m|get"
  "h2_13|HTTP/2, 16 conn × 10 streams, 13 B|h2|/13b|13|-t1 -c16 -m10|r|get"
  "h2_1k|HTTP/2, 16 conn × 10 streams, 1 KiB|h2|/1k|1024|-t1 -c16 -m10|r|get"
  "h2_100k|HTTP/2, 8 conn × 4 streams, 100 KiB|h2|/100k|102400|-t1 -c8 -m4|m|get"
  "h2_1m|HTTP/2, 8 conn × 2 streams, 1 MiB|h2|/1m|1048576|-t1 -c8 -m2|m|get"
  "close|New TLS connection per request, 13 B|wrk|/13b|13|-t1 -c16 -H Connection:close|r|get"
  "lat|One connection, back to back, 13 B|wrk|/13b|13|-t1 -c1|r|get"
  "rate|Fixed rate, $RATE req/s over 16 connections, 13 B|ratelat|/13b|13|-c 16 -rate $RATE|r|get"
  "up_100k|HTTP/1.1 keep-alive upload, 100 KiB POST, 13 B answer|wrk|/upload|13|-t1 -c8|u|upload"
  "h2h2_13|HTTP/2 to an HTTP/2 TLS origin, 16 conn × 10 streams, 13 B|h2|/h2o/13b|13|-t1 -c16 -m10|r|h2origin"
  "grpc|gRPC unary calls (SayHello), 16 conn × 10 streams|h2|$GRPC_PATH|18|-t1 -c16 -m10|r|grpc"
  "h1_1k_2w|HTTP/1.1 keep-alive, 1 KiB, 2 proxy workers on 2 cores|wrk|/1k|1024|-t2 -c64|r|2w"
)

bench_load_params
bench_select ALL_CELLS "$CELLS"
if [ "${REPORT_ONLY:-0}" = 1 ]; then
  # A run of an older version of this script has no rows for the cells added since.
  measured=()
  have=" $(jq -r .id "$WORK/results.jsonl" | sort -u | tr '\n' ' ') "
  for line in "${selected[@]}"; do
    [[ $have == *" ${line%%|*} "* ]] && measured+=("$line")
  done
  selected=("${measured[@]}")
fi
read -r -a servers <<<"$SERVERS"
# Whether a selected cell is of KIND.
selected_kind() {
  local line
  for line in "${selected[@]}"; do [ "${line##*|}" = "$1" ] && return 0; done
  return 1
}
# Whether a selected cell uses the load TOOL.
selected_tool() {
  local line id label tool
  for line in "${selected[@]}"; do
    IFS='|' read -r id label tool _ <<<"$line"
    [ "$tool" = "$1" ] && return 0
  done
  return 1
}
# Why SERVER cannot do a cell of KIND (empty: it can).
na_reason() { # server kind
  case $2 in
    h2origin) [ "$1" != nginx ] || echo "nginx's proxy_pass speaks HTTP/1.x to origins (no HTTP/2 upstreams outside grpc_pass)" ;;
    2w) [ "$CORES" -ge 4 ] || echo "needs ≥ 4 cores (2 for the proxy, 2 for origin and load), this machine has $CORES" ;;
  esac
}
RESULTS=$WORK/results.jsonl

if [ "${REPORT_ONLY:-0}" != 1 ]; then
# ---- prerequisites --------------------------------------------------------------------------
bench_install_missing nginx:nginx-light haproxy:haproxy wrk:wrk h2load:nghttp2-client jq:jq curl:curl \
  openssl:openssl taskset:util-linux
bench_build_tlsgate "$BIN"
bench_copy_gateway "$BIN"
bench_raise_nofile
mkdir -p "$WORK/www" "$WORK/nginx-tmp" "$WORK/origin-tmp"
# nginx's workers run as an unprivileged user when started as root: they must reach the files.
chmod 755 "$WORK" "$WORK/www"

# ---- the origin's files, one certificate, the configurations --------------------------------
printf 'Hello, world!' >"$WORK/www/13b"
head -c 1024 /dev/urandom >"$WORK/www/1k"
head -c 102400 /dev/urandom >"$WORK/www/100k"
head -c 1048576 /dev/urandom >"$WORK/www/1m"
bench_mint_certificate proxy-compare-ca
# The upload cell's body (wrk builds its own from upload.lua; curl's checks send this file).
head -c "$UPLOAD_BYTES" /dev/zero | tr '\0' x >"$WORK/upload.bin"
printf 'wrk.method = "POST"\nwrk.body = string.rep("x", %d)\nwrk.headers["Content-Type"] = "application/octet-stream"\n' \
  "$UPLOAD_BYTES" >"$WORK/upload.lua"
# One gRPC message each way (5-byte prefix: not compressed, length; then the protobuf):
# HelloRequest{name: "world"} and the origin's HelloReply{message: "Hello world"}.
printf '\x00\x00\x00\x00\x07\x0a\x05world' >"$WORK/grpc-request.bin"
printf '\x00\x00\x00\x00\x0d\x0a\x0bHello world' >"$WORK/grpc-reply.bin"
: >"$WORK/origin-upload.log"
chmod 666 "$WORK/origin-upload.log"
render() { # template out server
  bench_render "$1" "$2" WORK="$WORK" PORT="$(port_of "$3")" ADMIN="$ADMIN" ORIGIN_PORT="$ORIGIN_PORT" \
    ORIGIN_H2_PORT="$ORIGIN_H2_PORT" GRPC_PORT="$GRPC_PORT"
}
render scripts/proxy/origin.conf.in "$WORK/origin.conf" origin
render scripts/proxy/tlsgate.toml.in "$WORK/tlsgate.toml" tlsgate
render scripts/proxy/nginx.conf.in "$WORK/nginx.conf" nginx
render scripts/proxy/haproxy.cfg.in "$WORK/haproxy.cfg" haproxy
# The 2-worker variants (h1_1k_2w).
sed 's/^workers = 1$/workers = 2/' "$WORK/tlsgate.toml" >"$WORK/tlsgate-2w.toml"
sed 's/^worker_processes 1;$/worker_processes 2;/' "$WORK/nginx.conf" >"$WORK/nginx-2w.conf"
sed 's/^    nbthread 1$/    nbthread 2/' "$WORK/haproxy.cfg" >"$WORK/haproxy-2w.cfg"
for c in tlsgate tlsgate-2w; do
  "$GW_BIN" check --config "$WORK/$c.toml" --ca "$WORK/ca.pem" >"$WORK/$c-check.txt" 2>&1 || {
    log "tlsgate check refused $WORK/$c.toml:"
    cat "$WORK/$c-check.txt" >&2
    exit 1
  }
done
for c in origin nginx nginx-2w; do
  nginx -t -p "$WORK" -c "$WORK/$c.conf" -e "$WORK/$c-error.log" >"$WORK/$c-t.txt" 2>&1 || {
    cat "$WORK/$c-t.txt" >&2
    exit 1
  }
done
for c in haproxy haproxy-2w; do
  haproxy -c -f "$WORK/$c.cfg" >"$WORK/$c-c.txt" 2>&1 || {
    cat "$WORK/$c-c.txt" >&2
    exit 1
  }
done
if selected_kind grpc; then
  # The gRPC origin (grpc-go's helloworld Greeter), built here; Go's build cache makes it quick
  # after the first time.
  command -v go >/dev/null 2>&1 || bench_install_missing go:golang-go
  mkdir -p "$WORK/grpc-origin-src"
  cp scripts/proxy/grpc-origin/main.go scripts/proxy/grpc-origin/go.mod scripts/proxy/grpc-origin/go.sum \
    "$WORK/grpc-origin-src/"
  log "building the gRPC origin (go build)"
  (cd "$WORK/grpc-origin-src" && go build -o "$WORK/grpc-origin" .) >"$WORK/grpc-origin-build.txt" 2>&1 || {
    log "go build of the gRPC origin failed:"
    cat "$WORK/grpc-origin-build.txt" >&2
    exit 1
  }
fi
fi

if selected_tool ratelat; then
  # The rate cell's open-loop client (Go's standard library only).
  command -v go >/dev/null 2>&1 || bench_install_missing go:golang-go
  log "building the fixed-rate client (go build scripts/proxy/ratelat)"
  (cd scripts/proxy/ratelat && go build -o "$WORK/ratelat" .) >"$WORK/ratelat-build.txt" 2>&1 || {
    log "go build of the fixed-rate client failed:"
    cat "$WORK/ratelat-build.txt" >&2
    exit 1
  }
fi

# ---- processes ------------------------------------------------------------------------------
ORIGIN_PID=""
GRPC_PID=""
PROXY_PID=""
cleanup() {
  bench_stop_pid "$PROXY_PID"
  bench_stop_pid "$GRPC_PID"
  bench_stop_pid "$ORIGIN_PID"
}
trap cleanup EXIT

start_origin() {
  taskset -c "$LOAD_CPU" nginx -p "$WORK" -c "$WORK/origin.conf" -e "$WORK/origin-error.log" \
    >"$WORK/origin.log" 2>&1 &
  ORIGIN_PID=$!
  bench_wait_port "$ORIGIN_PORT" && bench_wait_port "$ORIGIN_H2_PORT" || {
    log "the origin did not start:"
    cat "$WORK/origin.log" "$WORK/origin-error.log" >&2 || true
    exit 1
  }
}
start_grpc_origin() {
  GOMAXPROCS=1 taskset -c "$LOAD_CPU" "$WORK/grpc-origin" -listen "127.0.0.1:$GRPC_PORT" \
    -status "127.0.0.1:$GRPC_STATUS_PORT" >"$WORK/grpc-origin.log" 2>&1 &
  GRPC_PID=$!
  bench_wait_port "$GRPC_PORT" && bench_wait_port "$GRPC_STATUS_PORT" || {
    log "the gRPC origin did not start:"
    cat "$WORK/grpc-origin.log" >&2 || true
    exit 1
  }
}
# Requests the origin has served (its own status requests included).
origin_requests() {
  curl -s "http://127.0.0.1:$ORIGIN_PORT/origin-status" | awk 'NR == 3 { print $3 }'
}
# "accepted-connections requests bad" at the origin of a cell of KIND. get, h2origin, 2w: nginx's
# stub_status (its own request included, bad 0); upload: uploads logged with status 200 and the
# whole body, and the others (bad: refused, or cut short when the client stopped); grpc: the Go
# origin's connections, OK calls, refused calls.
origin_counts() { # kind
  case $1 in
    grpc) curl -s "http://127.0.0.1:$GRPC_STATUS_PORT/" ;;
    upload)
      echo "$(curl -s "http://127.0.0.1:$ORIGIN_PORT/origin-status" | awk 'NR == 3 { print $1 }')" \
        "$(awk -v z="$UPLOAD_BYTES" '$1 == 200 && $2 == z && $3 > z { n++ } END { print n + 0 }' "$WORK/origin-upload.log")" \
        "$(awk -v z="$UPLOAD_BYTES" '!($1 == 200 && $2 == z && $3 > z) { n++ } END { print n + 0 }' "$WORK/origin-upload.log")"
      ;;
    *) curl -s "http://127.0.0.1:$ORIGIN_PORT/origin-status" | awk 'NR == 3 { print $1, $3, 0 }' ;;
  esac
}
# The status requests origin_counts itself adds to the count of KIND.
origin_self() { case $1 in grpc | upload) echo 0 ;; *) echo 1 ;; esac; }

start_proxy() { # server [kind: 2w = the 2-worker configuration on 2 cores]
  local s=$1 conf cpus=$PROXY_CPU
  conf=$(bench_conf "$s")
  if [ "${2:-}" = 2w ]; then
    conf=${conf%.*}-2w.${conf##*.}
    cpus=$PROXY_CPU,$PROXY_CPU_2W
  fi
  bench_start_server "$s" "$cpus" "$conf" "$(port_of "$s")" 0.3
  PROXY_PID=$BENCH_PID
}
stop_proxy() {
  bench_stop_pid "$PROXY_PID"
  PROXY_PID=""
}

# "code size version" of one request through the proxy.
fetch() { # server path h1|h2
  local v=--http1.1
  [ "$3" = h2 ] && v=--http2
  curl -sk $v -o /dev/null -w '%{http_code} %{size_download} %{http_version}' \
    "https://127.0.0.1:$(port_of "$1")$2" 2>/dev/null || echo "curl-failed"
}
# Empty when the proxy answers PATH over PROTO with 200 and the origin's exact body; else why not.
check_proxy() { # server path size h1|h2
  local got want
  got=$(fetch "$1" "$2" "$4")
  want="200 $3 $([ "$4" = h2 ] && echo 2 || echo 1.1)"
  [ "$got" = "$want" ] || echo "curl $4 $2: got '$got', want '$want'"
}
# Empty when a 100 KiB POST through the proxy gets 200 and the 13 B answer, and the origin logged
# it with its whole body; else why not.
check_upload() { # server
  local got want="200 13 1.1" n0 n1
  read -r _ n0 _ <<<"$(origin_counts upload)"
  got=$(curl -sk --http1.1 -o /dev/null -w '%{http_code} %{size_download} %{http_version}' \
    -H 'Content-Type: application/octet-stream' --data-binary "@$WORK/upload.bin" \
    "https://127.0.0.1:$(port_of "$1")/upload" 2>/dev/null || echo "curl-failed")
  [ "$got" = "$want" ] || { echo "curl POST /upload: got '$got', want '$want'"; return; }
  read -r _ n1 _ <<<"$(origin_counts upload)"
  [ $((n1 - n0)) = 1 ] || echo "POST /upload: the origin did not log a whole $UPLOAD_BYTES-byte body"
}
# Empty when PATH reaches the HTTP/2 origin over HTTP/2 and comes back whole over HTTP/2.
check_h2origin() { # server path size
  local got want="200 $3 2 HTTP/2.0"
  got=$(curl -sk --http2 -o /dev/null -w '%{http_code} %{size_download} %{http_version} %header{x-origin-proto}' \
    "https://127.0.0.1:$(port_of "$1")$2" 2>/dev/null || echo "curl-failed")
  [ "$got" = "$want" ] || echo "curl h2 $2 (code, size, version, origin protocol): got '$got', want '$want'"
}
# Empty when a SayHello call through the proxy gets HTTP/2 200, the origin's exact reply message
# and the trailer grpc-status: 0; else why not.
check_grpc() { # server
  local got rc=0 hdr=$WORK/grpc-check-headers.txt body=$WORK/grpc-check-body.bin grpc
  : >"$hdr"
  : >"$body"
  got=$(curl -sk --http2 -o "$body" -D "$hdr" -w '%{http_code} %{http_version}' \
    -H 'content-type: application/grpc' -H 'te: trailers' --data-binary "@$WORK/grpc-request.bin" \
    "https://127.0.0.1:$(port_of "$1")$GRPC_PATH" 2>/dev/null) || rc=$?
  grpc=$(tr -d '\r' <"$hdr" | grep -i '^grpc-' | tr '\n' ' ' | sed 's/ $//')
  if [ "$rc" != 0 ] || [ "$got" != "200 2" ]; then
    echo "gRPC SayHello: got '$got' (curl exit $rc), want '200 2'${grpc:+; $grpc}"
  elif ! cmp -s "$body" "$WORK/grpc-reply.bin"; then
    echo "gRPC SayHello: the reply message is not the origin's (got $(wc -c <"$body") bytes: $(od -An -tx1 "$body" | head -2 | tr -s ' \n' ' '))${grpc:+; $grpc}"
  elif ! tr -d '\r' <"$hdr" | grep -qix 'grpc-status: 0'; then
    echo "gRPC SayHello: no grpc-status 0 (${grpc:-no grpc- fields})"
  fi
}
# The check of one run of a cell of KIND: empty when the proxy answers right.
check_cell() { # server kind path size proto
  case $2 in
    upload) check_upload "$1" ;;
    h2origin) check_h2origin "$1" "$3" "$4" ;;
    grpc) check_grpc "$1" ;;
    *) check_proxy "$1" "$3" "$4" "$5" ;;
  esac
}

# tlsgate's handshake counters: "full resumed failures".
tlsgate_counts() { bench_tlsgate_handshakes "$ADMIN"; }

# wrk's latency values (318.00us, 1.23ms, 2.00s) in microseconds.
to_us() {
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    if (u == "us") m = 1; else if (u == "ms") m = 1000; else if (u == "s") m = 1000000; else m = -1
    printf "%.0f", (m < 0 ? -1 : n * m) }'
}

run_load() { # tool url args kind -> the tool's output on stdout
  local tool=$1 url=$2 args=$3 kind=${4:-get} cpus=$LOAD_CPU extra=()
  [ "$kind" = 2w ] && cpus=$LOAD_CPU,$LOAD_CPU_2W
  if [ "$tool" = wrk ]; then
    if [[ $args == *Connection:close* ]]; then
      extra=(-H "Connection: close")
      args=${args/-H Connection:close/}
    fi
    [ "$kind" = upload ] && extra+=(-s "$WORK/upload.lua")
    # shellcheck disable=SC2086
    timeout $((DURATION + 30)) taskset -c "$cpus" wrk $args "${extra[@]}" -d "${DURATION}s" --latency "$url" 2>&1
  elif [ "$tool" = ratelat ]; then
    # shellcheck disable=SC2086
    timeout $((DURATION + 30)) taskset -c "$cpus" "$WORK/ratelat" $args -d "${DURATION}s" -ca "$WORK/ca.pem" \
      -url "$url" 2>&1
  else
    [ "$kind" = grpc ] && extra=(-d "$WORK/grpc-request.bin" -H 'content-type: application/grpc' -H 'te: trailers')
    # shellcheck disable=SC2086
    timeout $((DURATION + 30)) taskset -c "$cpus" h2load $args "${extra[@]}" -D "$DURATION" "$url" 2>&1
  fi
}

# `tlsgate bench`'s arguments for the cell of TOOL, ARGS and KIND (empty: it has no bench run).
bench_args() { # tool args kind
  local c m a
  case $3 in get | h2origin | upload) ;; *) return ;; esac
  c=$(sed -n 's/.*-c\([0-9]*\).*/\1/p' <<<"$2")
  case $1 in
    wrk)
      a="-t 1 -c $c"
      [[ $2 == *Connection:close* ]] && a="$a --new-conn"
      [ "$3" = upload ] && a="$a --method POST --body @$WORK/upload.bin"
      echo "$a"
      ;;
    h2)
      m=$(sed -n 's/.*-m\([0-9]*\).*/\1/p' <<<"$2")
      echo "--h2 -t 1 -c $c -m $m"
      ;;
  esac
}

# "count cpu-seconds check" of a `tlsgate bench` run against URL (count: requests answered 200).
run_bench() { # server cell round url bench-args
  local json=$WORK/$1-$2-$3-bench.json u0 k0 u1 k1 cpu n ok errs
  rm -f "$json"
  read -r u0 k0 <<<"$(bench_cpu_ticks "$PROXY_PID")"
  # shellcheck disable=SC2086
  timeout $((DURATION + 30)) taskset -c "$LOAD_CPU" "$GW_BIN" bench $5 -d "${DURATION}s" --groups X25519 \
    --json "$json" "$4" >"$WORK/$1-$2-$3-bench.txt" 2>&1 || true
  read -r u1 k1 <<<"$(bench_cpu_ticks "$PROXY_PID")"
  cpu=$(awk -v a="$((u0 + k0))" -v b="$((u1 + k1))" -v t="$TCK" 'BEGIN { printf "%.2f", (b - a) / t }')
  if [ ! -s "$json" ]; then
    echo "0 $cpu FAIL: tlsgate bench wrote no summary ($(tail -1 "$WORK/$1-$2-$3-bench.txt"))"
    return
  fi
  read -r n ok errs <<<"$(jq -r '"\(.requests) \(.status["200"] // 0) \(.errors_total)"' "$json")"
  if [ "$errs" != 0 ] || [ "$ok" != "$n" ] || [ "$n" -le 0 ]; then
    echo "$ok $cpu FAIL: tlsgate bench: $n requests, $ok answered 200, $errs errors"
  else
    echo "$ok $cpu ok"
  fi
}

run_cell() { # round server cell-line
  local round=$1 s=$2 line=$3 id label tool path size args fig kind
  IFS='|' read -r id label tool path size args fig kind <<<"$line"
  local na
  na=$(na_reason "$s" "$kind")
  if [ -n "$na" ]; then
    log "round $round, $s $id: n/a ($na)"
    jq -cn --arg id "$id" --arg s "$s" --argjson r "$round" --arg check "n/a: $na" \
      '{id: $id, server: $s, round: $r, check: $check}' >>"$RESULTS"
    return
  fi
  local url txt check=ok
  url="https://127.0.0.1:$(port_of "$s")$path"
  txt=$WORK/$s-$id-$round.txt
  start_proxy "$s" "$kind"
  local proto=h1
  [ "$tool" = h2 ] && proto=h2
  local why
  why=$(check_cell "$s" "$kind" "$path" "$size" "$proto")
  [ -z "$why" ] || check="FAIL: $why"
  local m0="0 0" m1="0 0" o0 o1 a0 a1 b0 b1 u0 u1 k0 k1 t0 t1
  [ "$s" = tlsgate ] && m0=$(tlsgate_counts)
  read -r a0 o0 b0 <<<"$(origin_counts "$kind")"
  read -r u0 k0 <<<"$(bench_cpu_ticks "$PROXY_PID")"
  t0=$(date +%s.%N)
  run_load "$tool" "$url" "$args" "$kind" >"$txt" || true
  t1=$(date +%s.%N)
  read -r u1 k1 <<<"$(bench_cpu_ticks "$PROXY_PID")"
  read -r a1 o1 b1 <<<"$(origin_counts "$kind")"
  [ "$s" = tlsgate ] && m1=$(tlsgate_counts)
  local bcount=0 bcpu=0 bcheck=ok bargs=""
  [ "$BENCH" = 1 ] && bargs=$(bench_args "$tool" "$args" "$kind")
  if [ -n "$bargs" ]; then
    read -r bcount bcpu bcheck <<<"$(run_bench "$s" "$id" "$round" "$url" "$bargs")"
  fi
  local temp_files=0 temp_bodies=0
  if [ "$s" = nginx ]; then
    temp_files=$(grep -c 'upstream response is buffered to a temporary file' "$WORK/nginx-error.log" 2>/dev/null || true)
    temp_bodies=$(grep -c 'client request body is buffered to a temporary file' "$WORK/nginx-error.log" 2>/dev/null || true)
    : >"$WORK/nginx-error.log"
  fi
  stop_proxy

  # ---- parse the generator's report ----
  local count=0 secs=$DURATION errs="" p50=-1 p99=-1 neg="-"
  if [ "$tool" = wrk ]; then
    local line_req sock non2xx
    line_req=$(grep -E '^ +[0-9]+ requests in ' "$txt" || true)
    if [ -z "$line_req" ]; then
      errs="wrk produced no summary"
    else
      count=$(awk '{print $1}' <<<"$line_req")
      secs=$(awk '{ s = $4; sub(/s,$/, "", s); print s }' <<<"$line_req")
      case $secs in *m) secs=$(awk -v v="$secs" 'BEGIN { print (v + 0) * 60 }') ;; esac
    fi
    sock=$(grep -E '^ +Socket errors:' "$txt" | sed 's/^ *//' || true)
    [ -z "$sock" ] || errs="${errs:+$errs; }$sock"
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$txt")
    [ -z "$non2xx" ] || errs="${errs:+$errs; }non-2xx/3xx responses: $non2xx"
    p50=$(to_us "$(awk '$1 == "50%" { print $2 }' "$txt")")
    p99=$(to_us "$(awk '$1 == "99%" { print $2 }' "$txt")")
    neg="HTTP/1.1"
  elif [ "$tool" = ratelat ]; then
    local json
    json=$(grep -E '^\{' "$txt" | tail -1 || true)
    if [ -z "$json" ]; then
      errs="ratelat produced no report: $(tail -1 "$txt")"
    else
      count=$(jq -r .requests <<<"$json")
      secs=$(jq -r '.seconds * 100 | round / 100' <<<"$json")
      p50=$(jq -r '.p50_us | round' <<<"$json")
      p99=$(jq -r '.p99_us | round' <<<"$json")
      local rerrs late
      rerrs=$(jq -r .errors <<<"$json") late=$(jq -r .late <<<"$json")
      [ "$rerrs" = 0 ] || errs="ratelat: $rerrs errors (first: $(jq -r .first_error <<<"$json"))"
      # The rate was not kept: the figures would be a closed loop's, not the fixed rate's.
      if [ "$((late * 10))" -gt "$count" ]; then
        errs="${errs:+$errs; }ratelat: $late of $count requests went out over 1 ms late"
      fi
    fi
    neg="HTTP/1.1"
  else
    local reqs codes
    reqs=$(grep -E '^requests: ' "$txt" || true)
    codes=$(grep -E '^status codes: ' "$txt" || true)
    if [ -z "$reqs" ]; then
      errs="h2load produced no summary"
    else
      # requests: T total, S started, D done, OK succeeded, F failed, E errored, TO timeout
      count=$(awk '{ print $8 }' <<<"$reqs")
      local failed errored timeout
      failed=$(awk '{ print $10 }' <<<"$reqs") errored=$(awk '{ print $12 }' <<<"$reqs")
      timeout=$(awk '{ print $14 }' <<<"$reqs")
      [ "$failed$errored$timeout" = 000 ] || errs="h2load: $failed failed, $errored errored, $timeout timeout"
      local bad
      bad=$(awk '{ print $5 + $7 + $9 }' <<<"$codes")
      [ "$bad" = 0 ] || errs="${errs:+$errs; }$codes"
      secs=$(awk '/^finished in / { s = $3; sub(/s,$/, "", s); print s }' "$txt")
    fi
    neg="$(awk -F': ' '/^Application protocol:/ { print $2 }' "$txt") $(awk -F': ' '/^Cipher:/ { print $2 }' "$txt")"
    [[ $neg == h2* ]] || errs="${errs:+$errs; }not HTTP/2: $neg"
  fi
  # Every request the client counted must have reached the origin (minus the second status
  # request itself; the proxy may have forwarded requests the client had no time to count).
  local odelta=$((o1 - o0 - $(origin_self "$kind"))) bad=$((b1 - b0))
  if [ "$odelta" -lt "$count" ]; then
    errs="${errs:+$errs; }origin served $odelta requests, the client counted $count"
  fi
  # The gRPC origin refuses a call whose message is not the one sent (the proxy corrupted it).
  if [ "$kind" = grpc ] && [ "$bad" -gt 0 ]; then
    errs="${errs:+$errs; }the gRPC origin refused $bad calls with a wrong message"
  fi
  if [ "$check" = ok ] && [ -n "$errs" ]; then check="FAIL: $errs"; fi
  if [ "$check" = ok ] && [ "$count" -le 0 ]; then check="FAIL: no request completed"; fi
  if [ "$check" = ok ] && [ "$bcheck" != ok ]; then check=$bcheck; fi

  local cpu wall per mib rate full resumed
  cpu=$(awk -v a="$((u0 + k0))" -v b="$((u1 + k1))" -v t="$TCK" 'BEGIN { printf "%.2f", (b - a) / t }')
  local user sys conns=$((a1 - a0))
  user=$(awk -v a="$u0" -v b="$u1" -v t="$TCK" 'BEGIN { printf "%.2f", (b - a) / t }')
  sys=$(awk -v a="$k0" -v b="$k1" -v t="$TCK" 'BEGIN { printf "%.2f", (b - a) / t }')
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  per=$(awk -v n="$count" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.0f", n / c; else print 0 }')
  local z=$size
  [ "$fig" = u ] && z=$UPLOAD_BYTES
  mib=$(awk -v n="$count" -v z="$z" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.1f", n * z / 1048576 / c; else print 0 }')
  rate=$(awk -v n="$count" -v s="$secs" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print 0 }')
  local bper=null bmib=null
  if [ -n "$bargs" ]; then
    bper=$(awk -v n="$bcount" -v c="$bcpu" 'BEGIN { if (c > 0) printf "%.0f", n / c; else print 0 }')
    bmib=$(awk -v n="$bcount" -v z="$z" -v c="$bcpu" 'BEGIN { if (c > 0) printf "%.1f", n * z / 1048576 / c; else print 0 }')
  fi
  read -r f0 r0 _ <<<"$m0"
  read -r f1 r1 _ <<<"$m1"
  full=$((f1 - f0)) resumed=$((r1 - r0))
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  if [[ $check == FAIL* ]]; then
    log "round $round, $s $id: **$check** (see $txt)"
  else
    log "round $round, $s $id: $rate/s, proxy CPU ${cpu}s of ${secs}s, $per req per CPU-s$([ "$fig" = m ] && echo " = $mib MiB per CPU-s")$([ "$fig" = u ] && echo " = $mib MiB uploaded per CPU-s"), p50 ${p50}us p99 ${p99}us, load $load"
  fi
  jq -cn --arg id "$id" --arg s "$s" --argjson r "$round" --argjson count "$count" \
    --argjson secs "$secs" --argjson wall "$wall" --argjson rate "$rate" --argjson cpu "$cpu" \
    --argjson per "$per" --argjson mib "$mib" --argjson user "$user" --argjson sys "$sys" --argjson conns "$conns" --argjson p50 "$p50" --argjson p99 "$p99" \
    --argjson origin "$odelta" --argjson full "$full" --argjson resumed "$resumed" \
    --argjson temp "${temp_files:-0}" --argjson tempb "${temp_bodies:-0}" --argjson bad "$bad" \
    --arg neg "$neg" --arg load "$load" --arg check "$check" --argjson bper "$bper" --argjson bmib "$bmib" \
    '{id: $id, server: $s, round: $r, count: $count, secs: $secs, wall: $wall, rate: $rate, bench_per: $bper, bench_mib: $bmib,
      cpu: $cpu, user: $user, sys: $sys, per: $per, mib: $mib, origin_conns: $conns, p50_us: $p50, p99_us: $p99, origin: $origin,
      origin_bad: $bad, tlsgate_full: $full, tlsgate_resumed: $resumed, nginx_temp_files: $temp,
      nginx_temp_bodies: $tempb, neg: $neg, loadavg: $load, check: $check}' >>"$RESULTS"
}

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  : >"$RESULTS"
  # What was measured: the tree the script ran from and the server binary's hash.
  GW_ID="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown), $(basename "${GATEWAY_BIN:-$BIN}") sha256 $(sha256sum "$GW_BIN" | cut -c1-12)"
  bench_save_params DURATION ROUNDS SERVERS CELLS PROXY_CPU LOAD_CPU PROXY_CPU_2W LOAD_CPU_2W GW_ID
  log "work directory $WORK; proxies on CPU $PROXY_CPU, origin and load on CPU $LOAD_CPU; $ROUNDS rounds of ${DURATION}s per cell"
  # A port already taken would make wait_port find somebody else's server.
  bench_ports_free "$ORIGIN_PORT" "$ORIGIN_H2_PORT" "$ADMIN" $(for s in "${servers[@]}"; do port_of "$s"; done) \
    $(selected_kind grpc && echo "$GRPC_PORT $GRPC_STATUS_PORT") || exit 1
  start_origin
  selected_kind grpc && start_grpc_origin
  # Every proxy must answer every size over both protocols with the origin's exact body, and
  # what the selected cells of the other kinds ask of it.
  for s in "${servers[@]}"; do
    start_proxy "$s"
    bad=""
    for f in 13b:13 1k:1024 100k:102400 1m:1048576; do
      for p in h1 h2; do
        why=$(check_proxy "$s" "/${f%%:*}" "${f#*:}" "$p")
        [ -z "$why" ] || bad="${bad:+$bad; }$why"
      done
    done
    # ... and forward to the origin (a 404 from the origin for an unknown path, not from the proxy).
    o0=$(origin_requests)
    fetch "$s" /no-such-file h1 >/dev/null
    o1=$(origin_requests)
    [ $((o1 - o0)) = 2 ] || bad="${bad:+$bad; }the origin did not see the request for /no-such-file"
    also=""
    for k in upload h2origin grpc; do
      selected_kind "$k" && [ -z "$(na_reason "$s" "$k")" ] || continue
      for line in "${selected[@]}"; do
        [ "${line##*|}" = "$k" ] || continue
        IFS='|' read -r _ _ _ kpath ksize _ <<<"$line"
        why=$(check_cell "$s" "$k" "$kpath" "$ksize" h2)
        [ -z "$why" ] || bad="${bad:+$bad; }$why"
        also="${also:+$also, }$k"
        break
      done
    done
    stop_proxy
    if [ -n "$bad" ]; then
      log "$s does not proxy correctly: $bad"
      exit 1
    fi
    log "$s proxies all four sizes over HTTP/1.1 and HTTP/2${also:+ (and passes the $also checks)}"
  done
  bench_rounds "$ROUNDS" run_cell

  # ---- one profiled run (not counted) ----
  if [ "$PROFILE" = 1 ] && command -v perf >/dev/null 2>&1 && [[ " $SERVERS " == *" tlsgate "* ]]; then
    log "profiling tlsgate in the $PROFILE_CELL cell (perf record -g, not counted)"
    start_proxy tlsgate
    for line in "${ALL_CELLS[@]}"; do [ "${line%%|*}" = "$PROFILE_CELL" ] && pline=$line; done
    IFS='|' read -r _ _ ptool ppath _ pargs _ pkind <<<"$pline"
    run_load "$ptool" "https://127.0.0.1:$(port_of tlsgate)$ppath" "$pargs" "$pkind" >"$WORK/profile-load.txt" &
    lpid=$!
    sleep 0.5
    perf record -q -g -F 999 -p "$PROXY_PID" -o "$WORK/perf.data" -- sleep "$((DURATION > 2 ? DURATION - 1 : 1))" \
      >"$WORK/perf-record.txt" 2>&1 || log "perf record failed: $(tail -1 "$WORK/perf-record.txt")"
    wait "$lpid" || true
    stop_proxy
    if [ -s "$WORK/perf.data" ]; then
      perf report -i "$WORK/perf.data" --no-children --sort dso,sym --stdio --percent-limit 0.3 \
        >"$WORK/perf-report.txt" 2>/dev/null || true
      perf report -i "$WORK/perf.data" --no-children --sort dso --stdio \
        >"$WORK/perf-report-dso.txt" 2>/dev/null || true
    fi
  fi
  bench_stop_pid "$GRPC_PID"
  GRPC_PID=""
  bench_stop_pid "$ORIGIN_PID"
  ORIGIN_PID=""
fi

# ---- tables ---------------------------------------------------------------------------------
ids=()
for line in "${selected[@]}"; do ids+=("${line%%|*}"); done
labels=$(for line in "${selected[@]}"; do IFS='|' read -r id label tool path size args fig kind <<<"$line"; \
  jq -cn --arg id "$id" --arg lab "$label" --arg tool "$tool" --arg args "$args" --arg fig "$fig" --arg kind "$kind" \
  '{id: $id, label: $lab, tool: $tool, args: $args, fig: $fig, kind: $kind}'; done | jq -s .)
servers_json=$(printf '%s\n' "${servers[@]}" | jq -R . | jq -s .)

# runs: the measured runs of a cell and server (not the n/a ones); na: the n/a ones.
JQ_COMMON="$BENCH_JQ_MEDIAN"'
  def name: {"tlsgate": "tlsgate", "nginx": "nginx", "haproxy": "HAProxy"}[.] // .;
  def k: if . == null then "—" elif . >= 10000 then "\(. / 1000 | round)k"
         elif . >= 100 then "\(. | round)" else "\(. * 10 | round / 10)" end;
  def us: if . == null or . < 0 then "—" elif . >= 1000 then "\(. / 10 | round / 100) ms" else "\(. | round) µs" end;
  . as $runs
  | def runs($id; $s): $runs | map(select(.id == $id and .server == $s and (.check | startswith("n/a") | not)));
    def na($id; $s): $runs | map(select(.id == $id and .server == $s and (.check | startswith("n/a"))));
    def ok($id; $s): runs($id; $s) | map(select(.check | startswith("ok")));
    def failed($id; $s): runs($id; $s) | map(select(.check | startswith("ok") | not));
    # tlsgate ÷ the best peer of the same round, each round where both measured (the spread
    # that the noise of the machine leaves in the median ratio).
    def fig($c): if $c.fig == "m" then .mib else .per end;
    def paired($c): [ ok($c.id; "tlsgate")[] as $t
        | ([ $servers[] | select(. != "tlsgate") as $s | ok($c.id; $s)[] | select(.round == $t.round) | fig($c) ] | max) as $b
        | select($b != null and $b > 0) | ($t | fig($c)) / $b ];
'
echo
echo "### Proxy path: work per proxy CPU-second"
echo
loads=$(jq -rs 'map(select(.loadavg != null) | .loadavg | tonumber) | if length == 0 then "—" else "\(min)–\(max)" end' "$RESULTS")
extra=""
if selected_kind upload; then
  extra="$extra Uploads: requests, and MiB of request body in brackets, ÷ proxy CPU seconds; the origin reads each whole body before it answers."
fi
if selected_kind grpc; then
  extra="$extra gRPC: the origin is a Go grpc-go server (GOMAXPROCS=1) on CPU $LOAD_CPU."
fi
if selected_kind 2w; then
  extra="$extra 2-worker cell: the proxy with 2 workers (threads) on CPUs $PROXY_CPU,$PROXY_CPU_2W and the load on CPUs $LOAD_CPU,$LOAD_CPU_2W; compare it with the 1-worker 1 KiB row."
fi
echo "Each proxy alone, 1 worker pinned to CPU $PROXY_CPU; origin (nginx, 1 worker) and load generator pinned to CPU $LOAD_CPU; $ROUNDS interleaved rounds of ${DURATION} s, median shown (tlsgate: ${GW_ID:-?}; 1-minute load average during the runs $loads). Figure: requests (or MiB of response body) ÷ proxy CPU seconds (utime+stime, /proc). Higher is better; \`tlsgate ÷ best peer\` > 1 means tlsgate does more per CPU-second than the better of nginx and HAProxy (the ratio of the medians; \"per round\": the lowest and highest ratio of tlsgate to the better peer of the same round, the spread the machine's noise leaves in it). Latency rows: lower is better, and the ratio is tlsgate ÷ the lower peer (> 1: tlsgate slower).$extra"
echo
cols=(l:cell l:load l:figure)
for s in "${servers[@]}"; do
  cols+=("r:$(jq -rn --arg s "$s" '{"tlsgate": "tlsgate", "nginx": "nginx", "haproxy": "HAProxy"}[$s] // $s')")
done
bench_table_head "${cols[@]}" "r:tlsgate ÷ best peer"
jq -rs --argjson cells "$labels" --argjson servers "$servers_json" "$JQ_COMMON"'
  $cells[] as $c
  | ($servers | map(. as $s | {s: $s, f: failed($c.id; $s) | length, n: runs($c.id; $s) | length,
       na: na($c.id; $s) | length,
       v: (ok($c.id; $s) | map(if $c.fig == "m" then .mib else .per end) | median),
       mb: (ok($c.id; $s) | map(.mib) | median)})) as $row
  | ($row | map(select(.s == "tlsgate")) | .[0]) as $t
  | ($row | map(select(.s != "tlsgate" and .f == 0 and .v != null)) | max_by(.v)) as $best
  | "| \($c.label) | \($c.tool | if . == "h2" then "h2load" else . end) \($c.args | gsub("Connection:close"; "\u0027Connection: close\u0027")) | \(if $c.kind == "grpc" then "calls per CPU-s" else {"m": "MiB per CPU-s", "u": "req (MiB uploaded) per CPU-s"}[$c.fig] // "req per CPU-s" end) | "
    + ($row | map(if .n == 0 and .na > 0 then "n/a" elif .n == 0 then "—" elif .f > 0 then "**FAIL** (\(.f)/\(.n))"
                  elif $c.fig == "u" then "\(.v | k) (\(.mb | k))" else (.v | k) end) | join(" | "))
    + " | "
    + (if ($row | any(.f > 0)) then "— (a run failed)"
       elif $t == null or $t.v == null or $best == null then "—"
       else "**\($t.v / $best.v * 100 | round / 100)×** (\($best.s | name))"
         + (paired($c) | if length > 1 then "; per round \(min * 100 | round / 100)–\(max * 100 | round / 100)×" else "" end) end) + " |",
    (if $c.id == "lat" or $c.id == "rate" then
       ("p50_us", "p99_us") as $q
       | ($servers | map(. as $s | {s: $s, f: failed($c.id; $s) | length, n: runs($c.id; $s) | length,
            v: (ok($c.id; $s) | map(.[$q]) | median)})) as $lrow
       | ($lrow | map(select(.s == "tlsgate")) | .[0]) as $lt
       | ($lrow | map(select(.s != "tlsgate" and .f == 0 and .v != null)) | min_by(.v)) as $lbest
       | "| \($c.label) | \(if $c.id == "lat" then "wrk -t1 -c1 --latency" else "ratelat \($c.args)" end) | \($q | sub("_us"; "")) latency | "
         + ($lrow | map(if .n == 0 then "—" elif .f > 0 then "**FAIL**" else (.v | us) end) | join(" | "))
         + " | "
         + (if ($lrow | any(.f > 0)) then "— (a run failed)"
            elif $lt == null or $lt.v == null or $lbest == null then "—"
            else "\($lt.v / $lbest.v * 100 | round / 100)× (\($lbest.s | name))" end) + " |"
     else empty end)
' "$RESULTS"
jq -rs --argjson cells "$labels" --argjson servers "$servers_json" "$JQ_COMMON"'
  [ $cells[] as $c
    | [ $servers[] as $s | na($c.id; $s) | select(length > 0) | {s: ($s | name), why: (.[0].check | ltrimstr("n/a: "))} ]
    | group_by(.why)[] | "- n/a, \($c.label), \(map(.s) | join(", ")): \(.[0].why)." ]
  | if length > 0 then "", .[] else empty end
' "$RESULTS"

if jq -se 'any(.bench_per != null)' "$RESULTS" >/dev/null; then
  echo
  echo "### Beside \`tlsgate bench\`"
  echo
  echo "Each run's independent client (wrk, h2load), then \`tlsgate bench\` with the same connections and streams for as long, against the same proxy process (median of the rounds; per proxy CPU-second as above). Cells: \`independent / bench\`."
  echo
  bench_table_head l:cell "${cols[@]:3}" "r:tlsgate ÷ best peer, independent" "r:tlsgate ÷ best peer, bench"
  jq -rs --argjson cells "$labels" --argjson servers "$servers_json" "$JQ_COMMON"'
    def med($c; $s; $f): ok($c.id; $s) | map(.[$f]) | map(select(. != null)) | median;
    def ratio($row; $key): ($row | map(select(.s == "tlsgate")) | .[0][$key]) as $t
      | ($row | map(select(.s != "tlsgate" and .[$key] != null)) | max_by(.[$key])) as $b
      | if $t == null or $b == null or $b[$key] == 0 then "—" else "\($t / $b[$key] * 100 | round / 100)× (\($b.s | name))" end;
    $cells[] as $c
    | select([ $servers[] as $s | ok($c.id; $s)[] | .bench_per ] | any(. != null))
    | ($servers | map(. as $s | {s: $s,
         i: med($c; $s; if $c.fig == "m" then "mib" else "per" end),
         b: med($c; $s; if $c.fig == "m" then "bench_mib" else "bench_per" end)})) as $row
    | "| \($c.label) (\(if $c.fig == "m" then "MiB" else "req" end) per CPU-s) | "
      + ($row | map("\(.i | k) / \(.b | k)") | join(" | "))
      + " | \(ratio($row; "i")) | \(ratio($row; "b")) |"
  ' "$RESULTS"
fi

echo
echo "### Rates, CPU used and latency (medians)"
echo
echo "rate = requests/s seen by the generator; proxy CPU = proxy CPU-s ÷ run seconds (1.00 = its core saturated); user = the user-space share of that CPU time (the rest is the kernel); origin conns = connections the origin accepted per 1,000 requests (pool churn: 0 when the proxy reuses its idle connections; the close cell reuses them too); p50/p99 from wrk's latency distribution (h2load reports none; the rate cell: ratelat's, from the time each request was due)."
echo
echo "| cell | server | rate /s | proxy CPU | user | origin conns per 1k req | p50 | p99 | rounds ok | notes |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
jq -rs --argjson cells "$labels" --argjson servers "$servers_json" "$JQ_COMMON"'
  $cells[] as $c | $servers[] as $s
  | runs($c.id; $s) as $all | ok($c.id; $s) as $ok
  | select($all | length > 0)
  | "| \($c.label) | \($s | name) | \($ok | map(.rate) | median | k) | \($ok | map(.cpu / .secs) | median | if . == null then "—" else "\(. * 100 | round / 100)" end) | \($ok | map(select(.cpu > 0) | .user / .cpu) | median | if . == null then "—" else "\(. * 100 | round)%" end) | \($ok | map(select(.count > 0) | (.origin_conns // 0) * 1000 / .count) | median | if . == null then "—" else "\(. * 10 | round / 10)" end) | \($ok | map(.p50_us) | median | us) | \($ok | map(.p99_us) | median | us) | \($ok | length)/\($all | length) | "
    + ([ (if $s == "tlsgate" and $c.id == "close" then "TLS handshakes: \($all | map(.tlsgate_full) | add) full, \($all | map(.tlsgate_resumed) | add) resumed" else empty end),
         (if $s == "nginx" and ($all | map(.nginx_temp_files) | add) > 0 then "nginx buffered \($all | map(.nginx_temp_files) | add) responses to temp files" else empty end),
         (if $s == "nginx" and ($all | map(.nginx_temp_bodies // 0) | add) > 0 then "nginx buffered \($all | map(.nginx_temp_bodies) | add) request bodies to temp files" else empty end),
         (if $c.kind == "upload" then "the origin read \($all | map(.origin) | add) whole 100 KiB bodies, the client counted \($all | map(.count) | add) answers" else empty end),
         (if $c.tool == "h2" then ($all[0].neg) else empty end),
         (failed($c.id; $s) | map(.check) | unique | .[]) ] | join("; ")) + " |"
' "$RESULTS"

if [ -s "$WORK/perf-report.txt" ]; then
  echo
  echo "### tlsgate profile, h2_13 cell (one extra run, not counted)"
  echo
  echo "\`perf record -g -F 999 -p PID\` for $((DURATION > 2 ? DURATION - 1 : 1)) s; \`perf report --no-children\`: self time. By object:"
  echo
  echo '```text'
  grep -E '^ +[0-9.]+%' "$WORK/perf-report-dso.txt" | head -8
  echo '```'
  echo
  echo "Top user-space symbols (share of all samples):"
  echo
  echo '```text'
  grep -E '^ +[0-9.]+%' "$WORK/perf-report.txt" | grep -F '[.]' | head -25
  echo '```'
fi
echo
nfail=$(jq -s 'map(select(.check | startswith("ok") or startswith("n/a") | not)) | length' "$RESULTS")
log "raw results in $WORK (results.jsonl, <server>-<cell>-<round>.txt, perf-report.txt)"
if [ "$nfail" -gt 0 ]; then
  log "$nfail run(s) FAILED (see the tables' notes); their figures are not used"
  exit 1
fi
