#!/usr/bin/env bash
# What a verify pass of 1..17 tokens costs against a single-token pass (issue
# 21), and what that does to speculative decoding, for one or more engine
# builds compared in the same run: a 7B-shape Q4_0 target, 2 threads.
#
#   bench/verify_cost.sh MODEL_DIR OUT_DIR ENGINE [ENGINE...]
#
# Per repeat, each engine in turn times forward passes of 1..17 tokens
# (`bench --batch`, itself interleaved over the batch sizes) and then runs
# `bench --draft --spec` with a perfect draft (plain and each K interleaved):
# engines and batch sizes alternate, so a load that changes during the run
# moves them all. Besides wall time, `bench` reports the CPU seconds a pass
# took, which a loaded host inflates less. Each engine keeps its own cache of
# measured pass times (the cost model), since a kernel change changes them.
# Models are made once and reused (the target is ~3.8 GB), by MKMODEL
# (default build/tools/epyctune-mkmodel/epyctune-mkmodel); the target and
# draft lines are bench/spec_adaptive.sh's.
set -euo pipefail
M=${1:?model dir}
OUT=${2:?output dir}
shift 2
ENGINES=("$@")
[ ${#ENGINES[@]} -ge 1 ] || { echo "usage: $0 MODEL_DIR OUT_DIR ENGINE [ENGINE...]" >&2; exit 2; }
THREADS=${THREADS:-2}
N=${N:-128}
REPEAT=${REPEAT:-2}
BATCHES=${BATCHES:-1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17}
SPEC=${SPEC:-adaptive,2,4,8}
SKIP_SPEC=${SKIP_SPEC:-0}
mkdir -p "$M" "$OUT"
# Each engine's cost-model cache, measured afresh by this run.
CACHE=$(mktemp -d)
trap 'rm -rf "$CACHE"' EXIT
MK=${MKMODEL:-build/tools/epyctune-mkmodel/epyctune-mkmodel}
T=$M/T7b.gguf
D=$M/D_1.0.gguf
if [ ! -f "$T" ]; then
  "$MK" mkmodel "$T.part" --shape 7b --quant q4_0 --seed 1 --residual-decay 0.3
  mv "$T.part" "$T"
fi
if [ ! -f "$D" ]; then
  "$MK" mkmodel "$D.part" --pair-of "$T" --agreement 1.0 --calib-seqs 4 --calib-steps 16 --json \
    > "$OUT/mkmodel_D_1.0.json"
  mv "$D.part" "$D"
fi
for ((r = 1; r <= REPEAT; ++r)); do
  for i in "${!ENGINES[@]}"; do
    E=${ENGINES[$i]}
    "$E" bench -m "$T" --batch "$BATCHES" -r 1 --passes 1 -t "$THREADS" --json \
      > "$OUT/passes.e$i.r$r.json"
  done
  [ "$SKIP_SPEC" = 1 ] && continue
  for i in "${!ENGINES[@]}"; do
    E=${ENGINES[$i]}
    XDG_CACHE_HOME="$CACHE/e$i" "$E" bench -m "$T" --draft "$D" --spec "$SPEC" \
      -t "$THREADS" -n "$N" -r 1 --spec-mode shared --json > "$OUT/spec.e$i.r$r.json"
  done
done
python3 - "$OUT" "${#ENGINES[@]}" "$REPEAT" "$SKIP_SPEC" <<'PY'
import glob, json, statistics, sys
out, n_eng, rep, skip = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
med = statistics.median
print("pass time by tokens per pass: median over repeats, wall ms and CPU s per pass;")
print("x1: the median wall time over the engine's single-token pass in the same repeat")
hdr = "tokens" + "".join(f" | e{i} ms | e{i} CPU s | e{i} x1" for i in range(n_eng))
print(hdr)
rows = {}
for i in range(n_eng):
    for r in range(1, rep + 1):
        j = json.load(open(f"{out}/passes.e{i}.r{r}.json"))
        one = next(b["pass_s"]["median"] for b in j["batches"] if b["batch"] == 1)
        for b in j["batches"]:
            d = rows.setdefault(b["batch"], {}).setdefault(i, {"ms": [], "cpu": [], "x1": []})
            d["ms"].append(b["pass_s"]["median"] * 1e3)
            d["cpu"].append(b["cpu_s_per_pass"])
            d["x1"].append(b["pass_s"]["median"] / one)
for k in sorted(rows):
    cells = "".join(f" | {med(rows[k][i]['ms']):.0f} | {med(rows[k][i]['cpu']):.3f} | "
                    f"{med(rows[k][i]['x1']):.2f}" for i in range(n_eng))
    print(f"{k}{cells}")
if skip:
    sys.exit(0)
print("\nspeculative, perfect draft: ratio to plain in the same run (per repeat), acceptance, K")
for i in range(n_eng):
    for r in range(1, rep + 1):
        j = json.load(open(f"{out}/spec.e{i}.r{r}.json"))
        plain = j["configs"][0]["tokens_per_s"]["median"]
        cfgs = ", ".join(f"{c['name']} x{c['ratio_to_plain']:.2f} (pred x{c['predicted_ratio']:.2f})"
                         for c in j["configs"][1:])
        print(f"e{i} r{r}: plain {plain:.2f} tok/s; {cfgs}")
PY
