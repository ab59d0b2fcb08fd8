#!/usr/bin/env bash
# Delegated credentials (RFC 9345; issue #21 part 2; docs/BENCHMARKS.md "Delegated
# credentials"): what a keyless full TLS 1.3 handshake costs with and without a credential.
#
# One gateway (1 worker, CPU 0) serves an ECDSA P-256 certificate with the DelegationUsage
# extension through a key server (CPU 1) that issues credentials. The client is NSS's tstclnt
# (the one available client that offers delegated credentials; `-B`), one process per
# handshake, on CPU 1. Rounds interleave the two modes on the same gateway:
#   dc       tstclnt -B: the gateway signs with the credential's key, no key-server request;
#   keyless  tstclnt:    the key server signs (the usual keyless handshake).
# Per mode: the gateway's mean handshake time (tlsgate_handshake_duration_seconds, sum/count:
# accept to handshake done, so it includes the client's own work and one loopback round trip),
# gateway CPU per handshake, key-server CPU per handshake and its signature count.
# Then a saturating load beside it (LEAN_DURATION > 0): `tlsgate bench --lean` (its own TLS 1.3
# handshake, the one tlsgate client that offers credentials: `--delegated-credentials`), 8
# connections on CPU 1, the same two modes interleaved: handshakes per gateway CPU-second.
#
#   scripts/delegation-bench.sh             # ~1 minute
#   N=500 ROUNDS=5 KS_RTT_MS=2 scripts/delegation-bench.sh
#
# Environment: N (300) handshakes per mode and round, ROUNDS (3), LEAN_DURATION (3 s per mode
# and round of the saturating load; 0: none), KS_RTT_MS (0: the key server
# on loopback; more puts a Python proxy between gateway and key server that holds each chunk
# half that long in each direction, a key server that far away), WORK (a new
# /tmp/tlsgate-delegation.* directory, kept).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
N=${N:-300}
ROUNDS=${ROUNDS:-3}
LEAN_DURATION=${LEAN_DURATION:-3}
KS_RTT_MS=${KS_RTT_MS:-0}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-delegation.XXXXXX)}
KS_PORT=${KS_PORT:-39417}
KS_ADMIN=${KS_ADMIN:-39418}
KS_PROXY=${KS_PROXY:-39419}
GW_PORT=${GW_PORT:-39453}
GW_ADMIN=${GW_ADMIN:-39454}
BENCH_NAME=delegation-bench
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
bench_install_missing tstclnt:libnss3-tools certutil:libnss3-tools bc:bc curl:curl taskset:util-linux \
  openssl:openssl python3:python3
BUILD=${BUILD:-1} bench_build_tlsgate target/release/tlsgate
bench_copy_gateway target/release/tlsgate
BIN=$GW_BIN

# ---- PKI: a CA, the key server's and the gateway's certificates, the site's DC certificate ----
cd "$WORK"
ossl() { openssl "$@" 2>/dev/null; }
ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj /CN=bench-ca \
  -keyout ca.key -out ca.pem
issue() { # name ext
  ossl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$1" -keyout "$1.key" -out "$1.csr"
  printf '%s\n' "$2" >"$1.ext"
  ossl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -extfile "$1.ext" -out "$1.pem"
}
SERVER_EXT=$'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature'
issue keyserver "$SERVER_EXT"
issue gateway $'extendedKeyUsage=clientAuth'
# DelegationUsage (1.3.6.1.4.1.44363.44), its value a DER NULL.
issue site "$SERVER_EXT"$'\n1.3.6.1.4.1.44363.44=DER:0500'
mkdir -p keys nssdb && mv site.key keys/
certutil -N -d "sql:$WORK/nssdb" --empty-password
certutil -A -d "sql:$WORK/nssdb" -n bench-ca -t C,, -i ca.pem
printf 'GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >request
cd "$ROOT"

