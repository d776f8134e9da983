#!/usr/bin/env bash
# Single-token decode of the model families against the active-parameter
# roofline, with llama.cpp's tok/s on the same file, the same thread count and
# the same kind of step beside it (issue 22: a 7B-class qwen2 and a
# 30B-A3B-class qwen3moe at >= 90% of their roofline).
#   bench/family_roofline.sh BUILD_DIR MODEL_DIR [REPEATS] [THREADS] [SHAPES...]
# SHAPES are "mkmodel-shape:quant" (default: qwen2.5-7b:q4_0 and
# qwen3-30b-a3b,layers=24:q4_0). A model file already in MODEL_DIR is reused.
# Per repeat, interleaved: epyctune-engine bench --batch 1 (its roofline: the
# read bandwidth probed on the same CPUs around the passes, over the bytes a
# single-token pass reads, which for a MoE model are the router's top-k
# experts, not all of them), then llama.cpp (bench/reference/speed.mjs, 32
# tokens after a 5-token prompt). Medians; one JSON per model in
# bench/results/family_roofline/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}
models=${2:?model dir}
repeats=${3:-5}
threads=${4:-$(nproc)}
shift $(($# < 4 ? $# : 4))
shapes=("$@")
((${#shapes[@]})) || shapes=("qwen2.5-7b:q4_0" "qwen3-30b-a3b,layers=24:q4_0")
E=$build/apps/epyctune-engine/epyctune-engine
MK=$build/tools/epyctune-mkmodel/epyctune-mkmodel
for b in "$E" "$MK"; do [[ -x $b ]] || { echo "family_roofline.sh: $b is not built" >&2; exit 2; }; done
[[ -d $here/reference/node_modules/node-llama-cpp ]] ||
  (cd "$here/reference" && npm install --no-audit --no-fund >/dev/null)
out=$here/results/family_roofline
mkdir -p "$models" "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for s in "${shapes[@]}"; do
  shape=${s%:*} quant=${s##*:}
  f="$models/$(echo "$shape" | tr ',=' '_-')-$quant.gguf"
  [[ -s $f ]] || "$MK" mkmodel "$f" --shape "$shape" --quant "$quant" --seed 1 >/dev/null
  for ((r = 0; r < repeats; ++r)); do
    "$E" bench -m "$f" --batch 1 --passes 8 -r 1 -t "$threads" --json >"$work/e$r.json"
    node "$here/reference/speed.mjs" "$f" "$threads" 32 1 >"$work/l$r.json"
  done
  name=$(basename "$f" .gguf)
  python3 - "$work" "$repeats" "$shape" "$quant" "$threads" "$out/$name.json" <<'EOF'
import json, statistics as st, sys
work, n, shape, quant, threads, dest = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
eng = [json.load(open(f"{work}/e{r}.json")) for r in range(n)]
ref = [json.load(open(f"{work}/l{r}.json"))["tok_s"][0] for r in range(n)]
def k1(j):
    return next(b for b in j["batches"] if b["batch"] == 1)
tps = [1.0 / k1(j)["pass_s"]["median"] for j in eng]
share = [j["roofline_ratio"] for j in eng]
roof = [j["roofline_tokens_per_s"] for j in eng]
gb = eng[0]["bytes_per_token"] / 1e9
row = {
    "shape": shape, "quant": quant, "threads": int(threads), "repeats": n,
    "gb_per_token": gb, "engine_tok_s": st.median(tps), "engine_tok_s_all": tps,
    "roofline_tok_s": st.median(roof), "roofline_share": st.median(share),
    "roofline_share_range": [min(share), max(share)],
    "llamacpp_tok_s": st.median(ref), "llamacpp_tok_s_all": ref,
    "llamacpp_share": st.median(ref) / st.median(roof),
    "engine_over_llamacpp": st.median(tps) / st.median(ref),
}
json.dump({"summary": row, "engine_runs": eng}, open(dest, "w"), indent=1)
print(f"{shape} {quant}: {gb:.2f} GB/token, roofline {row['roofline_tok_s']:.2f} tok/s; "
      f"engine {row['engine_tok_s']:.2f} tok/s = {100*row['roofline_share']:.1f}% "
      f"({100*min(share):.1f}-{100*max(share):.1f}%); llama.cpp {row['llamacpp_tok_s']:.2f} tok/s "
      f"= {100*row['llamacpp_share']:.1f}%; engine/llama.cpp {row['engine_over_llamacpp']:.2f}x")
EOF
done
