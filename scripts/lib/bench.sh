# shellcheck shell=bash
# Helpers shared by the benchmark scripts that measure tlsgate against nginx and HAProxy
# (scripts/peer-compare.sh, scripts/proxy-compare.sh, scripts/keyless-bench.sh,
# scripts/cluster-bench.sh): installing what is missing, the private
# copy of the measured binary, one ECDSA P-256 certificate, configuration templates, starting a
# pinned server and waiting for its port, CPU ticks and RSS from /proc, tlsgate's handshake
# counters, the interleaved rounds, the saved parameters of a run, jq's median and Markdown
# table heads.
#
# Sourced (bash), from the repository root, after the script has set:
#   BENCH_NAME   prefix of the progress lines (stderr)
#   WORK         the run's working directory
# Functions that start or measure take what they need as arguments; the ones that fill in a
# result for the caller say which variable.

log() { echo "$BENCH_NAME: $*" >&2; }

# REPORT_ONLY=1 WORK=DIR: the parameters of an earlier run (its tables are printed again).
bench_load_params() {
  if [ "${REPORT_ONLY:-0}" = 1 ]; then
    # shellcheck source=/dev/null
    source "$WORK/params"
  fi
}
# Writes NAME="value" for each named variable to $WORK/params (read back by bench_load_params).
bench_save_params() { # NAME...
  local v
  for v in "$@"; do printf '%s="%s"\n' "$v" "${!v}"; done >"$WORK/params"
}

