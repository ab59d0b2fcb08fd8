#!/usr/bin/env bash
# Compares tlsgate with nginx and HAProxy, one core each, load on another core: full and resumed
# handshakes, keep-alive requests and one request per connection (the seed 002 table), server
# CPU seconds from /proc, rate per server CPU-second, ratio to nginx and to the best peer,
# tlsgate's /metrics checked against each scenario, and memory per idle TLS connection.
#
# Two loads, each in its own table (issue 18): clients tlsgate did not write — the figures of
# record — and `tlsgate bench` beside them:
#   independent  Go's crypto/tls (scripts/peer/tlsload: full handshakes; the chain is not
#                verified, the CertificateVerify is), OpenSSL 3's libssl (scripts/peer/sslload.c:
#                resumption by TLS 1.2 session ID, TLS 1.2 ticket and TLS 1.3 ticket, `GET /` on
#                each connection, the newest session offered), wrk (keep-alive), and the fixed
#                ClientHello of scripts/handshake-flood: the server's first flight only (no
#                cryptography on the client), and with -finish the handshake completed and one
#                `GET /` on it (one X25519 and no signature check on the client) — clients cheap
#                enough that one client core keeps a server core busy, for the cells that
#                measure a server against the crypto ceiling of a full handshake (`sign_speed`
#                run on the server's core in each round); with -resume (the *sat resumption
#                cells) a session fetched once with `openssl s_client -sess_out` is resumed by
#                session ID, TLS 1.2 ticket or TLS 1.3 ticket on every connection with one fixed
#                ClientHello, the abbreviated handshake completed and `GET /` sent (TLS 1.3: one
#                X25519 on the client; TLS 1.2: none) — cheaper per connection than libssl, so
#                the server is busier than with sslload (scripts/handshake-flood/resume.go)
#   bench        `tlsgate bench -t 1 -c CONNS` (handshake-only for the handshake cells; `--lean`
#                for the saturating cell: the same least-work full handshake and GET as -finish)
# The "busy" column is the server's CPU ÷ the run's wall time: below ~0.9 the client, not the
# server, set the pace, and per CPU-second a server then also pays for waking up more often.
#
#   scripts/peer-compare.sh                 # ~12 minutes with the defaults
#   DURATION=10 ROUNDS=5 HOLD_CONNS=5000 scripts/peer-compare.sh
#   LOADS=independent SCENARIOS="full13 flight13 sid12 tkt12 tkt13" HOLD_CONNS=0 scripts/peer-compare.sh
#
# Environment:
#   DURATION     seconds per cell (3)            CONNS       client connections/loops (10)
#   ROUNDS       interleaved repetitions (3); the tables show medians
#   LOADS        "independent bench" (both; either alone)
#   HOLD_CONNS   idle connections held (2000; 0: no memory test)   HOLD_SECS  how long (6)
#   SERVERS      "tlsgate nginx haproxy"         SCENARIOS   space-separated ids (all; see below)
#   SERVER_CPU   core for the server (0)         LOAD_CPU    core for the load (1)
#   WORK         working directory (a new /tmp/tlsgate-peer.*; kept: configs, logs, JSON)
#   BUILD=1      rebuild tlsgate even if target/release/tlsgate exists
#   GATEWAY_BIN  the tlsgate binary to measure as a server (default: the one built here; the
#                bench load is always this tree's `tlsgate bench`): compares two builds, e.g.
#                before and after a refactor, each against the same nginx
# Output: Markdown tables on stdout, progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-3}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-10}
LOADS=${LOADS:-"independent bench"}
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

