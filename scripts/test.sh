#!/usr/bin/env bash
# Quick start, command 2: the whole test suite, exactly what CI runs (.ci/run).
# Formatting, lints (warnings are errors), unit + end-to-end tests (real tlsgate, openssl, curl
# processes on loopback), and a short smoke run of every fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
tlsgate_install_packages "${TLSGATE_BUILD_PACKAGES[@]}" "${TLSGATE_TEST_PACKAGES[@]}"
tlsgate_install_go_tools
tlsgate_install_pq_python

step() { printf '\n== %s\n' "$*" >&2; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (release profile, warnings are errors)"
cargo clippy --release --locked --workspace --all-targets -- -D warnings

step "cargo test (release profile; every failure of the run is shown, not just the first binary's)"
cargo test --release --locked --workspace --no-fail-fast -- --test-threads="${TLSGATE_TEST_THREADS:-2}"

step "fuzz smoke run"
if [ "${TLSGATE_SKIP_FUZZ:-0}" = 1 ]; then
  echo "skipped (TLSGATE_SKIP_FUZZ=1)"
elif rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
  (cd fuzz && for target in $(cargo +nightly fuzz list); do
     cargo +nightly fuzz run "$target" -- -runs="${TLSGATE_FUZZ_RUNS:-100000}" -max_total_time=60 2>&1 | tail -1
   done)
else
  echo "skipped: no nightly toolchain (cargo fuzz needs one)"
fi
