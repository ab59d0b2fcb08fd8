#!/usr/bin/env bash
# Keyless TLS benchmarks (issue #6; docs/BENCHMARKS.md "Keyless"), on two cores:
#   1. key-server signing rate vs `openssl speed` (ECDSA P-256, RSA-2048), both on CPU 0:
#      signatures per key-server CPU-second and per wall second;
#   2. "batching": the same with 1, 8 and 64 signatures in flight (frame coalescing is the only
#      batching BoringSSL allows: it has no multi-signature primitive);
#   3. gateway CPU per full handshake (RSA-2048 certificate), local key vs keyless;
#   4. handshake latency at moderate load (--rate), local key vs keyless.
# Gateway and key server under test on CPU 0, load (and the helper key server of 3/4) on CPU 1.
#
#   scripts/keyless-bench.sh                # ~3 minutes
#   SECS=10 RATE=300 scripts/keyless-bench.sh
#
# Environment: SECS (5) per measurement, RATE (200) handshakes/s for 4, ROUNDS (3),
# KS_LATENCY_CPU (1: the key server's core for 4; 0 puts it next to the gateway),
# PARTS ("sign cpu latency": which of 1+2, 3, 4 to run), WORK (a new /tmp/tlsgate-keyless.*
# directory, kept).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECS=${SECS:-5}
RATE=${RATE:-200}
ROUNDS=${ROUNDS:-3}
PARTS=${PARTS:-"sign cpu latency"}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-keyless.XXXXXX)}
part() { [[ " $PARTS " == *" $1 "* ]]; }
KS_PORT=${KS_PORT:-39407}
GW_PORT=${GW_PORT:-39443}
BENCH_NAME=keyless-bench
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
need=()
command -v jq >/dev/null 2>&1 || need+=(jq)
command -v bc >/dev/null 2>&1 || need+=(bc)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v taskset >/dev/null 2>&1 || need+=(util-linux)
((${#need[@]})) && tlsgate_install_packages "${need[@]}"
log "building (release)"
cargo build --release -p tlsgate -p tlsgate-keyless --example keyless_load >&2
cp target/release/tlsgate target/release/examples/keyless_load "$WORK/"
BIN=$WORK/tlsgate
LOAD=$WORK/keyless_load

# ---- PKI: a CA, the key server's and the gateway's certificates, ECDSA and RSA site keys ----
cd "$WORK"
ossl() { openssl "$@" 2>/dev/null; }
ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj /CN=bench-ca \
  -keyout ca.key -out ca.pem
issue() { # name keyalg-args ext
  ossl req -newkey "${@:2:$#-2}" -nodes -subj "/CN=$1" -keyout "$1.key" -out "$1.csr"
  printf '%s\n' "${!#}" >"$1.ext"
  ossl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -extfile "$1.ext" -out "$1.pem"
}
SERVER_EXT=$'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth'
issue keyserver ec -pkeyopt ec_paramgen_curve:prime256v1 "$SERVER_EXT"
issue gateway ec -pkeyopt ec_paramgen_curve:prime256v1 $'extendedKeyUsage=clientAuth'
issue site-ecdsa ec -pkeyopt ec_paramgen_curve:prime256v1 "$SERVER_EXT"
issue site-rsa rsa:2048 "$SERVER_EXT"
mkdir -p keys && cp site-ecdsa.key site-rsa.key keys/
cd "$ROOT"

TCK=$(getconf CLK_TCK)
KS_PID=
start_keyserver() { # cpu
  cat >"$WORK/keyserver.toml" <<EOF
listen = "127.0.0.1:$KS_PORT"
keys = ["$WORK/keys"]
certificate = "$WORK/keyserver.pem"
key = "$WORK/keyserver.key"
client_ca = "$WORK/ca.pem"
workers = 1
log_level = "warn"
EOF
  taskset -c "$1" "$BIN" keyserver --config "$WORK/keyserver.toml" >"$WORK/keyserver.log" 2>&1 &
  KS_PID=$!
  bench_wait_port "$KS_PORT" || { cat "$WORK/keyserver.log" >&2; exit 1; }
}
GW_PID=
trap 'bench_stop_pid "$KS_PID"; bench_stop_pid "$GW_PID"' EXIT

# ---- 1 + 2: signing rate ---------------------------------------------------------------------
if part sign; then
echo "## Key server signing rate vs openssl speed (CPU 0; load on CPU 1; medians of $ROUNDS)"
echo
echo "| algorithm | openssl speed sign/s (1 core) | in flight | key server sig/s (wall) | per key-server CPU-s | ratio (per CPU-s) | p50 / p99 µs |"
echo "|---|---|---|---|---|---|---|"
start_keyserver 0
for alg in ecdsa_secp256r1_sha256 rsa_pss_rsae_sha256; do
  case $alg in
    ecdsa*) cert=site-ecdsa.pem speed=ecdsap256 ;;
    *) cert=site-rsa.pem speed=rsa2048 ;;
  esac
  # "256 bits ecdsa (nistp256)   0.0000s   0.0001s  39111.0  13397.0": sign/s follows the two times.
  ref=$(for _ in $(seq "$ROUNDS"); do
    taskset -c 0 openssl speed -seconds "$SECS" "$speed" 2>/dev/null | awk '
      /nistp256|^rsa 2048 bits/ { n = 0; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+s$/ && ++n == 2) { print $(i + 1); exit } }'
  done | bench_median)
  for inflight in 1 8 64; do
    rows=$(for _ in $(seq "$ROUNDS"); do
      t0=$(bench_cpu_total "$KS_PID")
      out=$(taskset -c 1 "$LOAD" --server "127.0.0.1:$KS_PORT" --cert "$WORK/$cert" --client-cert "$WORK/gateway.pem" \
        --client-key "$WORK/gateway.key" --server-ca "$WORK/ca.pem" --alg "$alg" --inflight "$inflight" --secs "$SECS")
      t1=$(bench_cpu_total "$KS_PID")
      echo "$out" | jq -r --argjson cpu "$(echo "($t1 - $t0) / $TCK" | bc -l)" \
        '"\(.per_sec) \(.signatures / $cpu) \(.p50_us) \(.p99_us) \(.errors)"'
    done)
    wall=$(echo "$rows" | awk '{print $1}' | bench_median)
    percpu=$(echo "$rows" | awk '{print $2}' | bench_median)
    p50=$(echo "$rows" | awk '{print $3}' | bench_median)
    p99=$(echo "$rows" | awk '{print $4}' | bench_median)
    errs=$(echo "$rows" | awk '{s += $5} END {print s}')
    printf '| %s | %.0f | %s | %.0f | %.0f | %.2f | %s / %s%s |\n' "$alg" "$ref" "$inflight" "$wall" "$percpu" \
      "$(echo "$percpu / $ref" | bc -l)" "$p50" "$p99" "$([ "$errs" = 0 ] || echo " ($errs errors)")"
  done
