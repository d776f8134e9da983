#!/usr/bin/env bash
# The serve load test: a tiny model from epyctune-mkmodel, `serve` on a free loopback
# port with a small queue, C clients for D seconds (half of them streaming);
# with PARALLEL > 1, serve batches that many requests per pass. MODE mix runs
# one `epyctune-serve-load --mix` instead: whole and streamed replies,
# streams cut mid-way, bad requests (each must get its 4xx) and long shared
# prefixes, after which serve's /metrics must show every admitted request
# ended (in_flight and the queue back to 0, each counted with its status).
# Fails on any reply other than 200 or 503 (or the 4xx a bad request
# wants), on a serve that does not exit 0 on SIGTERM, or (in an ASan build)
# on a leak report at its exit.
# usage: serve_load_test.sh ENGINE MKMODEL LOADGEN SECONDS CLIENTS [QUEUE] [PARALLEL] [plain|mix]
#        [draft] (serve drafts: a draft model, itself, and n-gram lookup)
set -euo pipefail
engine=$1 mk=$2 load=$3 seconds=$4 clients=$5 queue=${6:-4} parallel=${7:-1} mode=${8:-plain}
draft=${9:-}
base=$(mktemp -d "${TMPDIR:-/tmp}/epyctune-serve-load.XXXXXX")
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null || true
  rm -rf "$base"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f $base/serve.err ]] && tail -50 "$base/serve.err" >&2; exit 1; }

"$mk" mkmodel "$base/tiny.gguf" --shape tiny --quant q8_0 -t 1 2>/dev/null
mkfifo "$base/ready"
# draft: the model drafts for itself, so greedy requests accept its
# proposals and seeded ones mostly reject them: cancels and stops land in
# every state of a drafting round.
spec=()
[[ $draft == draft ]] && spec=(-md "$base/tiny.gguf" --lookup 3)
"$engine" serve -m "$base/tiny.gguf" -t 1 --port 0 --queue "$queue" --parallel "$parallel" \
  "${spec[@]}" >"$base/ready" 2>"$base/serve.err" &
pid=$!
exec 3<"$base/ready"
read -r -t 120 line <&3 || fail "serve printed no ready line"
[[ $line =~ ^listening\ on\ (http://127\.0\.0\.1:[0-9]+)$ ]] || fail "ready line: $line"
url=${BASH_REMATCH[1]}
echo "$line"

rc=0
if [[ $mode == mix ]]; then
  "$load" --url "$url" --mix -c "$clients" -d "$seconds" -n 32 --settle 60 >"$base/mix.txt" 2>&1 ||
    rc=$?
  cat "$base/mix.txt"
  (( rc == 0 )) || fail "the mix saw a wrong reply or a request serve did not end"
else
  half=$(( clients / 2 ))
  "$load" --url "$url" -c $(( clients - half )) -d "$seconds" -n 32 >"$base/plain.txt" 2>&1 & lp=$!
  if (( half > 0 )); then
    "$load" --url "$url" -c "$half" -d "$seconds" -n 32 --stream >"$base/stream.txt" 2>&1 || rc=$?
  fi
  wait "$lp" || rc=$?
  echo "plain requests:"; cat "$base/plain.txt"
  if (( half > 0 )); then echo "streamed requests:"; cat "$base/stream.txt"; fi
  (( rc == 0 )) || fail "the load generator saw errors other than 503"
fi

curl -sf "$url/metrics" >"$base/metrics.txt" 2>/dev/null || true
grep -E '^epyctune_serve_(rejected_total|cancelled_total|generated_tokens_total|requests_total|in_flight|spec_drafted_total|spec_accepted_total)' \
  "$base/metrics.txt" || true

kill -TERM "$pid"
serve_rc=0
wait "$pid" || serve_rc=$?
pid=
(( serve_rc == 0 )) || fail "serve exited $serve_rc after SIGTERM"
grep -q "LeakSanitizer\|AddressSanitizer\|runtime error" "$base/serve.err" && fail "sanitizer report at serve's exit"
if [[ $draft == draft ]]; then
  drafted=$(sed -n 's/^epyctune_serve_spec_drafted_total \([0-9]*\)$/\1/p' "$base/metrics.txt")
  (( ${drafted:-0} > 0 )) || fail "serve drafted nothing under load"
fi
echo "serve load ok"
