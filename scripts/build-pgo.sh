#!/usr/bin/env bash
# Builds tlsgate with profile-guided optimisation (PGO): an instrumented build serves a training
# load, LLVM's profile of it says which branches are taken and which functions are hot, and the
# final build lays the hot code out together and inlines along the hot paths. On this project's
# 2-core benchmark machine it cut the gateway's user-space instructions per proxied HTTP/2
# request by about a fifth and its modelled instruction-cache misses by more than half
# (docs/BENCHMARKS.md, "Profile-guided optimisation"). The code is the same: a PGO build passes
# the same tests; only the machine code's layout and inlining differ.
#
#   scripts/build-pgo.sh                          # -> target/pgo/tlsgate
#   OUTPUT=/usr/local/bin/tlsgate scripts/build-pgo.sh
#
# 1. llvm-profdata from rustup's llvm-tools component (installed when missing);
# 2. the instrumented build (RUSTFLAGS=-Cprofile-generate, target/pgo-generate/);
# 3. the training, with the instrumented binary as the gateway:
#    - scripts/proxy-compare.sh with SERVERS=tlsgate, every proxy cell, one round of TRAIN_SECS
#      (HTTP/1.1 and HTTP/2 keep-alive of 13 B to 1 MiB, a TLS connection per request, uploads,
#      an HTTP/2 TLS origin, gRPC; it installs what it needs: nginx, wrk, h2load, Go);
#    - then the same gateway configuration without its TLS 1.3 floor and with HTTP/3 on, loaded by
#      `tlsgate bench` (the instrumented binary itself): TLS 1.3 ticket resumption, TLS 1.2 ticket
#      and session-ID resumption, full TLS 1.3 handshakes (--lean), HTTP/3 keep-alive and a QUIC
#      connection per request;
# 4. llvm-profdata merges the profiles; the optimised build (RUSTFLAGS=-Cprofile-use,
#    target/pgo/) is copied to OUTPUT.
#
# Code the training does not run (the key server, the console, ACME, the cluster stores, the
# network lab) is compiled as cold code: correct, laid out apart, optimised for size.
# BoringSSL (C) is built as usual: only the Rust code is profiled.
#
# Environment: OUTPUT (target/pgo/tlsgate), TRAIN_SECS (2), WORK (a new /tmp/tlsgate-pgo.*; kept:
# the merged profile, the training's logs), PORT_OFFSET (0; the training uses proxy-compare.sh's ports).
# Takes two release builds (about 6 minutes each on 2 cores) and about 2 minutes of training.
set -euo pipefail
cd "$(dirname "$0")/.."
OUTPUT=${OUTPUT:-target/pgo/tlsgate}
TRAIN_SECS=${TRAIN_SECS:-2}
PORT_OFFSET=${PORT_OFFSET:-0}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-pgo.XXXXXX)}
BENCH_NAME=build-pgo
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
mkdir -p "$WORK"
chmod 755 "$WORK" # the origin nginx's workers (www-data) read files below it
TARGET=$(rustc -vV | sed -n 's/^host: //p')

# ---- 1. llvm-profdata ------------------------------------------------------------------------
profdata() { find "$(rustc --print sysroot)/lib/rustlib" -name llvm-profdata -type f 2>/dev/null | head -1; }
PROFDATA=$(profdata)
if [ -z "$PROFDATA" ]; then
  log "installing rustup's llvm-tools component (llvm-profdata)"
  rustup component add llvm-tools >&2
  PROFDATA=$(profdata)
fi
[ -x "$PROFDATA" ] || { log "llvm-profdata not found after installing llvm-tools"; exit 1; }

# ---- 2. the instrumented build -----------------------------------------------------------------
# --target: RUSTFLAGS then apply to the binary's code only, not to build scripts and proc macros.
# The profiles' directory is part of RUSTFLAGS, so it stays the same from run to run (a new one
# would rebuild everything).
RAW=$PWD/target/pgo-generate/profraw
rm -rf "$RAW"
log "instrumented build (target/pgo-generate)"
RUSTFLAGS="-Cprofile-generate=$RAW" cargo build --release --locked -p tlsgate --target "$TARGET" \
  --target-dir target/pgo-generate >&2
