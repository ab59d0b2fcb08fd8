#!/usr/bin/env bash
# Installs the Debian packages tlsgate needs, only those missing (sourced by demo.sh and test.sh).
#   build: cmake, clang, libclang-dev (BoringSSL through the boring crate), pkg-config
#   tests: openssl (s_client), curl (HTTP/2 client), iproute2 (ss), procps, nginx-light (the peer
#          server of crates/tlsgate/tests/bench_nginx.rs), nghttp2-client (nghttp: the HTTP/2
#          SETTINGS the gateway sends, tests/optimisations.rs), redis-server (+ redis-cli, also
#          run as a Sentinel) and memcached (the cluster session stores, tests/cluster.rs),
#          python3-grpcio (gRPC origin and client of tests/grpc.rs, run with /usr/bin/python3),
#          python3-websockets (WebSocket origin and client of tests/websocket.rs, /usr/bin/python3),
#          systemd (systemd-analyze verify of dist/systemd/tlsgate.service, tests/systemd.rs),
#          logrotate (runs the Debian package's /etc/logrotate.d/tlsgate) and groff-base (groff,
#          preconv: parses its man pages), tests/package.rs; that test runs scripts/package.sh,
#          which installs cargo-deb 3 (cargo install --locked) when missing and needs objcopy
#          (binutils, with g++) for the -dbgsym package; wrk (load through binary upgrades,
#          tests/upgrade.rs)
#   lab:   iproute2 (ip netns/addr/route) and procps (sysctl) for `tlsgate lab` and its tests, which
#          also need the kernel's TUN device (/dev/net/tun) and root
#   bench: nginx-light, haproxy, wrk, nghttp2-client (h2load), jq, curl, openssl, util-linux (taskset)
#          for scripts/peer-compare.sh and scripts/proxy-compare.sh, installed when missing by
#          scripts/lib/bench.sh (bench_install_missing, through tlsgate_install_packages below);
#          golang-go builds proxy-compare's gRPC origin (scripts/proxy/grpc-origin: its grpc-go
#          needs Go 1.25, which Go 1.21 or later fetches by itself; Debian 12's 1.19 cannot)
set -euo pipefail

tlsgate_install_packages() {
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    echo "installing: ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

TLSGATE_BUILD_PACKAGES=(cmake clang libclang-dev pkg-config make g++ perl git ca-certificates)
# libnss3-tools: NSS's tstclnt and certutil, the delegated-credential client (tests/delegated_credentials.rs).
TLSGATE_TEST_PACKAGES=(openssl curl iproute2 procps nginx-light nghttp2-client redis-server memcached chromium python3-grpcio python3-websockets systemd logrotate groff-base wrk libnss3-tools)

# Go: the test clients it builds need Go >= 1.26 (tests/go/h3client: quic-go v0.65, for
# crates/tlsgate/tests/http3.rs; tests/go/echclient: crypto/tls's ECH client, for tests/ech.rs;
# both built by the tests with `go build`), and the tools below are built with it too. Where the
# `go` on PATH is older (Debian 12's golang-go is 1.19), $TLSGATE_GO_VERSION is fetched from the
# Go module proxy and its bin directory goes first on PATH, for this script and the tests.
# Go-built test clients, installed with `go install` into $(go env GOPATH)/bin (put on PATH):
#   h2spec: HTTP/2 conformance (crates/tlsgate/tests/proxy_requests.rs)
#   pebble, pebble-challtestsrv: Let's Encrypt's ACME test CA and its DNS (crates/tlsgate/tests/acme.rs)
TLSGATE_GO_VERSION=go1.26.8
TLSGATE_GO_TOOLS=(github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible
  github.com/letsencrypt/pebble/v2/cmd/pebble@v2.8.0
  github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv@v2.8.0)

tlsgate_install_go_tools() {
  command -v go >/dev/null || tlsgate_install_packages golang-go
  local bin
  bin="$(go env GOPATH)/bin"
  export PATH="$PATH:$bin"
  if ! go version | grep -Eq 'go1\.(2[6-9]|[3-9][0-9])'; then
    # The toolchain as the Go module proxy serves it (what GOTOOLCHAIN fetches in Go >= 1.21;
    # any Go can download a module), so only the module proxy has to be reachable; copied out of
    # the read-only module cache with its programs made executable, as `go` does itself.
    local root="${XDG_DATA_HOME:-$HOME/.local/share}/tlsgate/$TLSGATE_GO_VERSION"
    if [ ! -x "$root/bin/go" ]; then
      local mod="golang.org/toolchain@v0.0.1-$TLSGATE_GO_VERSION.linux-$(go env GOARCH)" dir
      echo "installing: $TLSGATE_GO_VERSION (module $mod; the test clients need Go >= 1.26)" >&2
      dir=$(GOFLAGS=-mod=mod go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
      [ -d "$dir" ] || { echo "cannot download $mod" >&2; return 1; }
      mkdir -p "$(dirname "$root")"
      rm -rf "$root.tmp" && cp -r "$dir" "$root.tmp" && chmod -R u+w "$root.tmp"
      chmod +x "$root.tmp"/bin/* "$root.tmp"/pkg/tool/*/*
      mv "$root.tmp" "$root"
    fi
    export PATH="$root/bin:$PATH"
  fi
  for tool in "${TLSGATE_GO_TOOLS[@]}"; do
    local name="${tool%@*}"
    name="${name##*/}"
    if ! command -v "$name" >/dev/null; then
      echo "installing: $tool (go install)" >&2
      GOFLAGS=-mod=mod go install "$tool"
    fi
  done
}

# ML-DSA test client (crates/tlsgate/tests/mldsa.rs): pyOpenSSL on cryptography >= 50, whose
# wheels bundle OpenSSL 4 (ML-DSA-44/65/87 in X.509 and TLS 1.3; Debian 12's OpenSSL 3.0 has
# none). Installed from PyPI into its own virtual environment, so the system Python is untouched;
# the test runs $TLSGATE_PQ_VENV/bin/python.
TLSGATE_PQ_VENV="${TLSGATE_PQ_VENV:-${XDG_DATA_HOME:-$HOME/.local/share}/tlsgate/pq-venv}"

tlsgate_install_pq_python() {
  if ! "$TLSGATE_PQ_VENV/bin/python" -c 'import OpenSSL, cryptography, sys; sys.exit(int(cryptography.__version__.split(".")[0]) < 50)' 2>/dev/null; then
    echo "installing: cryptography>=50 pyOpenSSL into $TLSGATE_PQ_VENV (pip)" >&2
    dpkg -s python3-venv >/dev/null 2>&1 || tlsgate_install_packages python3-venv
    python3 -m venv "$TLSGATE_PQ_VENV"
    "$TLSGATE_PQ_VENV/bin/pip" install -q --upgrade 'cryptography>=50' 'pyOpenSSL>=25'
  fi
}
