#!/bin/sh
# Reruns the engine benchmarks recorded in bench/README.md: generates the
# synthetic LLaMA-2-7B-shaped models (once; they are never committed) and runs
# `epyctune-engine bench` on each, writing one JSON per quantisation.
#
#   bench/engine_roofline.sh [BUILD_DIR] [MODEL_DIR] [OUT_DIR]
#
# Env: QUANTS (default "q4_0 q8_0 q4_k"), SHAPE (default 7b), BATCHES
# (default 1,2,4,8,16), PASSES (--passes, default 2), REPEAT (-r, default 5),
# CPUS (default: all allowed), BENCH_ARGS (extra bench options).
# QUANTS may also name q4_k_m (Q4_K with Q6_K output, attn_v and ffn_down
# halves, as llama.cpp mixes it). Each 7B model takes 4-7 GB of disk and as
# much page cache while benchmarked.
# Q4_K / Q4_K_M models are written with --fast-quant (min-max scales: 32 s for 7B on 2
# vCPUs instead of ~45 min for ggml's search; the kernels' speed is the same).
set -eu
BUILD=${1:-build}
MODELS=${2:-/tmp/epyctune-models}
OUT=${3:-bench/results}
QUANTS=${QUANTS:-"q4_0 q8_0 q4_k"}
SHAPE=${SHAPE:-7b}
ENGINE="$BUILD/apps/epyctune-engine/epyctune-engine"
MKMODEL="$BUILD/tools/epyctune-mkmodel/epyctune-mkmodel"
mkdir -p "$MODELS" "$OUT"
CPU_ARG=""
[ -n "${CPUS:-}" ] && CPU_ARG="--cpus $CPUS"
for q in $QUANTS; do
  m="$MODELS/$SHAPE-$q.gguf"
  if [ ! -f "$m" ]; then
    echo "== mkmodel $m" >&2
    FAST=""
    case "$q" in q4_k | q4_k_m) FAST="--fast-quant" ;; esac
    # shellcheck disable=SC2086
    "$MKMODEL" mkmodel "$m" --shape "$SHAPE" --quant "$q" --seed 1 $FAST
  fi
  echo "== bench $m" >&2
  # shellcheck disable=SC2086
  "$ENGINE" bench --model "$m" --batch "${BATCHES:-1,2,4,8,16}" --passes "${PASSES:-2}" \
    -r "${REPEAT:-5}" $CPU_ARG ${BENCH_ARGS:-} --json > "$OUT/$SHAPE-$q.json"
  python3 - "$OUT/$SHAPE-$q.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
b = {x["batch"]: x for x in j["batches"]}
print(f'{sys.argv[1]}: {j["config"]["weight_type"]}, {j["threads"]} threads, ISA {j["isa"]}')
print(f'  bandwidth {j["bandwidth_gbps"]["median"]:.2f} GB/s, {j["bytes_per_token"]/1e9:.3f} GB/token'
      f' -> roofline {j["roofline_tokens_per_s"]:.2f} tok/s')
for k, x in sorted(b.items()):
    p = x["pass_s"]
    print(f'  K={k:<3} pass {p["median"]*1e3:8.1f} ms (min {p["min"]*1e3:.1f}, max {p["max"]*1e3:.1f})'
          f'  {x["tokens_per_s"]["median"]:.2f} tok/s')
if "roofline_ratio" in j:
    lo, hi = j["roofline_ratio_range"]
    bw = j["bandwidth_per_repeat_gbps"] + j.get("bandwidth_after_batch1_gbps", [])
    print(f'  batch-1 roofline ratio {j["roofline_ratio"]*100:.1f}% (per repeat {lo*100:.1f}-{hi*100:.1f}%,'
          f' probes {min(bw):.1f}-{max(bw):.1f} GB/s; target >= 85%)')
if "k8_over_k1_time" in j:
    lo, hi = j["k8_over_k1_range"]
    print(f'  K=8 / K=1 time {j["k8_over_k1_time"]:.2f}x (per repeat {lo:.2f}-{hi:.2f}x; target <= 2x)')
l = j["load"]
print(f'  load {l["total_s"]:.2f} s (parse {l["parse_validate_s"]:.3f} s, page-in {l["prefault_s"]:.2f} s)'
      f' vs read() {l["file_read_s"]:.2f} s')
PY
done
