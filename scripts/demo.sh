#!/usr/bin/env bash
# Quick start, command 1: build tlsgate and run the demo gateway (https://localhost:8443).
# Extra arguments go to `tlsgate serve --demo` (e.g. --state-dir DIR --https-port 9443).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
tlsgate_install_packages "${TLSGATE_BUILD_PACKAGES[@]}" openssl curl
cargo build --release --locked -p tlsgate
exec target/release/tlsgate serve --demo "$@"
