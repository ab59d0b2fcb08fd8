#!/usr/bin/env bash
# HTTP/3 per server CPU-second: tlsgate against Caddy (issue 19), with load from clients tlsgate
# did not write: quic-go's HTTP/3 client (scripts/h3/h3load, built here with `go build`) and
# h2load for the HTTP/2 reference row. Each server alone, one worker / GOMAXPROCS=1 pinned to
# SERVER_CPU, the load on LOAD_CPU; interleaved rounds; the figure is requests answered 200 per
# CPU-second of the server's process (utime + stime from /proc).
#
#   scripts/h3-compare.sh                         # every cell, 3 rounds of 5 s
#   CELLS="h3_13 h3_new" ROUNDS=5 scripts/h3-compare.sh
#
# Cells:
#   h3_13    HTTP/3, 16 QUIC connections × 4 requests at a time, 13 B    h3load -c 16 -m 4
#   h3_new   HTTP/3, a new QUIC connection (full handshake) per request h3load -new -c 8
#   h2_13    HTTP/2 over TCP, 16 conn × 10 streams, 13 B (reference)    h2load -t1 -c16 -m10
#   h3_own   h3_13 with tlsgate's own client, beside the figures of record (its client core
#            is less of a limit than quic-go's)                        tlsgate bench --h3 -c 16 -m 4
#   h3_1m    HTTP/3, 1 MiB responses, 4 connections × 1 request       h3load -c 4 -m 1
#            (the figure is MiB per CPU-second: the UDP datapath, GSO)
#   h2_1m    HTTP/2 over TCP, 1 MiB responses, 4 connections (reference) h2load -t1 -c4 -m1
#
# A/B of two tlsgate builds: ALT_BIN=/path/to/other/tlsgate (ALT_LABEL names it) adds the server
# "tlsgate_alt" to the rounds and a table of tlsgate ÷ tlsgate_alt. ALT_HTTP3='congestion_control =
# "cubic"' (lines for its [http3] section) runs tlsgate_alt with that configuration instead (the
# measured binary unless ALT_BIN names another).
#
# Environment: SERVERS ("tlsgate caddy", plus tlsgate_alt with ALT_BIN), CELLS (all), ROUNDS (3), DURATION (5 s),
# SERVER_CPU (0), LOAD_CPU (1), PORT (19843, TCP and UDP), ADMIN (19844), GATEWAY_BIN (the
# tlsgate binary measured; default target/release/tlsgate, built when missing), WORK (a new
# temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=h3-compare
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh

ALT_BIN=${ALT_BIN:-}
ALT_HTTP3=${ALT_HTTP3:-}
ALT_LABEL=${ALT_LABEL:-${ALT_HTTP3:-alt}}
HAS_ALT=${ALT_BIN:-$ALT_HTTP3}
SERVERS=${SERVERS:-"tlsgate${HAS_ALT:+ tlsgate_alt} caddy"}
CELLS=${CELLS:-all}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
PORT=${PORT:-19843}
ADMIN=${ADMIN:-19844}
BIN=target/release/tlsgate
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-h3.XXXXXX)}

ALL=(
  "h3_13|HTTP/3, 16 QUIC connections × 4 requests at a time, 13 B|h3load -c 16 -m 4"
  "h3_new|HTTP/3, a new QUIC connection (full handshake) per request, 13 B|h3load -new -c 8"
  "h2_13|HTTP/2 over TCP, 16 conn × 10 streams, 13 B (reference)|h2load -t1 -c16 -m10"
  "h3_own|HTTP/3 as h3_13, load from tlsgate bench (not of record)|bench -c 16 -m 4"
  "h3_1m|HTTP/3, 4 QUIC connections × 1 request, 1 MiB (MiB per CPU-s)|h3load -c 4 -m 1"
  "h2_1m|HTTP/2 over TCP, 4 conn × 1 stream, 1 MiB (reference; MiB per CPU-s)|h2load -t1 -c4 -m1"
)

bench_install_missing caddy:caddy h2load:nghttp2-client
command -v go >/dev/null || { log "go is needed to build the HTTP/3 load generator"; exit 1; }
bench_build_tlsgate "$BIN"
bench_copy_gateway "$BIN"
bench_raise_nofile
bench_mint_certificate "tlsgate h3-compare CA"
(cd scripts/h3/h3load && go build -o "$WORK/h3load" .)
bench_render scripts/h3/tlsgate.toml.in "$WORK/tlsgate.toml" WORK="$WORK" PORT="$PORT" ADMIN="$ADMIN"
bench_render scripts/h3/Caddyfile.in "$WORK/Caddyfile" WORK="$WORK" PORT="$PORT"
# The 1 MiB answer: inline in tlsgate's configuration (too long for sed), a file for Caddy.
mkdir -p "$WORK/www" && head -c 1048576 /dev/zero | tr '\0' x >"$WORK/www/1m"
python3 - "$WORK/tlsgate.toml" "$WORK/www/1m" <<'PY'
import sys
conf, big = sys.argv[1], open(sys.argv[2]).read()
text = open(conf).read().replace("@BIG@", big)
open(conf, "w").write(text)
PY
if [ -n "$HAS_ALT" ]; then
  cp "${ALT_BIN:-$GW_BIN}" "$WORK/tlsgate-alt"
  python3 - "$WORK/tlsgate.toml" "$WORK/tlsgate-alt.toml" "$ALT_HTTP3" <<'PY'
