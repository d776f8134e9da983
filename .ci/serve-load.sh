#!/usr/bin/env bash
# CI stage: the serve load test at full length on the ASan + UBSan build:
# 8 clients (half streaming) for 60 s against a tiny model from
# epyctune-mkmodel, queue 4, so overload is answered with 503. Fails on any
# other error reply, on serve not exiting 0 on SIGTERM, and on a sanitizer or
# leak report at its exit.
# usage: .ci/serve-load.sh [BUILD_DIR]   (default build-asan, already built)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
engine=$build/apps/epyctune-engine/epyctune-engine
mk=$build/tools/epyctune-mkmodel/epyctune-mkmodel
load=$build/tests/serve/epyctune-serve-load
[[ -x $engine && -x $mk && -x $load ]] ||
  cmake --build "$build" --target epyctune-engine epyctune-mkmodel epyctune-serve-load
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "== serve load (8 clients, 60 s, $build)"
tests/serve/serve_load_test.sh "$engine" "$mk" "$load" 60 8 4