GEN=target/pgo-generate/$TARGET/release/tlsgate

# ---- 3. the training -------------------------------------------------------------------------
log "training: the proxy cells (scripts/proxy-compare.sh, $TRAIN_SECS s each)"
WORK=$WORK/proxy SERVERS=tlsgate ROUNDS=1 DURATION=$TRAIN_SECS PROFILE=0 GATEWAY_BIN=$GEN \
  PORT_OFFSET=$PORT_OFFSET scripts/proxy-compare.sh >"$WORK/proxy-compare.txt"

P=$WORK/proxy
PORT=$((19743 + PORT_OFFSET))
ORIGIN_PORT=$((19380 + PORT_OFFSET))
# The same gateway with TLS 1.2 allowed and HTTP/3 on (same port, UDP).
sed -e '/^\[tls\]$/,/^$/d' "$P/tlsgate.toml" >"$WORK/tlsgate.toml"
printf '\n[http3]\nenabled = true\n' >>"$WORK/tlsgate.toml"
ORIGIN_PID="" GW_PID=""
cleanup() {
  bench_stop_pid "$GW_PID"
  bench_stop_pid "$ORIGIN_PID"
}
trap cleanup EXIT
bench_ports_free "$PORT" "$ORIGIN_PORT"
nginx -p "$P" -c "$P/origin.conf" -e "$P/origin-error.log" >"$WORK/origin.log" 2>&1 &
ORIGIN_PID=$!
bench_wait_port "$ORIGIN_PORT" || { log "the origin did not start"; exit 1; }
"$GEN" serve --config "$WORK/tlsgate.toml" >"$WORK/gateway.log" 2>&1 &
GW_PID=$!
bench_wait_port "$PORT" || { log "the gateway did not start:"; tail -n 20 "$WORK/gateway.log" >&2; exit 1; }
URL=https://127.0.0.1:$PORT/13b
train() { # what, bench arguments...
  local what=$1
  shift
  log "training: $what"
  "$GEN" bench -d "$TRAIN_SECS" --json "$WORK/bench.json" "$@" "$URL" >>"$WORK/bench.txt" 2>&1 ||
    { log "tlsgate bench failed ($what):"; tail -n 20 "$WORK/bench.txt" >&2; exit 1; }
  # A training run that made no request trains nothing: fail loudly.
  jq -e '.requests > 0' "$WORK/bench.json" >/dev/null ||
    { log "tlsgate bench made no request ($what): $(jq -c '{requests, errors, first_error}' "$WORK/bench.json")"; exit 1; }
}
train "TLS 1.3 ticket resumption, a request per connection" -c 10 --new-conn --tls 1.3
train "TLS 1.2 ticket resumption" -c 10 --new-conn --tls 1.2
train "TLS 1.2 session-ID resumption" -c 10 --new-conn --tls 1.2 --no-ticket
train "full TLS 1.3 handshakes" -c 10 --lean
train "HTTP/3 keep-alive" -c 4 -m 10 --h3
train "HTTP/3, a QUIC connection per request" -c 4 --h3 --new-conn
bench_stop_pid "$GW_PID"
GW_PID=""
bench_stop_pid "$ORIGIN_PID"
ORIGIN_PID=""

# ---- 4. the optimised build --------------------------------------------------------------------
compgen -G "$RAW/*.profraw" >/dev/null || { log "the training wrote no profile ($RAW)"; exit 1; }
"$PROFDATA" merge -o "$WORK/tlsgate.profdata" "$RAW"/*.profraw
log "profile: $WORK/tlsgate.profdata ($(du -h "$WORK/tlsgate.profdata" | cut -f1)); optimised build (target/pgo)"
RUSTFLAGS="-Cprofile-use=$WORK/tlsgate.profdata" cargo build --release --locked -p tlsgate --target "$TARGET" \
  --target-dir target/pgo >&2
mkdir -p "$(dirname "$OUTPUT")"
cp "target/pgo/$TARGET/release/tlsgate" "$OUTPUT"
log "done"
echo "$OUTPUT"
