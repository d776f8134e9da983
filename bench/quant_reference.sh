#!/usr/bin/env bash
# Greedy tokens of epyctune-engine against llama.cpp (bench/reference) on one
# synthetic model per weight type: the check that our Q5_0 / Q5_1 / Q5_K /
# MXFP4 blocks are ggml's (a misread layout parts within the first tokens).
#   bench/quant_reference.sh BUILD_DIR [TYPES...]   (default: the new types and q4_0)
# The shape has 256-multiple rows so K-quants apply to every matrix, and
# --residual-decay so greedy choices win by a margin (two correct engines
# quantize activations differently).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}; shift
types=("$@"); [[ ${#types[@]} -gt 0 ]] || types=(q4_0 q5_0 q5_1 q5_k q5_k_m mxfp4)
shape=${QUANT_REF_SHAPE:-dim=256,layers=4,heads=4,kv_heads=2,ffn=768,vocab=2048}
n=${QUANT_REF_TOKENS:-64}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
MK=$build/tools/epyctune-mkmodel/epyctune-mkmodel
status=0
for q in "${types[@]}"; do
  "$MK" mkmodel "$dir/$q.gguf" --shape "$shape" --quant "$q" --seed 1 --residual-decay 0.3 >/dev/null
  if out=$("$here/reference/compare.sh" "$build" "$dir/$q.gguf" "The quick brown fox" "$n" 2>&1); then
    echo "$q: $out"
  else
    echo "$q: $out"; status=1
  fi
  rm -f "$dir/$q.gguf"
done
exit $status
