#!/usr/bin/env bash
# The q8_0 KV cache against f16 on one model: greedy token agreement over a
# handful of prompts (generate, plain decoding, same threads), and positions
# per GiB of KV pool as serve sizes it (its start-up line).
#   bench/kv_q8.sh BUILD_DIR MODEL [N_TOKENS]
# Writes a markdown table on stdout (bench/results/kv_q8.md holds one run).
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR MODEL [N_TOKENS]}
model=${2:?usage: $0 BUILD_DIR MODEL [N_TOKENS]}
n=${3:-48}
engine=$build/apps/epyctune-engine/epyctune-engine
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

prompts=("The quick brown fox" "Once upon a time, in a land far away," "def fibonacci(n):"
         "The capital of France is" "1, 2, 3, 4, 5," "In the beginning was the")

# The token ids of one greedy generation (generate --json's "tokens").
tokens() {  # TYPE PROMPT
  "$engine" generate -m "$model" -t 2 --kv-type "$1" -p "$2" -n "$n" --temp 0 --json 2>/dev/null
}

# Positions a 1 GiB pool holds, from serve's start-up line.
positions_per_gib() {  # TYPE
  "$engine" serve -m "$model" -t 1 --port 0 --kv-budget 1G --kv-type "$1" \
    >"$tmp/serve.out" 2>"$tmp/serve.err" &
  local pid=$!
  for _ in $(seq 600); do
    grep -q listening "$tmp/serve.out" 2>/dev/null && break
    sleep 0.1
  done
  kill -TERM "$pid"
  wait "$pid" || true
  sed -n 's/.*KV pool \([0-9]*\) positions.*/\1/p' "$tmp/serve.err"
}

echo "| prompt | greedy tokens | same as f16 | first difference at |"
echo "|---|---|---|---|"
total=0 same_total=0
for p in "${prompts[@]}"; do
  tokens f16 "$p" >"$tmp/f16.json"
  tokens q8_0 "$p" >"$tmp/q8.json"
  read -r len same first < <(python3 - "$tmp/f16.json" "$tmp/q8.json" <<'EOF'
import json, sys
def ids(path):
    j = json.load(open(path))
    return j["tokens"]
a, b = ids(sys.argv[1]), ids(sys.argv[2])
n = min(len(a), len(b))
same = sum(1 for i in range(n) if a[i] == b[i])
first = next((i for i in range(n) if a[i] != b[i]), "-")
print(len(a), same, first)
EOF
)
  echo "| \`$p\` | $len | $same | $first |"
  total=$((total + len))
  same_total=$((same_total + same))
done
echo
echo "Agreement: $same_total of $total tokens."
f16=$(positions_per_gib f16)
q8=$(positions_per_gib q8_0)
echo
echo "| KV type | positions per GiB |"
echo "|---|---|"
echo "| f16 | $f16 |"
echo "| q8_0 | $q8 ($(python3 -c "print(f'{$q8/$f16:.2f}')")x) |"
