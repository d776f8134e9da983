#!/usr/bin/env bash
# Expert reduction on a mixture-of-experts model: tok/s and how far greedy
# output drifts from the full-expert output, for --experts-per-token N.
#   bench/moe_experts.sh BUILD_DIR MODEL.gguf [N_LIST] [TOKENS] [REPEATS]
# N_LIST defaults to "top-k, top-k/2, 2" (top-k: the model's expert_used_count).
# Per N: single-token decode tok/s and its share of the active-parameter
# roofline (epyctune-engine bench --batch 1, repeats interleaved across N so
# a drifting host moves every N alike; medians), generation tok/s, and token
# agreement with N = top-k on a fixed prompt set: the share of positions
# before the first differing token (greedy output cannot re-converge
# meaningfully after it) and the mean first-divergence position.
# Prints a table and writes bench/results/moe_experts-<model>.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}
model=${2:?model.gguf}
n_list=${3:-}
tokens=${4:-64}
repeats=${5:-3}
engine="$build/apps/epyctune-engine/epyctune-engine"
[[ -x $engine ]] || { echo "moe_experts.sh: $engine is not built" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

prompts=(
  "The quick brown fox"
  "Once upon a time"
  "In the beginning"
  "def fibonacci(n):"
  "The capital of France is"
  "1, 2, 3, 4,"
  "Dear Sir or Madam,"
  "To be or not to be"
)

bench() {  # N REPEAT -> bench JSON in $work/bench-N-R.json
  local extra=()
  [[ $1 == full ]] || extra=(--experts-per-token "$1")
  "$engine" bench --model "$model" --batch 1 --passes 8 -r 1 --json "${extra[@]}" \
    >"$work/bench-$1-$2.json" 2>"$work/bench-$1-$2.err" ||
    { cat "$work/bench-$1-$2.err" >&2; exit 1; }
}

bench full 0
topk=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["config"]["experts_per_token"])' \
  "$work/bench-full-0.json")
if ((topk == 0)); then
  echo "moe_experts.sh: $model has no experts (a dense model)" >&2
  exit 2
fi
[[ -n $n_list ]] || n_list=$(printf '%s\n' "$topk" $((topk / 2)) 2 | awk '$1 > 0 && !seen[$1]++' | tr '\n' ' ')

for ((r = 1; r <= repeats; r++)); do
  for n in $n_list; do bench "$n" "$r"; done
done
for n in $n_list; do
  for i in "${!prompts[@]}"; do
    "$engine" generate --model "$model" --prompt "${prompts[$i]}" -n "$tokens" --json \
      --experts-per-token "$n" >"$work/gen-$n-$i.json" 2>"$work/gen-$n-$i.err" ||
      { cat "$work/gen-$n-$i.err" >&2; exit 1; }
  done
done

mkdir -p "$here/results"
out="$here/results/moe_experts-$(basename "$model" .gguf).json"
python3 - "$work" "$topk" "$tokens" "$repeats" "${#prompts[@]}" "$model" "$out" $n_list <<'PY'
import json, statistics, sys
work, topk, tokens, repeats, n_prompts, model, out = sys.argv[1:8]
topk, tokens, repeats, n_prompts = int(topk), int(tokens), int(repeats), int(n_prompts)
ns = [int(n) for n in sys.argv[8:]]
def load(p):
    with open(p) as f:
        return json.load(f)
full = [load(f"{work}/gen-{topk}-{i}.json")["tokens"] for i in range(n_prompts)] if topk in ns else None
rows = []
for n in ns:
    b = [load(f"{work}/bench-{n}-{r}.json") for r in range(1, repeats + 1)]
    tps = [x["batches"][0]["tokens_per_s"]["median"] for x in b]
    roof = [x["roofline_ratio"] for x in b]
    gens = [load(f"{work}/gen-{n}-{i}.json") for i in range(n_prompts)]
    row = {"experts_per_token": n,
           "decode_tok_s": statistics.median(tps), "decode_tok_s_samples": tps,
           "roofline_ratio": statistics.median(roof), "roofline_ratio_samples": roof,
           "bytes_per_token": b[0]["bytes_per_token"],
           "bandwidth_gbps": statistics.median(x["bandwidth_gbps"]["median"] for x in b),
           "generate_tok_s": statistics.median(g["timings"]["tok_s"] for g in gens)}
    if full:
        firsts = []
        for g, f in zip(gens, full):
            t = g["tokens"]
            d = next((i for i, (x, y) in enumerate(zip(t, f)) if x != y), min(len(t), len(f)))
            firsts.append(d)
        row["agreement"] = sum(firsts) / (len(firsts) * tokens)
        row["first_divergence"] = firsts
    rows.append(row)
b0 = load(f"{work}/bench-full-0.json")
doc = {"model": model, "config": b0["config"], "threads": b0["threads"], "isa": b0["isa"],
       "tokens": tokens, "prompts": n_prompts, "repeats": repeats, "rows": rows}
with open(out, "w") as f:
    json.dump(doc, f, indent=2)
print(f"model {model}: {b0['config']['experts']} experts, top-k {topk}, {b0['threads']} threads, "
      f"ISA {b0['isa']}")
print(f"{'N':>3} {'decode tok/s':>13} {'roofline':>9} {'MB/token':>9} {'gen tok/s':>10} "
      f"{'agreement':>10}  first divergence per prompt")
for r in rows:
    agree = f"{100 * r['agreement']:.1f}%" if "agreement" in r else "-"
    print(f"{r['experts_per_token']:>3} {r['decode_tok_s']:>13.2f} {100 * r['roofline_ratio']:>8.1f}% "
          f"{r['bytes_per_token'] / 1e6:>9.1f} {r['generate_tok_s']:>10.2f} {agree:>10}  "
          f"{r.get('first_divergence', '')}")
print(f"(written to {out})")
PY
