#!/usr/bin/env bash
# What a rate limit costs the keep-alive fast path (issue 28, part 2): the same tlsgate binary,
# one worker pinned to one core, serves the HTTP/1.1 keep-alive cell (wrk -t1 -c32, pinned to
# another core, 13-byte answers) with no limit and with a generous per-address limit on the
# route (never reached, so every request is counted and allowed). Figure: requests per gateway
# CPU-second (from /proc), median of interleaved rounds, and the ratio limited / none.
#
#   scripts/rate-limit-bench.sh                 # ~1 minute
#   DURATION=5 ROUNDS=7 UPSTREAM=1 scripts/rate-limit-bench.sh
#
# Environment: DURATION (4 s a run), ROUNDS (5), PROXY_CPU (0), LOAD_CPU (1), WORK (a new
# /tmp/tlsgate-rl.*), GATEWAY_BIN (target/release/tlsgate), UPSTREAM=1: proxy to a plain nginx
# origin instead of answering a fixed response (proxy-compare.sh's h1_13 cell).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-4}
ROUNDS=${ROUNDS:-5}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
UPSTREAM=${UPSTREAM:-0}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-rl.XXXXXX)}
BIN=$PWD/target/release/tlsgate
BENCH_NAME=rate-limit-bench
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
PORT=19753 ADMIN=19754 ORIGIN=19755
bench_install_missing wrk:wrk openssl:openssl curl:curl
[ "$UPSTREAM" = 0 ] || bench_install_missing nginx:nginx-light
bench_build_tlsgate "$BIN"
bench_copy_gateway "$BIN"
bench_mint_certificate "tlsgate rate-limit bench CA"
bench_raise_nofile
bench_ports_free $PORT $ADMIN $ORIGIN

if [ "$UPSTREAM" = 1 ]; then
  cat >"$WORK/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $WORK/nginx.pid; error_log $WORK/nginx-error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 100000;
  server { listen 127.0.0.1:$ORIGIN; location / { default_type text/plain; return 200 "hello, world\n"; } } }
NGINX
  taskset -c "$LOAD_CPU" nginx -c "$WORK/nginx.conf" -p "$WORK" &
  ORIGIN_PID=$!
  trap 'kill $ORIGIN_PID 2>/dev/null || true' EXIT
  bench_wait_port $ORIGIN
  ACTION="upstream = \"origin\""
  UPSTREAM_TOML="[[upstream]]
name = \"origin\"
servers = [\"127.0.0.1:$ORIGIN\"]"
  PATH_=/13
else
  ACTION='fixed_response = { body = "hello, world\n" }'
  UPSTREAM_TOML=
  PATH_=/
fi

config() { # with-limit (0/1)
  local limit="" table=""
  if [ "$1" = 1 ]; then
    limit='rate_limit = "per-client"'
    table='[[rate_limit]]
name = "per-client"
requests = 100000000
window = "1s"'
  fi
  cat <<TOML
[server]
workers = 1
[admin]
listen = "127.0.0.1:$ADMIN"
[log]
access_log = false
[[listener]]
listen = "127.0.0.1:$PORT"
[[site]]
name = "bench"
server_names = ["localhost"]
[[site.certificate]]
chain = "$WORK/leaf.pem"
key = "$WORK/leaf.key"
[[site.route]]
path_prefix = "/"
$ACTION
$limit
$UPSTREAM_TOML
$table
TOML
}
config 0 >"$WORK/none.toml"
config 1 >"$WORK/limited.toml"

run() { # variant round
  local conf=$WORK/$1.toml pid t0 t1 out reqs ticks
  taskset -c "$PROXY_CPU" "$GW_BIN" serve --config "$conf" >"$WORK/$1-$2.log" 2>&1 &
  pid=$!
  bench_wait_port $PORT
  curl -sf --cacert "$WORK/ca.pem" "https://localhost:$PORT$PATH_" >/dev/null || { log "curl check failed ($1)"; kill "$pid"; exit 1; }
  t0=$(bench_cpu_total $pid)
  out=$(taskset -c "$LOAD_CPU" wrk -t1 -c32 -d"${DURATION}s" "https://localhost:$PORT$PATH_")
  t1=$(bench_cpu_total $pid)
  kill "$pid"; wait "$pid" 2>/dev/null || true
  if grep -q "Non-2xx\|Socket errors" <<<"$out"; then log "FAIL $1: $out"; exit 1; fi
  reqs=$(awk '/requests in/{print $1}' <<<"$out")
  ticks=$((t1 - t0))
  echo "$1 $2 $reqs $ticks $(awk -v r="$reqs" -v t="$ticks" -v k="$TCK" 'BEGIN{printf "%.0f", r/(t/k)}')" | tee -a "$WORK/results.txt" >&2
}
: >"$WORK/results.txt"
for r in $(seq 1 "$ROUNDS"); do
  if ((r % 2)); then run none "$r"; run limited "$r"; else run limited "$r"; run none "$r"; fi
done
none=$(awk '$1=="none"{print $5}' "$WORK/results.txt" | bench_median)
limited=$(awk '$1=="limited"{print $5}' "$WORK/results.txt" | bench_median)
echo "| variant | requests per gateway CPU-second (median of $ROUNDS) |"
echo "|---|---|"
echo "| no limit | $none |"
echo "| per-address limit (generous) | $limited |"
awk -v a="$limited" -v b="$none" 'BEGIN{printf "ratio limited / none: %.3f\n", a/b}'