# ---- prerequisites --------------------------------------------------------------------------
# Installs the Debian packages of the commands that are missing: arguments "command:package".
# nginx-light falls back to nginx (some mirrors only have the full package).
bench_install_missing() { # command:package...
  local need=() spec
  for spec in "$@"; do
    command -v "${spec%%:*}" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "${spec%%:*}" >/dev/null 2>&1 ||
      need+=("${spec#*:}")
  done
  ((${#need[@]})) || return 0
  # shellcheck source=scripts/deps.sh
  source scripts/deps.sh
  tlsgate_install_packages "${need[@]}" || {
    need=("${need[@]/nginx-light/nginx}")
    tlsgate_install_packages "${need[@]}"
  }
}
# The independent clients in $WORK (scripts/peer-compare.sh, scripts/workers-scale.sh): tlsload
# (Go crypto/tls), flood (scripts/handshake-flood), sslload (OpenSSL's libssl); installs wrk, gcc
# and libssl-dev if missing. Go must be installed.
bench_independent_clients() {
  bench_install_missing wrk:wrk cc:gcc
  PATH=$PATH:/usr/local/go/bin
  if [ ! -e /usr/include/openssl/ssl.h ]; then
    # shellcheck source=scripts/deps.sh
    source scripts/deps.sh
    tlsgate_install_packages libssl-dev
  fi
  command -v go >/dev/null || {
    log "go is needed to build the independent clients (https://go.dev/dl/)"
    exit 1
  }
  log "building the independent clients"
  (cd scripts/peer/tlsload && GOFLAGS=-mod=mod go build -o "$WORK/tlsload" .) >&2
  (cd scripts/handshake-flood && GOFLAGS=-mod=mod go build -o "$WORK/flood" .) >&2
  cc -O2 -Wall -o "$WORK/sslload" scripts/peer/sslload.c -lssl -lcrypto -lpthread >&2
}
# Builds tlsgate (release) when BUILD=1 or when BIN is missing and no GATEWAY_BIN is given.
bench_build_tlsgate() { # BIN
  if [ "${BUILD:-0}" = 1 ] || { [ -z "${GATEWAY_BIN:-}" ] && [ ! -x "$1" ]; }; then
    log "building tlsgate (release)"
    cargo build --release -p tlsgate >&2
  fi
}
# A private copy of the measured server (GATEWAY_BIN, else BIN) in $WORK/tlsgate-server, so a
# rebuild during the run cannot swap the binary under the measurements. Sets GW_BIN. A WORK
# named by the caller need not exist yet.
bench_copy_gateway() { # BIN
  mkdir -p "$WORK"
  cp "${GATEWAY_BIN:-$1}" "$WORK/tlsgate-server"
  GW_BIN=$WORK/tlsgate-server
}
bench_raise_nofile() {
  ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
}

# ---- certificate and configurations --------------------------------------------------------
# A CA (CN) and one ECDSA P-256 leaf for localhost and 127.0.0.1 in $WORK: ca.pem, leaf.pem,
# leaf.key, haproxy.pem (chain + key). Kept when $WORK/leaf.pem already exists.
bench_mint_certificate() { # CA common name
  [ ! -s "$WORK/leaf.pem" ] || return 0
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -subj "/CN=$1" -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
    -keyout "$WORK/leaf.key" -out "$WORK/leaf.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' \
    >"$WORK/leaf.ext"
  openssl x509 -req -in "$WORK/leaf.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial \
    -days 30 -extfile "$WORK/leaf.ext" -out "$WORK/leaf.pem" 2>/dev/null
  cat "$WORK/leaf.pem" "$WORK/leaf.key" >"$WORK/haproxy.pem"
}
# Copies TEMPLATE to OUT with each @KEY@ replaced by its value.
bench_render() { # template out KEY=value...
  local in=$1 out=$2 kv args=()
  shift 2
  for kv in "$@"; do args+=(-e "s|@${kv%%=*}@|${kv#*=}|g"); done
  sed "${args[@]}" "$in" >"$out"
}

# ---- processes ------------------------------------------------------------------------------
TCK=$(getconf CLK_TCK)
bench_procs() { echo "$1" $(pgrep -P "$1" 2>/dev/null || true); }
# "utime stime" of the process and its children (all threads, exited ones included), clock ticks.
bench_cpu_ticks() { # pid
  local u=0 k=0 p f
  for p in $(bench_procs "$1"); do
    [ -r "/proc/$p/stat" ] || continue
    read -r -a f <<<"$(sed 's/.*) //' "/proc/$p/stat")"
    u=$((u + f[11])) k=$((k + f[12]))
  done
  echo "$u $k"
}
# utime + stime of the process and its children, clock ticks (one number).
bench_cpu_total() { # pid
  local t
  t=$(bench_cpu_ticks "$1")
  echo $((${t% *} + ${t#* }))
}
# The median of the numbers on stdin, one per line.
bench_median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# Resident memory of the process and its children, kB.
bench_rss_kb() { # pid
  local t=0 p
  for p in $(bench_procs "$1"); do
    [ -r "/proc/$p/status" ] && t=$((t + $(awk '/^VmRSS/{print $2}' "/proc/$p/status")))
  done
  echo "$t"
}

bench_wait_port() { # port
  local i
  for i in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
# Fails (with a log line) when one of the ports already answers: wait_port would find somebody
# else's server.
bench_ports_free() { # port...
  local p
  for p in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      log "port $p is already in use (another run of this script?)"
      return 1
    fi
  done
}

# The configuration file each compared server is started with.
bench_conf() { # name
  case $1 in tlsgate) echo "$WORK/tlsgate.toml" ;; nginx) echo "$WORK/nginx.conf" ;; haproxy) echo "$WORK/haproxy.cfg" ;; esac
}
# Starts one of the compared servers pinned to CPUS, its output appended to $WORK/NAME.log, and
# waits for PORT (then SETTLE seconds: nginx forks its worker after binding). Sets BENCH_PID.
# CONF: its configuration file (bench_conf).
bench_start_server() { # name cpus conf port settle
  local s=$1 cpus=$2 conf=$3 port=$4 settle=$5
  case $s in
    tlsgate)
      RUST_LOG=warn taskset -c "$cpus" "$GW_BIN" serve --config "$conf" >>"$WORK/tlsgate.log" 2>&1 &
      ;;
    nginx)
      taskset -c "$cpus" nginx -p "$WORK" -c "$conf" -e "$WORK/nginx-error.log" >>"$WORK/nginx.log" 2>&1 &
      ;;
    haproxy)
      taskset -c "$cpus" haproxy -db -f "$conf" >>"$WORK/haproxy.log" 2>&1 &
      ;;
    *)
      log "unknown server $s"
      exit 2
      ;;
  esac
  BENCH_PID=$!
  if ! bench_wait_port "$port"; then
    log "$s did not start; log:"
    tail -n 20 "$WORK/$s.log" >&2 || true
    exit 1
  fi
  sleep "$settle"
}
bench_stop_pid() { # pid (empty: nothing)
  local pid=$1
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# tlsgate's handshake counters from its admin listener: "full resumed failures".
bench_tlsgate_handshakes() { # admin port
  curl -s "http://127.0.0.1:$1/metrics" | awk '
    /^tlsgate_handshakes_total\{/ { if ($0 ~ /outcome="full"/) f += $NF; else r += $NF }
    /^tlsgate_handshake_failures_total\{/ { e += $NF }
    END { printf "%d %d %d\n", f, r, e }'
}

# ---- cells and rounds -----------------------------------------------------------------------
# The lines of the array named ALL whose id (the text before the first |) is in the
# space-separated FILTER ("all": every line). Sets the array `selected`.
bench_select() { # ALL-array-name filter
  local -n all=$1
  local line id
  selected=()
  for line in "${all[@]}"; do
    id=${line%%|*}
    if [ "$2" = all ] || [[ " $2 " == *" $id "* ]]; then selected+=("$line"); fi
  done
}
# Interleaved rounds: for each round, each selected line, each server of the array `servers`
# (the order rotating per round, so a burst of outside load hits one run, not one server):
# FN round server line.
bench_rounds() { # rounds fn
  local round line i n=${#servers[@]}
  for round in $(seq 1 "$1"); do
    for line in "${selected[@]}"; do
      for i in $(seq 0 $((n - 1))); do
        "$2" "$round" "${servers[$(((i + round - 1) % n))]}" "$line"
      done
    done
  done
}

# ---- tables ---------------------------------------------------------------------------------
# jq: the median of an array of numbers (the lower middle one), null for an empty array.
BENCH_JQ_MEDIAN='def median: sort | if length == 0 then null else .[(length - 1) / 2 | floor] end;'
# A Markdown table's head: arguments "l:title" (left-aligned) or "r:title" (right-aligned).
bench_table_head() { # l:title|r:title...
  local col head="|" sep="|"
  for col in "$@"; do
    head="$head ${col#*:} |"
    if [ "${col%%:*}" = r ]; then sep="$sep---:|"; else sep="$sep---|"; fi
  done
  echo "$head"
  echo "$sep"
}
