#!/usr/bin/env bash
# Builds the Debian package of tlsgate (docs/OPERATIONS.md, "Installing from the Debian package"):
#
#   scripts/package.sh [--no-build | --pgo] [--fast] [--output FILE_OR_DIR]
#
# 1. installs cargo-deb when missing (cargo install --locked);
# 2. builds the release binary (--no-build: use the one already in target/release/; --pgo: the
#    profile-guided build of scripts/build-pgo.sh, copied to target/release/tlsgate — the
#    package's binary is then the one docs/BENCHMARKS.md measures as "PGO");
# 3. has that binary write its man pages and bash/zsh/fish completions (`tlsgate generate`, from
#    the same clap definition that parses its command line) into target/release/package/;
# 4. runs `cargo deb -p tlsgate --no-build` on [package.metadata.deb] of crates/tlsgate/Cargo.toml.
#
# Two files come out (their paths are printed last), in target/debian/ or --output DIR:
# tlsgate_<version>-1_<arch>.deb and tlsgate-dbgsym_<version>-1_<arch>.ddeb (the binary's line
# tables). --fast: lighter compression (crates/tlsgate/tests/package.rs uses it).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/package.sh [--no-build | --pgo] [--fast] [--output FILE_OR_DIR]" >&2; exit 2; }
build=1
deb_args=()
while (($#)); do
  case "$1" in
    --no-build) build=0 ;;
    --pgo) build=pgo ;;
    --fast) deb_args+=(--fast) ;;
    --output) (($# > 1)) || usage; deb_args+=(--output "$2"); shift ;;
    *) usage ;;
  esac
  shift
done

if ! cargo deb --version >/dev/null 2>&1; then
  echo "installing: cargo-deb (cargo install --locked)" >&2
  # `cargo-deb@3` is refused by cargo 1.95 (a partial version after @); a requirement is not.
  cargo install --locked cargo-deb --version '^3'
fi

target="${CARGO_TARGET_DIR:-target}"
if [ "$build" = pgo ]; then
  mkdir -p "$target/release"
  OUTPUT="$target/release/tlsgate" scripts/build-pgo.sh >/dev/null
elif ((build)); then
  cargo build --release --locked -p tlsgate
fi
bin="$target/release/tlsgate"
[ -x "$bin" ] || { echo "package.sh: no $bin (run without --no-build)" >&2; exit 1; }

# The generated assets [package.metadata.deb] names under target/release/package/.
assets="$target/release/package"
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
"$bin" generate man "$assets/man" >/dev/null
gzip -9n "$assets"/man/*.1 # Debian policy: man pages compressed, without a time stamp
"$bin" generate completions bash >"$assets/completions/tlsgate.bash"
"$bin" generate completions zsh >"$assets/completions/_tlsgate"
"$bin" generate completions fish >"$assets/completions/tlsgate.fish"

cargo deb -p tlsgate --no-build "${deb_args[@]}"
