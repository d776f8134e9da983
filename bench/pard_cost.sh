#!/usr/bin/env bash
# Draft cost per round, parallel (PARD-style: one pass over [last, mask x (K-1)])
# vs autoregressive (K passes of one token), on a 1B-shape Q4_0 draft.
#
# The target is the same 1B model, so the autoregressive draft agrees on every
# token and each round drafts a full K; the parallel draft is the same weights
# with a mask token in its metadata (mkmodel --pard). Only the draft side is
# compared: draft seconds per verify round, from generate --json's spec stats
# (draft_s / target_passes; the one-token prompt adds nothing measurable).
# Rounds of the two kinds run interleaved; medians of REPEAT.
#
# usage: bench/pard_cost.sh ENGINE [DIR=/tmp/epyctune-models] [REPEAT=3] [CPUS=0-1] [N=128]
# Env: MKMODEL, the dev tool that writes the models (default
# build/tools/epyctune-mkmodel/epyctune-mkmodel).
set -euo pipefail
engine=${1:?usage: pard_cost.sh ENGINE [DIR] [REPEAT] [CPUS] [N]}
mkmodel=${MKMODEL:-build/tools/epyctune-mkmodel/epyctune-mkmodel}
dir=${2:-/tmp/epyctune-models}
repeat=${3:-3}
cpus=${4:-0-1}
n=${5:-128}
ar=$dir/1b-q4_0.gguf
par=$dir/1b-q4_0-pard.gguf
mkdir -p "$dir"
# Temp name, then rename: other runs may be writing the same file.
make() {  # OUT ARGS...
  local out=$1
  shift
  [[ -f $out ]] && return 0
  "$mkmodel" mkmodel "$out.$$.tmp" --shape 1b --quant q4_0 --seed 1 --residual-decay 0.3 "$@"
  mv -f "$out.$$.tmp" "$out"
}
make "$ar"
make "$par" --pard

declare -A cost passes
for ((r = 0; r < repeat; r++)); do
  for k in 1 2 4 8 16; do
    for kind in ar par; do
      d=$ar
      [[ $kind == par ]] && d=$par
      j=$("$engine" generate --json --model "$ar" --model-draft "$d" --draft-max "$k" \
        --spec-mode shared --cpus "$cpus" -n "$n" --prompt "x")
      cost[$kind,$k]+="$(jq '.spec.draft_s / .spec.target_passes * 1000' <<<"$j") "
      passes[$kind,$k]=$(jq '(.spec.draft_passes / .spec.target_passes * 100 | round) / 100' <<<"$j")
    done
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| K | autoregressive ms/round | draft passes/round | parallel ms/round | draft passes/round | parallel / autoregressive |"
echo "|---|---|---|---|---|---|"
for k in 1 2 4 8 16; do
  a=$(median <<<"${cost[ar,$k]}")
  p=$(median <<<"${cost[par,$k]}")
  printf '| %d | %.1f | %s | %.1f | %s | %.2f |\n' "$k" "$a" "${passes[ar,$k]}" "$p" \
    "${passes[par,$k]}" "$(awk -v a="$a" -v p="$p" 'BEGIN {print p / a}')"
done