cat >"$WORK/keyserver.toml" <<EOF
listen = "127.0.0.1:$KS_PORT"
admin = "127.0.0.1:$KS_ADMIN"
keys = ["$WORK/keys"]
certificate = "$WORK/keyserver.pem"
key = "$WORK/keyserver.key"
client_ca = "$WORK/ca.pem"
workers = 1
log_level = "warn"
[delegation]
enabled = true
max_validity = "1d"
EOF
cat >"$WORK/gateway.toml" <<EOF
[server]
workers = 1
[log]
level = "warn"
access_log = false
[admin]
listen = "127.0.0.1:$GW_ADMIN"
[[listener]]
listen = "127.0.0.1:$GW_PORT"
[keyless]
client_certificate = "$WORK/gateway.pem"
client_key = "$WORK/gateway.key"
server_ca = "$WORK/ca.pem"
[keyless.delegated_credentials]
enabled = true
[[site]]
name = "bench"
server_names = ["localhost"]
default = true
[[site.certificate]]
chain = "$WORK/site.pem"
key_servers = ["127.0.0.1:$( [ "$KS_RTT_MS" = 0 ] && echo "$KS_PORT" || echo "$KS_PROXY")"]
[[site.route]]
fixed_response = { body = "Hello, world!" }
EOF
taskset -c 1 "$BIN" keyserver --config "$WORK/keyserver.toml" >"$WORK/keyserver.log" 2>&1 &
KS_PID=$!
GW_PID=
PX_PID=
trap 'bench_stop_pid "$GW_PID"; bench_stop_pid "$KS_PID"; bench_stop_pid "$PX_PID"' EXIT
bench_wait_port "$KS_PORT" || { cat "$WORK/keyserver.log" >&2; exit 1; }
if [ "$KS_RTT_MS" != 0 ]; then
  # A key server KS_RTT_MS away: every chunk waits half of it in each direction (order kept).
  taskset -c 1 python3 - "$KS_PROXY" "$KS_PORT" "$KS_RTT_MS" >"$WORK/proxy.log" 2>&1 <<'PY' &
import asyncio, sys
listen, upstream, rtt = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000
async def pump(reader, writer):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()
    async def send():
        while (item := await queue.get()) is not None:
            due, data = item
            await asyncio.sleep(max(0, due - loop.time()))
            writer.write(data)
            await writer.drain()
        writer.close()
    sender = asyncio.create_task(send())
    while data := await reader.read(65536):
        queue.put_nowait((loop.time() + rtt / 2, data))
    queue.put_nowait(None)
    await sender
async def handle(cr, cw):
    ur, uw = await asyncio.open_connection("127.0.0.1", upstream)
    await asyncio.gather(pump(cr, uw), pump(ur, cw), return_exceptions=True)
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()
asyncio.run(main())
PY
  PX_PID=$!
  bench_wait_port "$KS_PROXY" || { cat "$WORK/proxy.log" >&2; exit 1; }
