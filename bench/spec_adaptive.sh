#!/usr/bin/env bash
# Adaptive speculative decoding at 7B scale (issue 21): a 7B-shape Q4_0 target
# with 1B-class Q4_0 drafts at three agreements, 2 threads, greedy, 128 tokens.
# Each `bench --draft` run decodes plain and every speculative configuration
# in turn per repeat (interleaved) and reports medians, acceptance by
# position, the K the adaptive controller chose, and the cost model's
# prediction next to the measurement. It fails if any speculative output
# differs from plain decoding.
#
#   bench/spec_adaptive.sh [ENGINE] [MODEL_DIR] [OUT_DIR]
#
# Models are made once and reused (the target is ~3.8 GB), by MKMODEL (default
# build/tools/epyctune-mkmodel/epyctune-mkmodel).
set -euo pipefail
E=${1:-build/apps/epyctune-engine/epyctune-engine}
MK=${MKMODEL:-build/tools/epyctune-mkmodel/epyctune-mkmodel}
M=${2:-/tmp/epyctune-models}
OUT=${3:-bench/results/spec_adaptive}
THREADS=${THREADS:-2}
N=${N:-128}
REPEAT=${REPEAT:-3}
MODE=${MODE:-shared}
SPEC=${SPEC:-adaptive,2,4,8}
AGREEMENTS=${AGREEMENTS:-1.0 0.8 0.3}
mkdir -p "$M" "$OUT"

T=$M/T7b.gguf
if [ ! -f "$T" ]; then
  "$MK" mkmodel "$T.part" --shape 7b --quant q4_0 --seed 1 --residual-decay 0.3
  mv "$T.part" "$T"
fi
for a in $AGREEMENTS; do
  D=$M/D_$a.gguf
  if [ ! -f "$D" ]; then
    "$MK" mkmodel "$D.part" --pair-of "$T" --agreement "$a" --calib-seqs 8 --calib-steps 24 \
      --json > "$OUT/mkmodel_D_$a.json" || [ $? -eq 3 ]  # 3: agreement not reached, said in the JSON
    mv "$D.part" "$D"
  fi
done
for a in $AGREEMENTS; do
  "$E" bench --model "$T" --draft "$M/D_$a.gguf" --spec "$SPEC" -t "$THREADS" -n "$N" \
    -r "$REPEAT" --spec-mode "$MODE" --json > "$OUT/D_$a.$MODE.json"
  python3 - "$OUT/D_$a.$MODE.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{sys.argv[1]}: plain {j['configs'][0]['tokens_per_s']['median']:.2f} tok/s, "
      f"roofline {j['roofline']['tokens_per_s']:.2f}")
for c in j["configs"][1:]:
    print(f"  {c['name']:<9} x{c['ratio_to_plain']:.2f} (predicted x{c['predicted_ratio']:.2f}), "
          f"acceptance {c['acceptance']:.2f}, K {c['k_histogram']}")
PY
done
