#!/usr/bin/env bash
# Greedy tokens of epyctune-engine against llama.cpp for every architecture
# mkmodel writes, on synthetic models of the real models' layer and head
# geometry with fewer layers and a smaller vocabulary (so that f32 files fit
# a small machine), and prints a table.
#   bench/reference/compare_all.sh BUILD_DIR [OUT_DIR] [N] [LAYERS] [VOCAB]
# f32 weights: two correct engines then differ only in the last bits of an
# activation, far below the gap between a greedy choice and the runner-up.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}; out=${2:-/tmp/epyctune-reference}; n=${3:-64}
layers=${4:-2}; vocab=${5:-8192}
E=$build/apps/epyctune-engine/epyctune-engine
mkdir -p "$out"
shapes=(tiny "tiny,arch=qwen2" "tiny,arch=qwen3" "tiny,rope_factor=8,rope_orig_ctx=16,ctx=16384"
        llama3.1-8b llama3.2-1b qwen2.5-7b qwen2.5-0.5b qwen3-8b qwen3-0.6b
        # deepseek2: V2-Lite's geometry whole (64 experts); V3's layer and head
        # geometry with 16 of its 256 experts (8 of them used), so f32 fits.
        deepseek-v2-lite "deepseek-v3,dense_lead=1,experts=16")
printf '%-34s %-7s %-6s %s\n' shape arch size result
for s in "${shapes[@]}"; do
  spec=$s
  [[ $s == tiny* ]] || spec="$s,layers=$layers,vocab=$vocab"
  f="$out/$(echo "$spec" | tr ',=' '_-').gguf"
  [[ -f $f ]] || "$E" mkmodel "$f" --shape "$spec" --quant f32 --fast-quant >/dev/null 2>&1 ||
    { printf '%-34s %s\n' "$spec" "mkmodel failed"; continue; }
  case $spec in
    *arch=qwen2* | qwen2*) arch=qwen2 ;;
    *arch=qwen3* | qwen3*) arch=qwen3 ;;
    deepseek*) arch=deepseek2 ;;
    *) arch=llama ;;
  esac
  res=$("$here/compare.sh" "$build" "$f" "The quick brown fox" "$n" 2>&1 | tail -1)
  printf '%-34s %-7s %-6s %s\n' "$spec" "$arch" "$(du -h "$f" | cut -f1)" "$res"
done