fi
taskset -c 0 "$BIN" serve --config "$WORK/gateway.toml" >"$WORK/gateway.log" 2>&1 &
GW_PID=$!
bench_wait_port "$GW_PORT" || { cat "$WORK/gateway.log" >&2; exit 1; }
metric() { # port name [label filter]
  curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" -v f="${3:-}" \
    '$1 ~ "^"n"({|$)" && index($1, f) { s += $NF } END { printf "%.9f\n", s }'
}
for _ in $(seq 1 100); do
  [ "$(metric "$GW_ADMIN" tlsgate_delegated_credential_expiry_seconds)" != 0.000000000 ] && break
  sleep 0.1
done
[ "$(metric "$GW_ADMIN" tlsgate_delegated_credential_expiry_seconds)" != 0.000000000 ] ||
  { log "no credential issued"; cat "$WORK/gateway.log" >&2; exit 1; }

TCK=$(getconf CLK_TCK)
handshakes() { # dc|keyless
  local flag=() ok=0
  [ "$1" = dc ] && flag=(-B)
  for _ in $(seq 1 "$N"); do
    taskset -c 1 tstclnt -h 127.0.0.1 -p "$GW_PORT" -a localhost -d "sql:$WORK/nssdb" -V tls1.3:tls1.3 \
      -A "$WORK/request" "${flag[@]}" 2>/dev/null | grep -q 'Hello, world!' && ok=$((ok + 1))
  done
  echo "$ok"
}
declare -A ROWS=()
for r in $(seq 1 "$ROUNDS"); do
  for mode in dc keyless; do
    hs0=$(metric "$GW_ADMIN" tlsgate_handshake_duration_seconds_sum)
    hc0=$(metric "$GW_ADMIN" tlsgate_handshake_duration_seconds_count)
    ops0=$(metric "$KS_ADMIN" tlsgate_keyserver_operations_total)
    g0=$(bench_cpu_total "$GW_PID")
    k0=$(bench_cpu_total "$KS_PID")
    ok=$(handshakes "$mode")
    g1=$(bench_cpu_total "$GW_PID")
    k1=$(bench_cpu_total "$KS_PID")
    hs1=$(metric "$GW_ADMIN" tlsgate_handshake_duration_seconds_sum)
    hc1=$(metric "$GW_ADMIN" tlsgate_handshake_duration_seconds_count)
    ops1=$(metric "$KS_ADMIN" tlsgate_keyserver_operations_total)
    count=$(echo "$hc1 - $hc0" | bc -l)
    row=$(echo "($hs1 - $hs0) / $count * 1000000; ($g1 - $g0) / $TCK / $count * 1000000; ($k1 - $k0) / $TCK / $count * 1000000; ($ops1 - $ops0) / $count" |
      bc -l | tr '\n' ' ')
    ROWS[$mode]+="$row $ok"$'\n'
    log "round $r $mode: mean µs, gateway CPU µs, key-server CPU µs, signatures per handshake, served: $row $ok/$N"
  done
done

echo "## Keyless full TLS 1.3 handshakes with and without a delegated credential"
echo
echo "NSS tstclnt (one process per handshake, CPU 1), gateway on CPU 0, key server on CPU 1"
echo "(key-server round trip: loopback + $KS_RTT_MS ms);"
echo "$N handshakes per mode and round, $ROUNDS interleaved rounds, medians."
echo
echo "| mode | gateway mean handshake µs | gateway CPU µs / handshake | key-server CPU µs / handshake | key-server signatures / handshake | served |"
echo "|---|---|---|---|---|---|"
for mode in dc keyless; do
  col() { echo "${ROWS[$mode]}" | awk -v c="$1" 'NF { print $c }' | bench_median; }
  served=$(echo "${ROWS[$mode]}" | awk 'NF { s += $5 } END { print s }')
  printf '| %s | %.0f | %.0f | %.0f | %.2f | %s / %s |\n' "$mode" "$(col 1)" "$(col 2)" "$(col 3)" "$(col 4)" \
    "$served" "$((N * ROUNDS))"
done

[ "$LEAN_DURATION" -gt 0 ] || exit 0
declare -A LEAN=()
for r in $(seq 1 "$ROUNDS"); do
  for mode in dc keyless; do
    flag=()
    [ "$mode" = dc ] && flag=(--delegated-credentials)
    ops0=$(metric "$KS_ADMIN" tlsgate_keyserver_operations_total)
    g0=$(bench_cpu_total "$GW_PID")
    k0=$(bench_cpu_total "$KS_PID")
    taskset -c 1 "$BIN" bench --lean "${flag[@]}" -c 8 -d "${LEAN_DURATION}s" --sni localhost \
      --json "$WORK/lean-$mode-$r.json" "https://127.0.0.1:$GW_PORT/" >"$WORK/lean-$mode-$r.txt"
    g1=$(bench_cpu_total "$GW_PID")
    k1=$(bench_cpu_total "$KS_PID")
    ops1=$(metric "$KS_ADMIN" tlsgate_keyserver_operations_total)
    read -r hs errs dcs < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(s["handshakes"], s["errors_total"], s["sigalgs"].get("ecdsa_secp256r1_sha256 (delegated credential)", 0))' \
      "$WORK/lean-$mode-$r.json")
    row=$(echo "$hs / (($g1 - $g0) / $TCK); ($k1 - $k0) / $TCK / $hs * 1000000; ($ops1 - $ops0) / $hs; ($g1 - $g0) / $TCK / $LEAN_DURATION" |
      bc -l | tr '\n' ' ')
    LEAN[$mode]+="$row $dcs $hs $errs"$'\n'
    log "lean round $r $mode: handshakes per gateway CPU-s, key-server CPU µs per handshake, signatures per handshake, gateway busy: $row (credential $dcs of $hs, errors $errs)"
  done
done
echo
echo "## Saturating: \`tlsgate bench --lean [--delegated-credentials] -c 8 -d ${LEAN_DURATION}s\` (CPU 1)"
echo
echo "| mode | handshakes per gateway CPU-second | gateway busy | key-server CPU µs / handshake | key-server signatures / handshake | signed with the credential |"
echo "|---|---|---|---|---|---|"
for mode in dc keyless; do
  col() { echo "${LEAN[$mode]}" | awk -v c="$1" 'NF { print $c }' | bench_median; }
  dcs=$(echo "${LEAN[$mode]}" | awk 'NF { d += $5; h += $6 } END { print d " of " h }')
  printf '| %s | %.0f | %.0f %% | %.0f | %.2f | %s |\n' "$mode" "$(col 1)" "$(echo "$(col 4) * 100" | bc -l)" "$(col 2)" "$(col 3)" "$dcs"
done
