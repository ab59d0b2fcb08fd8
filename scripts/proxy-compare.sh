#!/usr/bin/env bash
# Compares tlsgate's proxy path with nginx's and HAProxy's (issues #17, #25): each proxy with one
# worker on one core terminates TLS 1.3 (ECDSA P-256, ALPN h2 + http/1.1) and forwards to the same
# plain-HTTP/1.1 nginx origin; the load comes from independent generators (wrk, h2load) on the
# other core, next to the origin. Proxy CPU seconds from /proc, requests (or MiB) per proxy
# CPU-second, median of interleaved rounds, and the ratio tlsgate ÷ best peer.
#
#   scripts/proxy-compare.sh                       # ~6 minutes with the defaults
#   DURATION=10 ROUNDS=5 scripts/proxy-compare.sh
#   CELLS="h1_13 h2_13" SERVERS="tlsgate nginx" GATEWAY_BIN=/tmp/tlsgate-before scripts/proxy-compare.sh
#   REPORT_ONLY=1 WORK=/tmp/tlsgate-proxy.XXXX scripts/proxy-compare.sh   # tables of a run again
#
# Cells (CELLS, space-separated ids; default all):
#   h1_13 h1_1k     HTTP/1.1 keep-alive, 13 B / 1 KiB      wrk -t1 -c32
#   h1_100k h1_1m   HTTP/1.1 keep-alive, 100 KiB / 1 MiB   wrk -t1 -c8 (figure: MiB per CPU-s)
#   h2_13 h2_1k     HTTP/2, 16 connections x 10 streams    h2load -t1 -c16 -m10 -D
#   close           a new TLS connection per request, 13 B wrk -t1 -c16 -H 'Connection: close'
#   lat             one connection, back to back, 13 B     wrk -t1 -c1 --latency (p50, p99)
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
# Only the proxy being measured runs (each run starts it, checks with curl that it proxies each
# size and protocol, measures, stops it); the rounds interleave servers and cells so a burst of
# outside load hits one run, not one server. A run with a non-2xx answer, a socket error, a
# failed curl check or fewer origin requests than the client counted is a FAIL: the table shows
# FAIL instead of a figure and the script exits 1.
# Output: Markdown tables on stdout, progress on stderr; raw runs in $WORK (results.jsonl,
# <server>-<cell>-<round>.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-4}
ROUNDS=${ROUNDS:-3}
SERVERS=${SERVERS:-"tlsgate nginx haproxy"}
CELLS=${CELLS:-all}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
PROFILE=${PROFILE:-1}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-proxy.XXXXXX)}
BIN=$ROOT/target/release/tlsgate
PATH=$PATH:/usr/sbin:/sbin

ORIGIN_PORT=19380
ADMIN=19744
port_of() {
  case $1 in tlsgate) echo 19743 ;; nginx) echo 19843 ;; haproxy) echo 19943 ;; esac
}

# id | label | tool (wrk/h2) | path | body bytes | tool arguments | figure (r: requests, m: MiB)
ALL_CELLS=(
  "h1_13|HTTP/1.1 keep-alive, 13 B|wrk|/13b|13|-t1 -c32|r"
  "h1_1k|HTTP/1.1 keep-alive, 1 KiB|wrk|/1k|1024|-t1 -c32|r"
  "h1_100k|HTTP/1.1 keep-alive, 100 KiB|wrk|/100k|102400|-t1 -c8|m"
  "h1_1m|HTTP/1.1 keep-alive, 1 MiB|wrk|/1m|1048576|-t1 -c8|m"
  "h2_13|HTTP/2, 16 conn × 10 streams, 13 B|h2|/13b|13|-t1 -c16 -m10|r"
  "h2_1k|HTTP/2, 16 conn × 10 streams, 1 KiB|h2|/1k|1024|-t1 -c16 -m10|r"
  "close|New TLS connection per request, 13 B|wrk|/13b|13|-t1 -c16 -H Connection:close|r"
  "lat|One connection, back to back, 13 B|wrk|/13b|13|-t1 -c1|r"
)

log() { echo "proxy-compare: $*" >&2; }

