#!/usr/bin/env bash
# Load on `epyctune-engine serve` with a real model: starts serve on MODEL
# (a free loopback port), runs CLIENTS concurrent completion clients for
# DURATION seconds, prints the load generator's table (200/503/errors, p50/p99
# latency, aggregate tok/s) and serve's own counters, then stops serve.
# usage: bench/serve_load.sh MODEL [serve options...]
#   env: BUILD (build), CLIENTS (8), DURATION (60 s), MAX_TOKENS (64), QUEUE (8), STREAM (0|1)
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,8p' "$0"; exit 2; }
model=$1; shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
engine=$build/apps/epyctune-engine/epyctune-engine
load=$build/tests/serve/epyctune-serve-load
[[ -x $engine && -x $load ]] || { echo "build epyctune-engine and epyctune-serve-load in $build first" >&2; exit 2; }
base=$(mktemp -d "${TMPDIR:-/tmp}/epyctune-serve-bench.XXXXXX")
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; rm -rf "$base"' EXIT

mkfifo "$base/ready"
"$engine" serve -m "$model" --port 0 --queue "${QUEUE:-8}" "$@" >"$base/ready" 2>"$base/serve.err" &
pid=$!
exec 3<"$base/ready"
if ! read -r -t 900 line <&3 || [[ ! $line =~ ^listening\ on\ (http://.+)$ ]]; then
  echo "serve did not start:" >&2; cat "$base/serve.err" >&2; exit 1
fi
url=${BASH_REMATCH[1]}
echo "$line ($model)"
stream=(); [[ ${STREAM:-0} == 1 ]] && stream=(--stream)
rc=0
"$load" --url "$url" -c "${CLIENTS:-8}" -d "${DURATION:-60}" -n "${MAX_TOKENS:-64}" "${stream[@]}" || rc=$?
if command -v curl >/dev/null; then
  curl -s "$url/metrics" | grep -E '^epyctune_serve_(rejected_total|generated_tokens_total|spec_acceptance_rate|tokens_per_second|request_duration_seconds_(sum|count))' || true
fi
kill -TERM "$pid"; wait "$pid" || rc=$?; pid=
exit $rc
