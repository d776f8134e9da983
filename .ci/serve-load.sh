#!/usr/bin/env bash
# CI stage: the serve load test at full length on the ASan + UBSan build,
# against a tiny model from epyctune-mkmodel: 8 clients (half streaming) for
# 20 s one request at a time, queue 4, so overload is answered with 503; then
# 16 clients for 60 s with continuous batching (--parallel 4, queue 8) in the
# mix (epyctune-serve-load --mix: whole and streamed replies, streams cut
# mid-way, bad requests that must each get their 4xx, long shared prefixes),
# after which /metrics must show every admitted request ended; then the same
# mix for 30 s with drafting on (a draft model and n-gram lookup, whose
# proposals ride in the batched passes). Fails on any
# other reply, on a request serve did not end, on serve not exiting 0 on
# SIGTERM, and on a sanitizer or leak report at its exit.
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
echo "== serve load (8 clients, 20 s, one at a time, $build)"
tests/serve/serve_load_test.sh "$engine" "$mk" "$load" 20 8 4 1
echo "== serve load mix (16 clients, 60 s, --parallel 4, $build)"
tests/serve/serve_load_test.sh "$engine" "$mk" "$load" 60 16 8 4 mix
echo "== serve load mix with drafting (16 clients, 30 s, --parallel 4, a draft and lookup, $build)"
tests/serve/serve_load_test.sh "$engine" "$mk" "$load" 30 16 8 4 mix draft
