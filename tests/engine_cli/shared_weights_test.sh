#!/usr/bin/env bash
# --shared-weights DIR through generate and bench: the first instance builds
# the store file, the next ones map it, and all give a private copy's tokens.
# usage: shared_weights_test.sh ENGINE_BIN MKMODEL_BIN
set -euo pipefail
bin=$1
mk=$2
base=$(mktemp -d "${TMPDIR:-/tmp}/epyctune-shared-weights.XXXXXX")
trap 'rm -rf "$base"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
json() { python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"; }

"$mk" mkmodel "$base/t.gguf" --shape tiny --quant q4_0 -t 1 2>/dev/null
store="$base/store"
mkdir -m 0700 "$store"
gen() { "$bin" generate -m "$base/t.gguf" -n 6 -t 1 --json -p "hello world" "$@"; }

private=$(gen)
[[ $(json 'j["weights"]["store"]' <<<"$private") == private ]] || fail "private store: $private"
want=$(json 'j["tokens"]' <<<"$private")
first=$(gen --shared-weights "$store")
second=$(gen --shared-weights "$store")
[[ $(json 'j["tokens"]' <<<"$first") == "$want" ]] || fail "first shared load: other tokens"
[[ $(json 'j["tokens"]' <<<"$second") == "$want" ]] || fail "second shared load: other tokens"
[[ $(json 'j["weights"]["store"], j["weights"]["built"]' <<<"$first") == "shared True" ]] ||
  fail "first load did not build: $(json 'j["weights"]' <<<"$first")"
[[ $(json 'j["weights"]["store"], j["weights"]["built"]' <<<"$second") == "shared False" ]] ||
  fail "second load did not map the store: $(json 'j["weights"]' <<<"$second")"
file=$(json 'j["weights"]["file"]' <<<"$second")
[[ $(json 'j["weights"]["file"]' <<<"$first") == "$file" ]] || fail "two store files"
[[ $(json 'j["weights"]["inode"]' <<<"$second") == $(stat -c %i "$file") ]] || fail "inode"
[[ $(stat -c %a "$file") == 444 ]] || fail "store file mode $(stat -c %a "$file")"

# bench maps the same file (same model, ISA, layout, no NUMA policy).
b=$("$bin" bench -m "$base/t.gguf" --batch 1 --passes 1 -r 1 -t 1 --ctx 4 --bw-mib 16 --json \
  --shared-weights "$store" 2>/dev/null)
[[ $(json 'j["weights"]["store"], j["weights"]["built"], j["weights"]["file"]' <<<"$b") == \
   "shared False $file" ]] || fail "bench: $(json 'j["weights"]' <<<"$b")"
json 'j["placement"]' <<<"$b" | grep -q "shared read-only from $file" || fail "bench placement"

# On a launch plan: interleaved on node 0 (its own store file), and the
# read-back of the store mapping's pages passes (exit 3 otherwise).
cat >"$base/launch.toml" <<EOT
[weights]
layout = 'interleave'
target_nodes = [ 0 ]
draft_nodes = [ 0 ]

[models]
target = '$base/t.gguf'
EOT
lgen() { "$bin" generate --launch-config "$base/launch.toml" -n 6 --json -p "hello world" "$@"; }
l1=$(lgen --shared-weights "$store") || fail "launch config run 1 exited $?"
l2=$(lgen --shared-weights "$store") || fail "launch config run 2 exited $?"
[[ $(json 'j["tokens"]' <<<"$l2") == "$want" ]] || fail "launch config: other tokens"
[[ $(json 'j["weights"]["built"], j["weights"]["file"] != "'"$file"'"' <<<"$l1") == "True True" ]] ||
  fail "launch config run 1: $(json 'j["weights"]' <<<"$l1")"
[[ $(json 'j["launch"]["memory"]["target weights"]["store"]["store"], j["weights"]["built"]' \
  <<<"$l2") == "shared False" ]] || fail "launch config run 2: $(json 'j["launch"]["memory"]' <<<"$l2")"

# Bad directories and --mmap are refused with the reason.
out=$(gen --shared-weights "$base/absent" 2>&1) && fail "a missing directory accepted"
grep -q "no such directory" <<<"$out" || fail "missing directory message: $out"
mkdir -m 0777 "$base/open"
chmod 0777 "$base/open"
out=$(gen --shared-weights "$base/open" 2>&1) && fail "a world-writable directory accepted"
grep -q "sticky" <<<"$out" || fail "world-writable message: $out"
out=$(gen --shared-weights "$store" --mmap 2>&1) && fail "--mmap with --shared-weights accepted"
grep -q "drop one" <<<"$out" || fail "--mmap message: $out"
echo "shared weights cli ok"