import sys
src, dst, extra = sys.argv[1:4]
text = open(src).read()
assert "[http3]\nenabled = true\n" in text
open(dst, "w").write(text.replace("[http3]\nenabled = true\n", "[http3]\nenabled = true\n" + extra + "\n", 1))
PY
fi
GW_ID="$(git describe --always --dirty 2>/dev/null || echo unknown), tlsgate sha256 $(sha256sum "$GW_BIN" | cut -c1-12)"
bench_save_params SERVERS CELLS ROUNDS DURATION SERVER_CPU LOAD_CPU GW_ID
bench_ports_free "$PORT" "$ADMIN"
read -r -a servers <<<"$SERVERS"
bench_select ALL "$CELLS"
: >"$WORK/results.jsonl"
log "work directory $WORK; servers on CPU $SERVER_CPU, load on CPU $LOAD_CPU; $ROUNDS rounds of ${DURATION}s"

start_server() { # name
  case $1 in
    tlsgate) bench_start_server tlsgate "$SERVER_CPU" "$WORK/tlsgate.toml" "$PORT" 0.3 ;;
    tlsgate_alt)
      RUST_LOG=warn taskset -c "$SERVER_CPU" "$WORK/tlsgate-alt" serve --config "$WORK/tlsgate-alt.toml" \
        >>"$WORK/tlsgate_alt.log" 2>&1 &
      BENCH_PID=$!
      bench_wait_port "$PORT" || { log "tlsgate_alt did not start"; tail -n 20 "$WORK/tlsgate_alt.log" >&2; exit 1; }
      sleep 0.3
      ;;
    caddy)
      GOMAXPROCS=1 taskset -c "$SERVER_CPU" caddy run --config "$WORK/Caddyfile" --adapter caddyfile \
        >>"$WORK/caddy.log" 2>&1 &
      BENCH_PID=$!
      bench_wait_port "$PORT" || { log "caddy did not start"; tail -n 20 "$WORK/caddy.log" >&2; exit 1; }
      sleep 0.5
      ;;
    *) log "unknown server $1"; exit 2 ;;
  esac
}

one_run() { # round server line
  local round=$1 s=$2 line=$3 id load out t0 t1 requests errors first cpu
  IFS='|' read -r id _ load <<<"$line"
  start_server "$s"
  local pid=$BENCH_PID url="https://127.0.0.1:$PORT/13b"
  case $id in *_1m) url="https://127.0.0.1:$PORT/1m" ;; esac
  out="$WORK/$s-$id-$round.txt"
  t0=$(bench_cpu_total "$pid")
  case $load in
    h3load*)
      # shellcheck disable=SC2086
      taskset -c "$LOAD_CPU" "$WORK/h3load" ${load#h3load } -d "${DURATION}s" -ca "$WORK/ca.pem" \
        -url "$url" >"$out" 2>&1 || true
      requests=$(jq -r '.requests // 0' "$out" 2>/dev/null || echo 0)
      errors=$(jq -r '.errors // 0' "$out" 2>/dev/null || echo 1)
      first=$(jq -r '.first_error // ""' "$out" 2>/dev/null || head -c 200 "$out")
      ;;
    bench*)
      # shellcheck disable=SC2086
      taskset -c "$LOAD_CPU" "$GW_BIN" bench --h3 ${load#bench } -d "${DURATION}s" --cacert "$WORK/ca.pem" \
        --connect-to "127.0.0.1:$PORT" --json "$out.json" "https://localhost:$PORT/13b" >"$out" 2>&1 || true
      requests=$(jq -r '.status["200"] // 0' "$out.json" 2>/dev/null || echo 0)
      errors=$(jq -r '.errors_total // 1' "$out.json" 2>/dev/null || echo 1)
      first=$(jq -r '[.first_error[]] | first // ""' "$out.json" 2>/dev/null || head -c 200 "$out")
      ;;
    h2load*)
      # shellcheck disable=SC2086
      taskset -c "$LOAD_CPU" h2load ${load#h2load } -D "$DURATION" "${url/127.0.0.1/localhost}" >"$out" 2>&1 || true
      requests=$(awk '/^status codes:/{print $3}' "$out")
      errors=$(awk '/^requests:/{print $10 + $12}' "$out")
      first=""
      ;;
  esac
  t1=$(bench_cpu_total "$pid")
  bench_stop_pid "$pid"
  cpu=$(echo "($t1 - $t0) / $TCK" | bc -l)
  jq -nc --arg cell "$id" --arg server "$s" --argjson round "$round" --argjson requests "${requests:-0}" \
    --argjson errors "${errors:-0}" --arg first "$first" --argjson cpu "$cpu" --argjson dur "$DURATION" \
    '{cell:$cell, server:$server, round:$round, requests:$requests, errors:$errors, first_error:$first,
      cpu_s:$cpu, rate:($requests/$dur), per_cpu:(if $cpu > 0 then $requests/$cpu else 0 end)}' >>"$WORK/results.jsonl"
  log "round $round, $s $id: $requests answered, $errors errors, server CPU $(printf %.2f "$cpu") s, $(jq -r 'select(.cell=="'"$id"'" and .server=="'"$s"'" and .round=='"$round"') | .per_cpu | floor' "$WORK/results.jsonl") per CPU-s${first:+ ($first)}"
}

