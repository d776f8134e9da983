#!/bin/sh
# Aggregate decode with P sequences at once (forward_rows), in the manner of
# llama-batched-bench: generates the model once (never committed) and runs
# `epyctune-engine bench --parallel`, writing one JSON per shape.
#
#   bench/parallel_decode.sh [BUILD_DIR] [MODEL_DIR] [OUT_DIR]
#
# Env: SHAPES (default "1b"), QUANT (default q4_0), PARALLEL (default
# 1,2,4,8,16), CTX (prompt tokens per sequence, default 32), N (tokens
# generated per sequence, default 32), REPEAT (default 3), CPUS (default:
# all allowed).
set -eu
BUILD=${1:-build}
MODELS=${2:-/tmp/epyctune-models}
OUT=${3:-bench/results}
QUANT=${QUANT:-q4_0}
ENGINE="$BUILD/apps/epyctune-engine/epyctune-engine"
MKMODEL="$BUILD/tools/epyctune-mkmodel/epyctune-mkmodel"
mkdir -p "$MODELS" "$OUT"
CPU_ARG=""
[ -n "${CPUS:-}" ] && CPU_ARG="--cpus $CPUS"
for shape in ${SHAPES:-1b}; do
  m="$MODELS/$shape-$QUANT.gguf"
  [ -f "$m" ] || "$MKMODEL" mkmodel "$m" --shape "$shape" --quant "$QUANT" --seed 1
  echo "== bench --parallel $m" >&2
  # shellcheck disable=SC2086
  "$ENGINE" bench --model "$m" --parallel "${PARALLEL:-1,2,4,8,16}" --ctx "${CTX:-32}" \
    -n "${N:-32}" -r "${REPEAT:-3}" $CPU_ARG --json > "$OUT/parallel-$shape-$QUANT.json"
  python3 - "$OUT/parallel-$shape-$QUANT.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{sys.argv[1]}: {j['threads']} threads, {j['bandwidth_gbps']:.1f} GB/s, "
      f"batch invariant: {j['batch_invariant']}")
for r in j["rows"]:
    print(f"  P={r['parallel']:>3}  decode {r['decode_tok_s']:8.2f} tok/s  "
          f"TPOT {r['time_per_output_token_ms']:7.2f} ms  x{r['speedup_vs_1']:.2f}  "
          f"roofline {r['roofline_tok_s']:.1f}")
PY
done
