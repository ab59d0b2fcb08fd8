#!/usr/bin/env bash
# Two tlsgate builds side by side in the proxy cells of scripts/proxy-compare.sh, in alternating
# pairs (the order swapped every pair): each pair runs proxy-compare.sh once per build with
# SERVERS=tlsgate and one round of every cell asked for, so both builds meet the same origin,
# clients and machine within a minute of each other. Per cell: requests (or MiB) per proxy
# CPU-second of each run, B ÷ A per pair and the median of the pairs, and the user/system
# microseconds per request of every run (what moved: user space or the kernel). For a change
# the rounds of proxy-compare's own table cannot resolve (±15 % from round to round on a shared
# machine); scripts/proxy-instructions.sh counts instructions instead, deterministically.
#
#   scripts/proxy-ab.sh /tmp/tlsgate-before /tmp/tlsgate-after
#   CELLS="h1_13 h2_13 grpc" PAIRS=6 scripts/proxy-ab.sh target/release/tlsgate target/pgo/tlsgate
#
# Environment: CELLS ("h1_13 h2_13 h2h2_13 grpc"; any of proxy-compare.sh's), PAIRS (4),
# DURATION (4 s per run), WORK (a new /tmp/tlsgate-proxy-ab.*; each run's proxy-compare
# directory is kept in it as <pair>-<A|B>), PORT_OFFSET (as proxy-compare.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: $0 BINARY_A BINARY_B}
B=${2:?usage: $0 BINARY_A BINARY_B}
CELLS=${CELLS:-"h1_13 h2_13 h2h2_13 grpc"}
PAIRS=${PAIRS:-4}
DURATION=${DURATION:-4}
WORK=${WORK:-$(mktemp -d /tmp/tlsgate-proxy-ab.XXXXXX)}
mkdir -p "$WORK"
chmod 755 "$WORK" # the origin nginx's workers (www-data) read files below it
for bin in "$A" "$B"; do
  [ -x "$bin" ] || { echo "proxy-ab: $bin is not an executable" >&2; exit 2; }
done

one() { # pair, A|B, binary
  local dir=$WORK/$1-$2
  echo "proxy-ab: pair $1, $2 ($3)" >&2
  WORK=$dir SERVERS=tlsgate CELLS="$CELLS" ROUNDS=1 DURATION=$DURATION PROFILE=0 GATEWAY_BIN=$3 \
    scripts/proxy-compare.sh >"$dir.txt" 2>"$dir.log" || {
    echo "proxy-ab: proxy-compare.sh failed for $3 (pair $1):" >&2
    tail -n 20 "$dir.log" >&2
    exit 1
  }
}
for i in $(seq "$PAIRS"); do
  if ((i % 2)); then one "$i" A "$A"; one "$i" B "$B"; else one "$i" B "$B"; one "$i" A "$A"; fi
done

echo "A = $A"
echo "B = $B"
echo "$PAIRS pairs of one $DURATION s run per cell and build, the order swapped every pair"
echo
echo "| cell | A per CPU-s (each pair) | B per CPU-s | B ÷ A (each pair) | median B ÷ A | user/sys µs per request, A → B (medians) |"
echo "|---|---|---|---|---:|---|"
for cell in $CELLS; do
  jq -rs --arg cell "$cell" --argjson pairs "$PAIRS" '
    def med: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
      else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    def fmt: if . == null then "n/a" elif . >= 1000 then (. | round | tostring) else (. * 100 | round / 100 | tostring) end;
    [.[] | select(.id == $cell and .server == "tlsgate")] as $runs
    | [range(1; $pairs + 1) as $p
        | {a: ($runs[] | select(.pair == $p and .build == "A")), b: ($runs[] | select(.pair == $p and .build == "B"))}]
    | . as $pp
    | ($pp | map(.b.per / .a.per)) as $r
    | ($pp | map(.a.user / .a.count * 1e6) | med) as $ua | ($pp | map(.a.sys / .a.count * 1e6) | med) as $sa
    | ($pp | map(.b.user / .b.count * 1e6) | med) as $ub | ($pp | map(.b.sys / .b.count * 1e6) | med) as $sb
    | "| \($cell) | \($pp | map(.a.per | fmt) | join(", ")) | \($pp | map(.b.per | fmt) | join(", ")) | \($r | map(. * 1000 | round / 1000 | tostring) | join(", ")) | **\($r | med * 1000 | round / 1000)** | \($ua * 100 | round / 100)/\($sa * 100 | round / 100) → \($ub * 100 | round / 100)/\($sb * 100 | round / 100) |"
  ' < <(for i in $(seq "$PAIRS"); do
    for b in A B; do
      jq -c --argjson p "$i" --arg b "$b" '. + {pair: $p, build: $b}' "$WORK/$i-$b/results.jsonl"
    done
  done)
done