# id | label | bench arguments (-: none) | counted unit (h: handshakes, r: requests) | expected
# resumption | independent client (go:ARGS tlsload, ssl:ARGS sslload, wrk, flood; -: none)
ALL_SCENARIOS=(
  "full13|Full handshake, TLS 1.3|--handshake-only --no-ticket --no-session-id --tls 1.3|h|full|go:-tls 1.3"
  "full12|Full handshake, TLS 1.2|--handshake-only --no-ticket --no-session-id --tls 1.2|h|full|go:-tls 1.2"
  "flight13|Server's first flight, TLS 1.3 (full handshake up to the signed flight)|-|h|none|flood"
  "fullsat13|Full handshake + GET per connection, TLS 1.3, saturating client|--lean|r|full|flood:-finish"
  "sid12|Resumed TLS 1.2, session ID|--handshake-only --no-ticket --tls 1.2|h|resumed|ssl:-v 1.2 -r id -q"
  "tkt12|Resumed TLS 1.2, ticket|--handshake-only --no-session-id --tls 1.2|h|resumed|ssl:-v 1.2 -r ticket -q"
  "tkt13|Resumed TLS 1.3, ticket (PSK-DHE)|--handshake-only --tls 1.3|h|resumed|ssl:-v 1.3 -r ticket -q"
  "sid12sat|Resumed TLS 1.2, session ID + GET, saturating client|-|r|resumed|resume:-tls1_2 -cipher ECDHE-ECDSA-AES128-GCM-SHA256 -no_ticket"
  "tkt12sat|Resumed TLS 1.2, ticket + GET, saturating client|-|r|resumed|resume:-tls1_2 -cipher ECDHE-ECDSA-AES128-GCM-SHA256"
  "tkt13sat|Resumed TLS 1.3, ticket (PSK-DHE) + GET, saturating client|-|r|resumed|resume:-tls1_3 -ciphersuites TLS_AES_128_GCM_SHA256"
  "ka|Keep-alive, resumption on|--tls 1.3|r|any|wrk"
  "ka_off|Keep-alive, resumption off|--tls 1.3 --no-session-id --no-ticket|r|any|-"
  "close|New connection per request, resumption on|--tls 1.3 --new-conn|r|resumed|-"
  "close_off|New connection per request, resumption off|--tls 1.3 --new-conn --no-session-id --no-ticket|r|full|go:-tls 1.3 -request"
)
# What each independent client is, for the tables.
client_name() {
  case $1 in
    go:*) echo "Go crypto/tls (tlsload)" ;;
    ssl:*) echo "OpenSSL libssl (sslload), GET / per connection" ;;
    wrk) echo "wrk" ;;
    flood) echo "fixed ClientHello (handshake-flood)" ;;
    resume:*) echo "fixed resuming ClientHello, handshake completed + GET (handshake-flood -resume)" ;;
    flood:*) echo "fixed ClientHello, handshake completed (handshake-flood -finish)" ;;
  esac
}
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
PATH=$PATH:/usr/sbin:/sbin:/usr/local/go/bin
if [[ " $LOADS " == *" independent "* ]]; then
  bench_independent_clients
  cargo build --release -p tlsgate-tls --example sign_speed >&2
  cp target/release/examples/sign_speed "$WORK/sign_speed"
fi
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
  local groups=(--groups X25519:P-256)
  # --lean offers X25519 alone and takes no --groups.
  case " $* " in *" --lean "*) groups=() ;; esac
  taskset -c "$LOAD_CPU" "$BIN" bench --sni localhost "${groups[@]}" --json "$json" "$@" "$url"
}

RESULTS=$WORK/results.jsonl
MEMORY=$WORK/memory.tsv
CEILING=$WORK/ceiling.jsonl
if [ "${REPORT_ONLY:-0}" != 1 ]; then
  : >"$RESULTS"
  : >"$MEMORY"
  : >"$CEILING"
fi

# The crypto ceiling of a full TLS 1.3 handshake (one ECDSA P-256 signature + one X25519 key
# generation and derivation per core-second, BoringSSL) on the server's core, once per round.
ceiling_probe() { # round
  ! grep -q "\"round\":$1," "$CEILING" 2>/dev/null || return 0
  local n
  n=$(SIGN_SPEED_SECS=1 taskset -c "$SERVER_CPU" "$WORK/sign_speed" |
    awk '/^Crypto ceiling/ { for (i = 1; i <= NF; i++) if ($i == "handshakes/s") print $(i - 1) }')
  log "round $1: crypto ceiling ${n:-?} full handshakes per core-second"
  [ -z "$n" ] || jq -cn --argjson r "$1" --argjson n "$n" '{round: $r, ceiling: $n}' >>"$CEILING"
}

# handshake-flood's loops (CONNS in all, rounded up) over four source addresses: at thousands of
# connections a second, the server's TIME_WAIT sockets (60 s) from the cells before meet one
# address's ephemeral ports within seconds, and its SYNs then wait for retransmission.
FLOOD_SOURCES=127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4
FLOOD_CONNS=$(((CONNS + 3) / 4))