if [ "${REPORT_ONLY:-0}" = 1 ]; then
  # shellcheck source=/dev/null
  source "$WORK/params"
fi

selected=()
for line in "${ALL_CELLS[@]}"; do
  id=${line%%|*}
  if [ "$CELLS" = all ] || [[ " $CELLS " == *" $id "* ]]; then selected+=("$line"); fi
done
read -r -a servers <<<"$SERVERS"
RESULTS=$WORK/results.jsonl

if [ "${REPORT_ONLY:-0}" != 1 ]; then
# ---- prerequisites --------------------------------------------------------------------------
for tool in nginx haproxy wrk h2load jq curl openssl taskset; do
  command -v "$tool" >/dev/null 2>&1 || {
    log "missing $tool (Debian: nginx-light haproxy wrk nghttp2-client jq curl openssl util-linux)"
    exit 2
  }
done
if [ "${BUILD:-0}" = 1 ] || { [ -z "${GATEWAY_BIN:-}" ] && [ ! -x "$BIN" ]; }; then
  log "building tlsgate (release)"
  cargo build --release -p tlsgate >&2
fi
# A private copy, so a rebuild during the run cannot swap the binary under the measurements.
cp "${GATEWAY_BIN:-$BIN}" "$WORK/tlsgate-server"
GW_BIN=$WORK/tlsgate-server
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
mkdir -p "$WORK/www" "$WORK/nginx-tmp" "$WORK/origin-tmp"
# nginx's workers run as an unprivileged user when started as root: they must reach the files.
chmod 755 "$WORK" "$WORK/www"

