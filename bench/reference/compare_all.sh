#!/usr/bin/env bash
# Greedy tokens of epyctune-engine against llama.cpp for every architecture
# mkmodel writes, on synthetic models of the real models' layer and head
# geometry with fewer layers and a smaller vocabulary (so that the files fit
# a small machine), in each weight type asked for, and prints a table.
#   bench/reference/compare_all.sh BUILD_DIR [OUT_DIR] [N] [LAYERS] [VOCAB] [QUANTS] [MARGIN]
# QUANTS: space-separated weight types (default "f32 q8_0").
# MARGIN: mkmodel --margin G (default 0.25): every greedy step on the compared
# prompt wins by G x the logits' std, and MoE routing by a planted gap, so two
# correct engines that round differently agree and a difference is a bug.
# MARGIN 0 writes the plain seeded weights (near-ties are then expected in
# quantised files). The table gives, per model, the measured smallest top-1
# gap (x logit std), the smallest router top-k gap, and the comparison.
# Set MOE_LAYERS (default 1) for the qwen3-30b-a3b geometry, SHAPES
# (space-separated) to run only some shapes; files are deleted after use
# unless KEEP=1.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}; out=${2:-/tmp/epyctune-reference}; n=${3:-64}
layers=${4:-2}; vocab=${5:-8192}; quants=${6:-f32 q8_0}; margin=${7:-0.25}
moe_layers=${MOE_LAYERS:-1}
prompt="The quick brown fox"
MK=$build/tools/epyctune-mkmodel/epyctune-mkmodel
mkdir -p "$out"
shapes=(tiny "tiny,arch=qwen2" "tiny,arch=qwen3" "tiny,rope_factor=8,rope_orig_ctx=16,ctx=16384"
        "tiny,arch=qwen3moe,experts=8,experts_used=2,expert_ffn=64,dim=256"
        llama3.1-8b llama3.2-1b qwen2.5-7b qwen2.5-0.5b qwen3-8b qwen3-0.6b qwen3-30b-a3b
        # deepseek2: V2-Lite's geometry whole (64 experts); V3's layer and head
        # geometry with 16 of its 256 experts (8 of them used), so f32 fits.
        deepseek-v2-lite "deepseek-v3,dense_lead=1,experts=16")
[[ -z ${SHAPES:-} ]] || read -ra shapes <<<"$SHAPES"
printf '%-40s %-8s %-6s %-6s %-10s %-9s %s\n' shape arch quant size top1-gap router result
for q in $quants; do
  for s in "${shapes[@]}"; do
    spec=$s
    case $s in
      tiny*) ;;
      qwen3-30b-a3b) spec="$s,layers=$moe_layers,vocab=$vocab" ;;
      *) spec="$s,layers=$layers,vocab=$vocab" ;;
    esac
    f="$out/$(echo "$spec" | tr ',=' '_-')-$q-m$margin.gguf"
    mk=(--shape "$spec" --quant "$q" --fast-quant --margin-steps "$n" --margin-prompt "$prompt")
    [[ $margin == 0 ]] || mk+=(--margin "$margin")
    [[ -f $f ]] || "$MK" mkmodel "$f" "${mk[@]}" >/dev/null 2>&1 ||
      { printf '%-40s %s\n' "$spec" "mkmodel failed"; rm -f "$f"; continue; }
    arch=$(python3 -c "import sys; s=sys.argv[1]; print('deepseek2' if 'deepseek' in s else 'qwen3moe' if 'moe' in s or '30b' in s else 'qwen2' if 'qwen2' in s else 'qwen3' if 'qwen3' in s else 'llama')" "$spec")
    gaps=$("$MK" margins -m "$f" -p "$prompt" -n "$n" --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
rg = r["min_router_gap"]
print("%.3f %s" % (r["min_relative_gap"], "-" if rg is None else "%.2f" % rg))')
    res=$("$here/compare.sh" "$build" "$f" "$prompt" "$n" 2>&1 | tail -1)
    printf '%-40s %-8s %-6s %-6s %-10s %-9s %s\n' "$spec" "$arch" "$q" "$(du -h "$f" | cut -f1)" \
      "${gaps% *}" "${gaps#* }" "$res"
    [[ ${KEEP:-0} == 1 ]] || rm -f "$f"
  done
done