# Runs the independent client SPEC against PORT for DURATION; writes JSON with handshakes,
# resumed, requests and errors to OUT (raw output in OUT.txt).
independent() { # spec port out
  local spec=$1 port=$2 out=$3 args
  args=${spec#*:}
  case $spec in
    go:*)
      # shellcheck disable=SC2086
      GOMAXPROCS=1 taskset -c "$LOAD_CPU" "$WORK/tlsload" -target "127.0.0.1:$port" -c "$CONNS" \
        -d "${DURATION}s" $args >"$out" 2>"$out.txt" || true
      ;;
    ssl:*)
      # shellcheck disable=SC2086
      taskset -c "$LOAD_CPU" "$WORK/sslload" -t "127.0.0.1:$port" -c "$CONNS" -d "$DURATION" $args \
        >"$out" 2>"$out.txt" || true
      ;;
    wrk)
      taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "https://127.0.0.1:$port/" >"$out.txt" 2>&1 || true
      awk '
        / requests in / { n = $1 }
        /Socket errors:/ { gsub(",", ""); e += $4 + $6 + $8 + $10 }
        /Non-2xx/ { e += $NF }
        END { if (n != "") printf "{\"handshakes\":0,\"resumed\":0,\"requests\":%d,\"errors\":%d}\n", n, e }
      ' "$out.txt" >"$out"
      ;;
    flood | flood:*)
      [ "$spec" != flood ] || args=""
      # shellcheck disable=SC2086
      taskset -c "$LOAD_CPU" "$WORK/flood" -target "127.0.0.1:$port" -sources "$FLOOD_SOURCES" \
        -conns "$FLOOD_CONNS" -duration "${DURATION}s" $args >"$out.txt" 2>&1 || true
      # With -finish each "done" is a completed handshake and a 200.
      jq -c --argjson req "$([ "$spec" = flood ] && echo 0 || echo 1)" \
        '{handshakes: .done, resumed: 0, requests: (.done * $req), errors: (.refused + .other)}' \
        "$out.txt" >"$out" 2>/dev/null || true
      ;;
    resume:*)
      # The session resume_session saved; each "done" is a resumed handshake and a 200 (a full
      # handshake, refused or failed one is counted in .other / .refused).
      taskset -c "$LOAD_CPU" "$WORK/flood" -target "127.0.0.1:$port" -sources "$FLOOD_SOURCES" \
        -conns "$FLOOD_CONNS" -duration "${DURATION}s" -resume "$out.session.txt" >"$out.txt" 2>&1 || true
      jq -c '{handshakes: .done, resumed: .done, requests: .done, errors: (.refused + .other)}' \
        "$out.txt" >"$out" 2>/dev/null || true
      ;;
  esac
}

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

# A session of PORT's server for handshake-flood -resume: one OpenSSL handshake (s_client with
# ARGS, kept open briefly so that TLS 1.3 tickets arrive), saved as `openssl sess_id -text`.
resume_session() { # args port out
  # shellcheck disable=SC2086
  { sleep 0.3 | timeout 5 openssl s_client -connect "127.0.0.1:$2" -servername localhost $1 \
    -sess_out "$3.pem" -ign_eof >/dev/null 2>&1; } || true
  openssl sess_id -in "$3.pem" -text -noout >"$3.txt" 2>/dev/null || true
}

run_cell() { # round server scenario-line: each load of LOADS in turn
  local load
  for load in $LOADS; do run_one "$@" "$load"; done
}