bench_rounds "$ROUNDS" one_run

echo
echo "### HTTP/3 per server CPU-second (tlsgate ${GW_ID}; Caddy $(caddy version | cut -d' ' -f1))"
echo
echo "Each server alone on CPU $SERVER_CPU (tlsgate 1 worker, Caddy GOMAXPROCS=1), load on CPU $LOAD_CPU; $ROUNDS interleaved rounds of ${DURATION} s, medians. Figure: requests answered 200 ÷ the server's CPU seconds (1 MiB cells: MiB per CPU-second, one response = 1 MiB; figures below 10,000 unrounded)."
echo
bench_table_head "l:cell" "l:load" "r:tlsgate" "r:Caddy" "r:tlsgate ÷ Caddy" "r:rate tlsgate / Caddy" "r:server CPU tlsgate / Caddy"
for line in "${selected[@]}"; do
  IFS='|' read -r id title load <<<"$line"
  jq -rs --arg id "$id" --arg title "$title" --arg load "$load" "$BENCH_JQ_MEDIAN"'
    def med(s; f): [.[] | select(.cell == $id and .server == s) | f] | median;
    (med("tlsgate"; .per_cpu)) as $t | (med("caddy"; .per_cpu)) as $c |
    def k: if . == null then "–" elif . < 10000 then (round | tostring) else (. / 1000 * 10 | round / 10 | tostring) + "k" end;
    def r2: if . == null then "–" else (. * 100 | round / 100 | tostring) end;
    "| \($title) | `\($load)` | \($t | k) | \($c | k) | **\(if $t != null and $c != null and $c > 0 then ($t / $c | r2) + "×" else "–" end)** | \(med("tlsgate"; .rate) | k) / \(med("caddy"; .rate) | k) | \(med("tlsgate"; .cpu_s / '"$DURATION"') | r2) / \(med("caddy"; .cpu_s / '"$DURATION"') | r2) |"
  ' "$WORK/results.jsonl"
done
echo
if [ -n "$HAS_ALT" ]; then
  echo "### tlsgate ÷ tlsgate_alt ($ALT_LABEL: $(sha256sum "$WORK/tlsgate-alt" | cut -c1-12)), per server CPU-second, medians"
  echo
  bench_table_head "l:cell" "r:tlsgate" "r:tlsgate_alt" "r:ratio"
  for line in "${selected[@]}"; do
    IFS='|' read -r id title load <<<"$line"
    jq -rs --arg id "$id" --arg title "$title" "$BENCH_JQ_MEDIAN"'
      def med(s; f): [.[] | select(.cell == $id and .server == s) | f] | median;
      (med("tlsgate"; .per_cpu)) as $t | (med("tlsgate_alt"; .per_cpu)) as $a |
      def k: if . == null then "–" elif . < 10000 then (round | tostring) else (. / 1000 * 10 | round / 10 | tostring) + "k" end;
      "| \($title) | \($t | k) | \($a | k) | **\(if $t != null and $a != null and $a > 0 then ($t / $a * 100 | round / 100 | tostring) + "×" else "–" end)** |"
    ' "$WORK/results.jsonl"
  done
  echo
fi
failed=$(jq -s '[.[] | select(.errors > 0 or .requests == 0)] | length' "$WORK/results.jsonl")
[ "$failed" = 0 ] || { log "$failed runs had errors or no answers: see $WORK/results.jsonl"; }
log "raw results in $WORK (results.jsonl, <server>-<cell>-<round>.txt)"
