#!/usr/bin/env bash
# A short run of every fuzz target from its seed corpus, for CI:
#   tests/fuzz/run_short.sh BUILD_DIR [SECONDS_PER_TARGET]
# New inputs go to a scratch directory; a crash leaves crash-* in the working
# directory and fails the run.
set -euo pipefail
build=${1:?usage: run_short.sh BUILD_DIR [SECONDS]}
secs=${2:-12}
here=$(cd "$(dirname "$0")" && pwd)
data=$here/../data
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
run() {
  local target=$1
  shift
  echo "== fuzz $target (${secs}s)"
  mkdir -p "$scratch/$target"
  local log=$scratch/$target.log
  if ! "$build/tests/fuzz/$target" -max_total_time="$secs" -rss_limit_mb=2048 \
      -print_final_stats=1 "$scratch/$target" "$@" >"$log" 2>&1; then
    tail -n 60 "$log"
    return 1
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
}
mkdir -p "$scratch/fuzz_gguf"
cp "$here/../gguf/valid_tiny.bin" "$scratch/fuzz_gguf/"
run fuzz_gguf -max_len=4096 -dict="$here/gguf.dict" "$here/../gguf/corpus"
run fuzz_profile -max_len=4096 "$here/corpus/profile"
run fuzz_journal -max_len=4096 "$here/corpus/journal"
run fuzz_topology -max_len=16384 "$data/topology"
run fuzz_control -max_len=8192 "$here/corpus/control"
run fuzz_http -max_len=8192 -dict="$here/http.dict" "$here/corpus/http"
