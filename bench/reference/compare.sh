#!/usr/bin/env bash
# Greedy tokens of epyctune-engine against llama.cpp on the same GGUF file.
#   bench/reference/compare.sh BUILD_DIR MODEL.gguf ["prompt"] [N]
# Installs the pinned reference once (npm), runs both, and prints the first
# position where they differ; exit 0 only when all N tokens agree.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?build dir}; model=${2:?model.gguf}; prompt=${3:-The quick brown fox}; n=${4:-64}
[[ -d $here/node_modules/node-llama-cpp ]] || (cd "$here" && npm install --no-audit --no-fund >/dev/null)
ref=$(node "$here/greedy.mjs" "$model" "$prompt" "$n")
ours=$("$build/apps/epyctune-engine/epyctune-engine" generate --model "$model" --prompt "$prompt" -n "$n" --json)
python3 - "$ref" "$ours" <<'PY'
import json, sys
ref, ours = json.loads(sys.argv[1]), json.loads(sys.argv[2])
a, b = ref["tokens"], ours["tokens"]
if ref["prompt_tokens"] != ours["prompt_tokens"]:
    print("prompt tokens differ:\n  llama.cpp", ref["prompt_tokens"], "\n  epyctune ", ours["prompt_tokens"])
    sys.exit(1)
first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
if first is None and len(a) == len(b):
    print(f"identical: {len(a)} greedy tokens")
    sys.exit(0)
print(f"differ at token {first}: llama.cpp {a[first:first+8]} epyctune {b[first:first+8]}")
sys.exit(1)
PY