# ---- the origin's files, one certificate, the configurations --------------------------------
printf 'Hello, world!' >"$WORK/www/13b"
head -c 1024 /dev/urandom >"$WORK/www/1k"
head -c 102400 /dev/urandom >"$WORK/www/100k"
head -c 1048576 /dev/urandom >"$WORK/www/1m"
if [ ! -s "$WORK/leaf.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -subj /CN=proxy-compare-ca -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
    -keyout "$WORK/leaf.key" -out "$WORK/leaf.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' \
    >"$WORK/leaf.ext"
  openssl x509 -req -in "$WORK/leaf.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial \
    -days 30 -extfile "$WORK/leaf.ext" -out "$WORK/leaf.pem" 2>/dev/null
  cat "$WORK/leaf.pem" "$WORK/leaf.key" >"$WORK/haproxy.pem"
fi
render() { # template out server
  sed -e "s|@WORK@|$WORK|g" -e "s|@PORT@|$(port_of "$3")|g" -e "s|@ADMIN@|$ADMIN|g" \
    -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" "$1" >"$2"
}
render scripts/proxy/origin.conf.in "$WORK/origin.conf" origin
render scripts/proxy/tlsgate.toml.in "$WORK/tlsgate.toml" tlsgate
render scripts/proxy/nginx.conf.in "$WORK/nginx.conf" nginx
render scripts/proxy/haproxy.cfg.in "$WORK/haproxy.cfg" haproxy
"$GW_BIN" check --config "$WORK/tlsgate.toml" --ca "$WORK/ca.pem" >"$WORK/tlsgate-check.txt" 2>&1 || {
  log "tlsgate check refused $WORK/tlsgate.toml:"
  cat "$WORK/tlsgate-check.txt" >&2
  exit 1
}
for c in origin nginx; do
  nginx -t -p "$WORK" -c "$WORK/$c.conf" -e "$WORK/$c-error.log" >"$WORK/$c-t.txt" 2>&1 || {
    cat "$WORK/$c-t.txt" >&2
    exit 1
  }
done
haproxy -c -f "$WORK/haproxy.cfg" >"$WORK/haproxy-c.txt" 2>&1 || {
  cat "$WORK/haproxy-c.txt" >&2
  exit 1
}
fi

# ---- processes ------------------------------------------------------------------------------
TCK=$(getconf CLK_TCK)
procs() { echo "$1" $(pgrep -P "$1" 2>/dev/null || true); }
# "utime stime" of the process and its children (all threads, exited ones included), clock ticks.
cpu_ticks() {
  local u=0 k=0 p f
  for p in $(procs "$1"); do
    [ -r "/proc/$p/stat" ] || continue
    read -r -a f <<<"$(sed 's/.*) //' "/proc/$p/stat")"
    u=$((u + f[11])) k=$((k + f[12]))
  done
  echo "$u $k"
}

wait_port() {
  local i
  for i in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

ORIGIN_PID=""
PROXY_PID=""
stop_pid() {
  local pid=$1
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  stop_pid "$PROXY_PID"
  stop_pid "$ORIGIN_PID"
}
trap cleanup EXIT

start_origin() {
  taskset -c "$LOAD_CPU" nginx -p "$WORK" -c "$WORK/origin.conf" -e "$WORK/origin-error.log" \
    >"$WORK/origin.log" 2>&1 &
  ORIGIN_PID=$!
  wait_port "$ORIGIN_PORT" || {
    log "the origin did not start:"
    cat "$WORK/origin.log" "$WORK/origin-error.log" >&2 || true
    exit 1
  }
}
# Requests the origin has served (its own status requests included).
origin_requests() {
  curl -s "http://127.0.0.1:$ORIGIN_PORT/origin-status" | awk 'NR == 3 { print $3 }'
}
# "accepted-connections requests" of the origin.
origin_counts() {
  curl -s "http://127.0.0.1:$ORIGIN_PORT/origin-status" | awk 'NR == 3 { print $1, $3 }'
}

start_proxy() {
  local s=$1
  case $s in
    tlsgate)
      RUST_LOG=warn taskset -c "$PROXY_CPU" "$GW_BIN" serve --config "$WORK/tlsgate.toml" >>"$WORK/tlsgate.log" 2>&1 &
      ;;
    nginx)
      taskset -c "$PROXY_CPU" nginx -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log" >>"$WORK/nginx.log" 2>&1 &
      ;;
    haproxy)
      taskset -c "$PROXY_CPU" haproxy -db -f "$WORK/haproxy.cfg" >>"$WORK/haproxy.log" 2>&1 &
      ;;
    *)
      log "unknown server $s"
      exit 2
      ;;
  esac
  PROXY_PID=$!
  if ! wait_port "$(port_of "$s")"; then
    log "$s did not start; log:"
    tail -20 "$WORK/$s.log" >&2 || true
    exit 1
  fi
  sleep 0.3 # nginx forks its worker after binding
}
stop_proxy() {
  stop_pid "$PROXY_PID"
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

# tlsgate's handshake counters: "full resumed".
tlsgate_counts() {
  curl -s "http://127.0.0.1:$ADMIN/metrics" | awk '
    /^tlsgate_handshakes_total\{/ { if ($0 ~ /outcome="full"/) f += $NF; else r += $NF }
    END { printf "%d %d\n", f, r }'
}

# wrk's latency values (318.00us, 1.23ms, 2.00s) in microseconds.
to_us() {
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    if (u == "us") m = 1; else if (u == "ms") m = 1000; else if (u == "s") m = 1000000; else m = -1
    printf "%.0f", (m < 0 ? -1 : n * m) }'
}

run_load() { # tool url args... -> the tool's output on stdout
  local tool=$1 url=$2 args=$3
  if [ "$tool" = wrk ]; then
    local hdr=()
    if [[ $args == *Connection:close* ]]; then
      hdr=(-H "Connection: close")
      args=${args/-H Connection:close/}
    fi
    # shellcheck disable=SC2086
    timeout $((DURATION + 30)) taskset -c "$LOAD_CPU" wrk $args "${hdr[@]}" -d "${DURATION}s" --latency "$url" 2>&1
  else
    # shellcheck disable=SC2086
    timeout $((DURATION + 30)) taskset -c "$LOAD_CPU" h2load $args -D "$DURATION" "$url" 2>&1
  fi
}

run_cell() { # round server cell-line
  local round=$1 s=$2 line=$3 id label tool path size args fig
  IFS='|' read -r id label tool path size args fig <<<"$line"
  local url txt check=ok
  url="https://127.0.0.1:$(port_of "$s")$path"
  txt=$WORK/$s-$id-$round.txt
  start_proxy "$s"
  local proto=h1
  [ "$tool" = h2 ] && proto=h2
  local why
  why=$(check_proxy "$s" "$path" "$size" "$proto")
  [ -z "$why" ] || check="FAIL: $why"
  local m0="0 0" m1="0 0" o0 o1 a0 a1 u0 u1 k0 k1 t0 t1
  [ "$s" = tlsgate ] && m0=$(tlsgate_counts)
  read -r a0 o0 <<<"$(origin_counts)"
  read -r u0 k0 <<<"$(cpu_ticks "$PROXY_PID")"
  t0=$(date +%s.%N)
  run_load "$tool" "$url" "$args" >"$txt" || true
  t1=$(date +%s.%N)
  read -r u1 k1 <<<"$(cpu_ticks "$PROXY_PID")"
  read -r a1 o1 <<<"$(origin_counts)"
  [ "$s" = tlsgate ] && m1=$(tlsgate_counts)
  local temp_files=0
  if [ "$s" = nginx ]; then
    temp_files=$(grep -c 'buffered to a temporary file' "$WORK/nginx-error.log" 2>/dev/null || true)
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
  # Every request the client counted must have reached the origin (the +1 is the second status
  # request itself; the proxy may have forwarded requests the client had no time to count).
  local odelta=$((o1 - o0 - 1))
  if [ "$odelta" -lt "$count" ]; then
    errs="${errs:+$errs; }origin served $odelta requests, the client counted $count"
  fi
  if [ "$check" = ok ] && [ -n "$errs" ]; then check="FAIL: $errs"; fi
  if [ "$check" = ok ] && [ "$count" -le 0 ]; then check="FAIL: no request completed"; fi

  local cpu wall per mib rate full resumed
  cpu=$(awk -v a="$((u0 + k0))" -v b="$((u1 + k1))" -v t="$TCK" 'BEGIN { printf "%.2f", (b - a) / t }')
  local user sys conns=$((a1 - a0))
  user=$(awk -v a="$u0" -v b="$u1" -v t="$TCK" 'BEGIN { printf "%.2f", (b - a) / t }')
  sys=$(awk -v a="$k0" -v b="$k1" -v t="$TCK" 'BEGIN { printf "%.2f", (b - a) / t }')
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  per=$(awk -v n="$count" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.0f", n / c; else print 0 }')
  mib=$(awk -v n="$count" -v z="$size" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.1f", n * z / 1048576 / c; else print 0 }')
  rate=$(awk -v n="$count" -v s="$secs" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print 0 }')
  read -r f0 r0 <<<"$m0"
  read -r f1 r1 <<<"$m1"
  full=$((f1 - f0)) resumed=$((r1 - r0))
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  if [[ $check == FAIL* ]]; then
    log "round $round, $s $id: **$check** (see $txt)"
  else
    log "round $round, $s $id: $rate/s, proxy CPU ${cpu}s of ${secs}s, $per req per CPU-s$([ "$fig" = m ] && echo " = $mib MiB per CPU-s"), p50 ${p50}us p99 ${p99}us, load $load"
  fi
  jq -cn --arg id "$id" --arg s "$s" --argjson r "$round" --argjson count "$count" \
    --argjson secs "$secs" --argjson wall "$wall" --argjson rate "$rate" --argjson cpu "$cpu" \
    --argjson per "$per" --argjson mib "$mib" --argjson user "$user" --argjson sys "$sys" --argjson conns "$conns" --argjson p50 "$p50" --argjson p99 "$p99" \
    --argjson origin "$odelta" --argjson full "$full" --argjson resumed "$resumed" \
    --argjson temp "${temp_files:-0}" --arg neg "$neg" --arg load "$load" --arg check "$check" \
    '{id: $id, server: $s, round: $r, count: $count, secs: $secs, wall: $wall, rate: $rate,
      cpu: $cpu, user: $user, sys: $sys, per: $per, mib: $mib, origin_conns: $conns, p50_us: $p50, p99_us: $p99, origin: $origin,
      tlsgate_full: $full, tlsgate_resumed: $resumed, nginx_temp_files: $temp, neg: $neg,
      loadavg: $load, check: $check}' >>"$RESULTS"
}

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  : >"$RESULTS"
  # What was measured: the tree the script ran from and the server binary's hash.
  GW_ID="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown), $(basename "${GATEWAY_BIN:-$BIN}") sha256 $(sha256sum "$GW_BIN" | cut -c1-12)"
  printf 'DURATION=%s\nROUNDS=%s\nSERVERS="%s"\nCELLS="%s"\nPROXY_CPU=%s\nLOAD_CPU=%s\nGW_ID="%s"\n' \
    "$DURATION" "$ROUNDS" "$SERVERS" "$CELLS" "$PROXY_CPU" "$LOAD_CPU" "$GW_ID" >"$WORK/params"
  log "work directory $WORK; proxies on CPU $PROXY_CPU, origin and load on CPU $LOAD_CPU; $ROUNDS rounds of ${DURATION}s per cell"
  # A port already taken would make wait_port find somebody else's server.
  for p in "$ORIGIN_PORT" "$ADMIN" $(for s in "${servers[@]}"; do port_of "$s"; done); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      log "port $p is already in use (another run of this script?)"
      exit 1
    fi
  done
  start_origin
  # Every proxy must answer every size over both protocols with the origin's exact body.
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
    stop_proxy
    if [ -n "$bad" ]; then
      log "$s does not proxy correctly: $bad"
      exit 1
    fi
    log "$s proxies all four sizes over HTTP/1.1 and HTTP/2"
  done
  for round in $(seq 1 "$ROUNDS"); do
    for line in "${selected[@]}"; do
      n=${#servers[@]}
      for i in $(seq 0 $((n - 1))); do
        run_cell "$round" "${servers[$(((i + round - 1) % n))]}" "$line"
      done
    done
  done

  # ---- one profiled run (not counted) ----
  if [ "$PROFILE" = 1 ] && command -v perf >/dev/null 2>&1 && [[ " $SERVERS " == *" tlsgate "* ]]; then
    log "profiling tlsgate in the h2_13 cell (perf record -g, not counted)"
    start_proxy tlsgate
    for line in "${ALL_CELLS[@]}"; do [ "${line%%|*}" = h2_13 ] && pline=$line; done
    IFS='|' read -r _ _ ptool ppath _ pargs _ <<<"$pline"
    run_load "$ptool" "https://127.0.0.1:$(port_of tlsgate)$ppath" "$pargs" >"$WORK/profile-load.txt" &
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
  stop_pid "$ORIGIN_PID"
  ORIGIN_PID=""
fi

# ---- tables ---------------------------------------------------------------------------------
ids=()
for line in "${selected[@]}"; do ids+=("${line%%|*}"); done
labels=$(for line in "${selected[@]}"; do IFS='|' read -r id label tool path size args fig <<<"$line"; \
  jq -cn --arg id "$id" --arg lab "$label" --arg tool "$tool" --arg args "$args" --arg fig "$fig" \
  '{id: $id, label: $lab, tool: $tool, args: $args, fig: $fig}'; done | jq -s .)
servers_json=$(printf '%s\n' "${servers[@]}" | jq -R . | jq -s .)

JQ_COMMON='
  def median: sort | if length == 0 then null else .[(length - 1) / 2 | floor] end;
  def name: {"tlsgate": "tlsgate", "nginx": "nginx", "haproxy": "HAProxy"}[.] // .;
  def k: if . == null then "—" elif . >= 10000 then "\(. / 1000 | round)k"
         elif . >= 100 then "\(. | round)" else "\(. * 10 | round / 10)" end;
  def us: if . == null or . < 0 then "—" elif . >= 1000 then "\(. / 10 | round / 100) ms" else "\(. | round) µs" end;
  . as $runs
  | def runs($id; $s): $runs | map(select(.id == $id and .server == $s));
    def ok($id; $s): runs($id; $s) | map(select(.check | startswith("ok")));
    def failed($id; $s): runs($id; $s) | map(select(.check | startswith("ok") | not));
'
echo
echo "### Proxy path: work per proxy CPU-second"
echo
loads=$(jq -rs 'map(.loadavg | tonumber) | "\(min)–\(max)"' "$RESULTS")
echo "Each proxy alone, 1 worker pinned to CPU $PROXY_CPU; origin (nginx, 1 worker) and load generator pinned to CPU $LOAD_CPU; $ROUNDS interleaved rounds of ${DURATION} s, median shown (tlsgate: ${GW_ID:-?}; 1-minute load average during the runs $loads). Figure: requests (or MiB of response body) ÷ proxy CPU seconds (utime+stime, /proc). Higher is better; \`tlsgate ÷ best peer\` > 1 means tlsgate does more per CPU-second than the better of nginx and HAProxy. Latency rows: lower is better, and the ratio is tlsgate ÷ the lower peer (> 1: tlsgate slower)."
echo
hdr="| cell | load | figure |"
sep="|---|---|---|"
for s in "${servers[@]}"; do
  hdr="$hdr $(jq -rn --arg s "$s" '{"tlsgate": "tlsgate", "nginx": "nginx", "haproxy": "HAProxy"}[$s] // $s') |"
  sep="$sep---:|"
done
echo "$hdr tlsgate ÷ best peer |"
echo "$sep---:|"
jq -rs --argjson cells "$labels" --argjson servers "$servers_json" "$JQ_COMMON"'
  $cells[] as $c
  | ($servers | map(. as $s | {s: $s, f: failed($c.id; $s) | length, n: runs($c.id; $s) | length,
       v: (ok($c.id; $s) | map(if $c.fig == "m" then .mib else .per end) | median)})) as $row
  | ($row | map(select(.s == "tlsgate")) | .[0]) as $t
  | ($row | map(select(.s != "tlsgate" and .f == 0 and .v != null)) | max_by(.v)) as $best
  | "| \($c.label) | \($c.tool | if . == "h2" then "h2load" else . end) \($c.args | gsub("Connection:close"; "\u0027Connection: close\u0027")) | \(if $c.fig == "m" then "MiB per CPU-s" else "req per CPU-s" end) | "
    + ($row | map(if .n == 0 then "—" elif .f > 0 then "**FAIL** (\(.f)/\(.n))" else (.v | k) end) | join(" | "))
    + " | "
    + (if ($row | any(.f > 0)) then "— (a run failed)"
       elif $t == null or $t.v == null or $best == null then "—"
       else "**\($t.v / $best.v * 100 | round / 100)×** (\($best.s | name))" end) + " |",
    (if $c.id == "lat" then
       ("p50_us", "p99_us") as $q
       | ($servers | map(. as $s | {s: $s, f: failed($c.id; $s) | length, n: runs($c.id; $s) | length,
            v: (ok($c.id; $s) | map(.[$q]) | median)})) as $lrow
       | ($lrow | map(select(.s == "tlsgate")) | .[0]) as $lt
       | ($lrow | map(select(.s != "tlsgate" and .f == 0 and .v != null)) | min_by(.v)) as $lbest
       | "| \($c.label) | wrk -t1 -c1 --latency | \($q | sub("_us"; "")) latency | "
         + ($lrow | map(if .n == 0 then "—" elif .f > 0 then "**FAIL**" else (.v | us) end) | join(" | "))
         + " | "
         + (if ($lrow | any(.f > 0)) then "— (a run failed)"
            elif $lt == null or $lt.v == null or $lbest == null then "—"
            else "\($lt.v / $lbest.v * 100 | round / 100)× (\($lbest.s | name))" end) + " |"
     else empty end)
' "$RESULTS"

echo
echo "### Rates, CPU used and latency (medians)"
echo
echo "rate = requests/s seen by the generator; proxy CPU = proxy CPU-s ÷ run seconds (1.00 = its core saturated); user = the user-space share of that CPU time (the rest is the kernel); origin conns = connections the origin accepted per 1,000 requests (pool churn: 0 when the proxy reuses its idle connections; the close cell reuses them too); p50/p99 from wrk's latency distribution (h2load reports none)."
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
nfail=$(jq -s 'map(select(.check | startswith("ok") | not)) | length' "$RESULTS")
log "raw results in $WORK (results.jsonl, <server>-<cell>-<round>.txt, perf-report.txt)"
if [ "$nfail" -gt 0 ]; then
  log "$nfail run(s) FAILED (see the tables' notes); their figures are not used"
  exit 1
fi