done
bench_stop_pid "$KS_PID"
KS_PID=
echo
fi

# ---- 3 + 4: the gateway's side ----------------------------------------------------------------
gateway_config() { # mode: local | keyless
  local certline
  if [ "$1" = local ]; then
    certline="key = \"$WORK/site-rsa.key\""
  else
    certline="key_servers = [\"127.0.0.1:$KS_PORT\"]"
  fi
  cat <<EOF
[server]
workers = 1
[log]
level = "warn"
access_log = false
[[listener]]
listen = "127.0.0.1:$GW_PORT"
[keyless]
client_certificate = "$WORK/gateway.pem"
client_key = "$WORK/gateway.key"
server_ca = "$WORK/ca.pem"
[[site]]
name = "bench"
server_names = ["localhost"]
default = true
[[site.certificate]]
chain = "$WORK/site-rsa.pem"
$certline
[[site.route]]
fixed_response = { body = "Hello, world!" }
EOF
}
start_gateway() { # mode
  gateway_config "$1" >"$WORK/gateway-$1.toml"
  taskset -c 0 "$BIN" serve --config "$WORK/gateway-$1.toml" >"$WORK/gateway-$1.log" 2>&1 &
  GW_PID=$!
  bench_wait_port "$GW_PORT" || { cat "$WORK/gateway-$1.log" >&2; exit 1; }
  sleep 0.5
}
bench() { # json args...
  local json=$1
  shift
  taskset -c 1 "$BIN" bench --sni localhost --tls 1.3 --groups X25519 --handshake-only --no-ticket --no-session-id \
    --json "$json" "$@" "https://127.0.0.1:$GW_PORT/" >/dev/null 2>&1
}
start_keyserver 1
if part cpu; then
echo "## Gateway CPU per full TLS 1.3 handshake, RSA-2048 certificate (gateway on CPU 0)"
echo
echo "| mode | handshakes/s | per gateway CPU-s | gateway CPU µs per handshake | failed |"
echo "|---|---|---|---|---|"
declare -A CPU_US=()
for mode in local keyless; do
  start_gateway "$mode"
  bench "$WORK/warm.json" -n 20 -c 1
  rows=$(for r in $(seq "$ROUNDS"); do
    t0=$(bench_cpu_total "$GW_PID")
    bench "$WORK/cpu-$mode-$r.json" -c 16 -d "$SECS"
    t1=$(bench_cpu_total "$GW_PID")
    jq -r --argjson cpu "$(echo "($t1 - $t0) / $TCK" | bc -l)" \
      '"\(.handshakes_per_s) \(.handshakes / $cpu) \($cpu * 1000000 / .handshakes) \(.errors_total)"' "$WORK/cpu-$mode-$r.json"
  done)
  rate=$(echo "$rows" | awk '{print $1}' | bench_median)
  percpu=$(echo "$rows" | awk '{print $2}' | bench_median)
  us=$(echo "$rows" | awk '{print $3}' | bench_median)
  errs=$(echo "$rows" | awk '{s += $4} END {print s}')
  CPU_US[$mode]=$us
  printf '| %s | %.0f | %.0f | %.0f | %s |\n' "$mode" "$rate" "$percpu" "$us" "$errs"
  bench_stop_pid "$GW_PID"
  GW_PID=
