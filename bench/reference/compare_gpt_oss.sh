#!/usr/bin/env bash
# Greedy tokens of epyctune-engine against llama.cpp on synthetic gpt-oss
# models: a tiny one, and gpt-oss-20b's real layer, head and expert geometry
# with 1 or 2 layers and an 8192-token vocabulary. The window is cut to 16
# positions (swa=16) so that 64 tokens cross it; f32 weights (and once with
# every expert used, so that no router choice is involved), then the released
# files' mix (MXFP4 experts, Q8_0 elsewhere). MARGIN (default 0.25; 0 for
# the plain seeded weights) writes them with `mkmodel --margin`: every greedy
# step on the prompt wins by MARGIN x the logits' std and the router's k-th
# and (k+1)-th logits stand apart, so a parting is a bug, not rounding.
# Results: bench/results/gpt_oss_reference.md.
#   bench/reference/compare_gpt_oss.sh BUILD_DIR [OUT_DIR] [N] [MARGIN]
# A 2-layer f32 file of the real geometry is 6.6 GB: the machine needs about
# twice that free (llama.cpp and the engine run one after the other).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}; out=${2:-/tmp/epyctune-reference}; n=${3:-64}; margin=${4:-0.25}
prompt="The quick brown fox"
MK=$build/tools/epyctune-mkmodel/epyctune-mkmodel
mkdir -p "$out"
cases=("tiny,arch=gpt-oss,rope_factor=4,rope_orig_ctx=64 f32"
       "tiny,arch=gpt-oss,rope_factor=4,rope_orig_ctx=64 mxfp4_moe"
       "gpt-oss-20b,layers=1,vocab=8192,swa=16 f32"
       "gpt-oss-20b,layers=2,vocab=8192,swa=16,experts=4,experts_used=4 f32"
       "gpt-oss-20b,layers=2,vocab=8192,swa=16 f32"
       "gpt-oss-20b,layers=2,vocab=8192 f32"
       "gpt-oss-20b,layers=2,vocab=8192,swa=16 mxfp4_moe")
printf '%-52s %-9s %-6s %-22s %s\n' shape quant size "top-1 gap, router gap" result
for c in "${cases[@]}"; do
  read -r spec quant <<<"$c"
  f="$out/$(echo "$spec" | tr ',=' '_-')-$quant-m$margin.gguf"
  mk=(--shape "$spec" --quant "$quant" --margin-steps "$n" --margin-prompt "$prompt")
  [[ $margin == 0 ]] || mk+=(--margin "$margin")
  [[ -f $f ]] || "$MK" mkmodel "$f" "${mk[@]}" >/dev/null 2>&1 ||
    { printf '%-52s %-9s %s\n' "$spec" "$quant" "mkmodel failed"; continue; }
  gaps=$("$MK" margins -m "$f" -p "$prompt" -n "$n" --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
rg = r["min_router_gap"]
print("%.3f x std, %s" % (r["min_relative_gap"], "-" if rg is None else "%.2f" % rg))')
  res=$("$here/compare.sh" "$build" "$f" "$prompt" "$n" 2>&1 | tail -1)
  printf '%-52s %-9s %-6s %-22s %s\n' "$spec" "$quant" "$(du -h "$f" | cut -f1)" "$gaps" "$res"
  [[ ${KEEP:-0} == 1 ]] || rm -f "$f"
done