run_one() { # round server scenario-line load
  local round=$1 s=$2 line=$3 load=$4 id label args unit expect spec
  IFS='|' read -r id label args unit expect spec <<<"$line"
  local url port pid json txt
  if [ "$load" = bench ]; then [ "$args" != - ] || return 0; else [ "$spec" != - ] || return 0; fi
  port=$(port_of "$s")
  url="https://127.0.0.1:$port/"
  pid=${PIDS[$s]}
  json=$WORK/$s-$id-$load-$round.json
  txt=$WORK/$s-$id-$load-$round.txt
  # The ceiling is shown for the independent clients, and for the bench where it saturates (--lean).
  case $id in full13 | flight13) [ "$load" = bench ] || ceiling_probe "$round" ;; fullsat13) ceiling_probe "$round" ;; esac
  local m0="" m1="" c0 c1 t0 t1
  # The session to resume is fetched before the counters are read (its handshake is not the load's).
  [[ $load == bench || $spec != resume:* ]] || resume_session "${spec#resume:}" "$port" "$json.session"
  [ "$s" = tlsgate ] && m0=$(tlsgate_counts)
  c0=$(cpu_ticks "$pid")
  t0=$(date +%s.%N)
  if [ "$load" = bench ]; then
    # shellcheck disable=SC2086
    bench "$url" "$json" -d "$DURATION" -c "$CONNS" -t 1 $args >"$txt" 2>&1 || true
  else
    independent "$spec" "$port" "$json"
  fi
  c1=$(cpu_ticks "$pid")
  t1=$(date +%s.%N)
  if [ ! -s "$json" ]; then
    log "$s $id ($load): the client produced no summary:"
    cat "$txt" "$json.txt" 2>/dev/null | tail -n 20 >&2
    jq -cn --arg id "$id" --arg s "$s" --arg load "$load" --argjson r "$round" \
      '{id: $id, server: $s, load: $load, round: $r, count: 0, rate: 0, cpu: 0, busy: 0, per: 0, resumed: 0, errors: -1, neg: "-", check: "no result"}' >>"$RESULTS"
    return
  fi
  local count rate full resumed errors frac cpu per check neg wall busy
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  if [ "$load" = bench ]; then
    if [ "$unit" = h ]; then
      count=$(jq .handshakes "$json") rate=$(jq .handshakes_per_s "$json")
    else
      count=$(jq .requests "$json") rate=$(jq .requests_per_s "$json")
    fi
    full=$(jq .full "$json") resumed=$(jq .resumed "$json") errors=$(jq .errors_total "$json")
    frac=$(jq .resumed_fraction "$json")
    neg=$(jq -r '.negotiated | to_entries | max_by(.value) | .key // "-"' "$json" 2>/dev/null | awk '{print $1, $3}')
  else
    local hs rq
    hs=$(jq .handshakes "$json") rq=$(jq .requests "$json") resumed=$(jq .resumed "$json")
    errors=$(jq .errors "$json")
    full=$((hs - resumed))
    if [ "$unit" = h ]; then count=$hs; else count=$rq; fi
    rate=$(awk -v n="$count" -v d="$DURATION" 'BEGIN { printf "%.1f", n / d }')
    frac=$(awk -v r="$resumed" -v h="$hs" 'BEGIN { printf "%.4f", (h > 0 ? r / h : 0) }')
    neg=$(client_name "$spec")
  fi
  cpu=$(awk -v a="$c0" -v b="$c1" -v t="$TCK" 'BEGIN { printf "%.2f", (b - a) / t }')
  busy=$(awk -v c="$cpu" -v w="$wall" 'BEGIN { printf "%.2f", (w > 0 ? c / w : 0) }')
  per=$(awk -v n="$count" -v c="$cpu" 'BEGIN { if (c > 0) printf "%.0f", n / c; else print 0 }')
  # The scenario's own expectation, from what the client's TLS stack reported.
  check=ok
  case $expect in
    full) [ "$resumed" = 0 ] || check="expected no resumption, got $resumed" ;;
    resumed) awk -v f="$frac" 'BEGIN { exit !(f >= 0.9) }' || check="expected resumption, got $frac" ;;
  esac
  if [ "$load" != bench ] && [ "$check" = ok ] && [ "$errors" != 0 ]; then
    # A flood reset costs nothing to count, but a refused or failed handshake is not a result.
    check="$errors errors"
  fi
  if [ "$s" = tlsgate ] && [ "$expect" != none ] && { [ "$load" = bench ] || [ "$spec" != wrk ]; }; then
    # tlsgate's own counters must agree with what the client saw.
    sleep 0.3
    m1=$(tlsgate_counts)
    local f0 r0 f1 r1 sf sr
    read -r f0 r0 _ <<<"$m0"
    read -r f1 r1 _ <<<"$m1"
    sf=$((f1 - f0)) sr=$((r1 - r0))
    if [ "$sf" != "$full" ] || [ "$sr" != "$resumed" ]; then
      check="/metrics MISMATCH: server full $sf resumed $sr, client full $full resumed $resumed"
    elif [ "$check" = ok ]; then
      check="ok: /metrics full $sf, resumed $sr"
    fi
  fi
  log "round $round, $s $id ($load): $(printf %.0f "$rate")/s, server CPU ${cpu}s (busy $busy), $per per CPU-s, resumed $frac, errors $errors ($check)"
  jq -cn --arg id "$id" --arg s "$s" --arg load "$load" --argjson r "$round" --argjson count "$count" \
    --argjson rate "$rate" --argjson cpu "$cpu" --argjson busy "$busy" --argjson per "$per" \
    --argjson resumed "$frac" --argjson errors "$errors" --arg neg "$neg" --arg check "$check" \
    '{id: $id, server: $s, load: $load, round: $r, count: $count, rate: $rate, cpu: $cpu, busy: $busy, per: $per, resumed: $resumed, errors: $errors, neg: $neg, check: $check}' \
    >>"$RESULTS"
}

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  bench_save_params DURATION ROUNDS CONNS LOADS HOLD_CONNS HOLD_SECS SERVERS SCENARIOS SERVER_CPU LOAD_CPU
fi

bench_select ALL_SCENARIOS "$SCENARIOS"
read -r -a servers <<<"$SERVERS"