done
printf '\nKeyless / local gateway CPU per handshake: **%.2f** (target ≤ 0.50)\n\n' \
  "$(echo "${CPU_US[keyless]} / ${CPU_US[local]}" | bc -l)"
fi

if part latency; then
if [ "${KS_LATENCY_CPU:-1}" != 1 ]; then
  bench_stop_pid "$KS_PID"
  start_keyserver "$KS_LATENCY_CPU"
fi
echo "## Handshake latency at $RATE handshakes/s (TLS 1.3, RSA-2048; medians of $ROUNDS)"
echo
echo "| mode | handshake p50 µs | p99 µs |"
echo "|---|---|---|"
declare -A P50=() P99=()
for mode in local keyless; do
  start_gateway "$mode"
  bench "$WORK/warm.json" -n 20 -c 1
  rows=$(for r in $(seq "$ROUNDS"); do
    bench "$WORK/lat-$mode-$r.json" -c 8 -d "$SECS" --rate "$RATE"
    jq -r '"\(.latency_us.handshake.p50) \(.latency_us.handshake.p99)"' \
      "$WORK/lat-$mode-$r.json"
  done)
  P50[$mode]=$(echo "$rows" | awk '{print $1}' | bench_median)
  P99[$mode]=$(echo "$rows" | awk '{print $2}' | bench_median)
  printf '| %s | %s | %s |\n' "$mode" "${P50[$mode]}" "${P99[$mode]}"
  bench_stop_pid "$GW_PID"
  GW_PID=
done
printf '\nAdded by keyless: p50 **%s µs** (target < 150), p99 **%s µs** (target < 1000)\n' \
  "$(echo "${P50[keyless]} - ${P50[local]}" | bc)" "$(echo "${P99[keyless]} - ${P99[local]}" | bc)"
fi
echo
echo "Work directory (configs, logs, JSON): $WORK"