if [ "${REPORT_ONLY:-0}" != 1 ]; then
log "work directory $WORK; servers on CPU $SERVER_CPU, bench on CPU $LOAD_CPU; $ROUNDS rounds of ${DURATION}s per cell"
# All servers run side by side (idle ones cost nothing); each is measured fresh for memory first.
for s in "${servers[@]}"; do
  log "starting $s"
  start_server "$s"
  [ "$HOLD_CONNS" = 0 ] || memory_test "$s"
done
# Rounds interleave the servers, so a burst of outside load hits one round, not one server.
bench_rounds "$ROUNDS" run_cell
stop_servers
fi

# ---- tables ---------------------------------------------------------------------------------
ceiling_median=$(jq -s 'map(.ceiling) | sort | if length == 0 then 0 else .[(length - 1) / 2 | floor] end' "$CEILING" 2>/dev/null || echo 0)
for load in $LOADS; do
  echo
  if [ "$load" = bench ]; then
    echo "### Throughput per server CPU-second: \`tlsgate bench\`"
    echo
    echo "Each server pinned to CPU $SERVER_CPU (1 worker/thread); \`tlsgate bench -t 1 -c $CONNS -d $DURATION --groups X25519:P-256 --sni localhost\` (\`--lean\` without \`--groups\`: it offers X25519 alone) pinned to CPU $LOAD_CPU; $ROUNDS interleaved rounds, medians shown (per server CPU-s: median and min–max over the rounds; busy: server CPU ÷ wall time)."
  else
    echo "### Throughput per server CPU-second: independent clients (figures of record)"
    echo
    echo "Each server pinned to CPU $SERVER_CPU (1 worker/thread); the client named in the last column pinned to CPU $LOAD_CPU, $CONNS connections or loops, ${DURATION} s; $ROUNDS interleaved rounds, medians shown (per server CPU-s: median and min–max over the rounds; busy: server CPU ÷ wall time). Crypto ceiling of a full TLS 1.3 handshake on CPU $SERVER_CPU (\`sign_speed\`, median of the rounds): $ceiling_median per core-second."
  fi
  echo
  bench_table_head l:scenario l:server "r:rate /s" r:busy "r:per server CPU-s" r:min–max "r:vs nginx" \
    "r:vs best peer" "r:of crypto ceiling" r:resumed r:errors l:client/negotiated l:check
  for line in "${selected[@]}"; do
    IFS='|' read -r id label _ _ _ _ <<<"$line"
    jq -rs --arg id "$id" --arg load "$load" --arg title "$label" --argjson ceil "$ceiling_median" "$BENCH_JQ_MEDIAN"'
      def order: {"tlsgate": 0, "nginx": 1, "haproxy": 2}[.] // 3;
      [ .[] | select(.id == $id and (.load // "bench") == $load) ] | group_by(.server) | sort_by(.[0].server | order) | map({
        server: .[0].server,
        rate: (map(.rate) | median), busy: (map(.busy // 0) | median), cpu: (map(.cpu) | median),
        per: (map(.per) | median), lo: (map(.per) | min), hi: (map(.per) | max),
        resumed: (map(.resumed) | median), errors: (map(.errors) | add), neg: .[0].neg,
        check: (map(.check) | if all(startswith("ok")) then
                  (if .[0] | startswith("ok:") then "ok in \(length)/\(length) rounds (\(.[0] | ltrimstr("ok: ")), …)" else "ok" end)
                else (map(select(startswith("ok") | not)) | .[0]) end)
      }) as $rows
      | ($rows | map(select(.server == "nginx")) | .[0].per // 0) as $base
      | ($rows | map(select(.server != "tlsgate") | .per) | max // 0) as $best
      | $rows[]
      | "| \($title) | \(.server) | \(.rate | round) | \(.busy * 100 | round)% | \(.per | round) | \(.lo | round)–\(.hi | round) | \(if $base > 0 then "\(.per / $base * 100 | round / 100)×" else "—" end) | \(if .server == "tlsgate" and $best > 0 then "\(.per / $best * 100 | round / 100)×" else "" end) | \(if ((($id == "full13" or $id == "flight13") and $load != "bench") or $id == "fullsat13") and $ceil > 0 then "\(.per / $ceil * 100 | round)%" else "" end) | \(.resumed * 1000 | round / 10)% | \(.errors) | \(.neg) | \(.check) |"
    ' "$RESULTS"
  done
done
[ "$HOLD_CONNS" = 0 ] || {
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
}
echo
log "raw results in $WORK (results.jsonl, memory.tsv, <server>-<scenario>-<round>.json/.txt)"
