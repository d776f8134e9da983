#!/usr/bin/env bash
# 8 streaming clients alone, then the same beside 200 idle connections and 30
# that trickle their headers a byte a second (each reopened when serve closes
# it). Fails when the loaded p99 time to first token passes twice the
# unloaded one (plus 5 ms, below which a tiny model's figures are noise), or
# serve's resident memory grows by more than 64 MiB while the hostile
# connections are held.
# usage: serve_hostile_load.sh ENGINE MKMODEL LOADGEN SECONDS
set -euo pipefail
engine=$1 mk=$2 load=$3 seconds=$4
base=$(mktemp -d "${TMPDIR:-/tmp}/epyctune-serve-hostile.XXXXXX")
pid= sampler=
cleanup() {
  [[ -n $sampler ]] && kill "$sampler" 2>/dev/null || true
  [[ -n $pid ]] && kill "$pid" 2>/dev/null || true
  rm -rf "$base"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f $base/serve.err ]] && tail -20 "$base/serve.err" >&2; exit 1; }
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }

# ASan holds freed memory in a quarantine (256 MiB by default), which would
# read as growth here: a small one keeps the bound about serve's own memory.
if ldd "$engine" 2>/dev/null | grep -q libasan; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4"
fi
"$mk" mkmodel "$base/tiny.gguf" --shape tiny --quant q8_0 -t 1 2>/dev/null
mkfifo "$base/ready"
"$engine" serve -m "$base/tiny.gguf" -t 1 --port 0 --queue 8 >"$base/ready" 2>"$base/serve.err" &
pid=$!
exec 3<"$base/ready"
read -r -t 120 line <&3 || fail "serve printed no ready line"
url=${line#listening on }
ulimit -n 4096 2>/dev/null || true

"$load" --url "$url" -c 8 -d 1 -n 16 --stream --json >/dev/null  # warm
"$load" --url "$url" -c 8 -d "$seconds" -n 16 --stream --json >"$base/alone.json" ||
  fail "streaming alone: $(cat "$base/alone.json")"
rss0=$(rss)
( peak=$rss0; while sleep 0.2; do r=$(rss) || break; (( r > peak )) && peak=$r; echo "$peak" >"$base/peak"; done ) &
sampler=$!
"$load" --url "$url" -c 8 -d "$seconds" -n 16 --stream --idle 200 --slow 30 --json >"$base/hostile.json" ||
  fail "streaming beside hostile connections: $(cat "$base/hostile.json")"
kill "$sampler" 2>/dev/null || true
sampler=
peak=$(cat "$base/peak" 2>/dev/null || echo "$rss0")

python3 - "$base/alone.json" "$base/hostile.json" "$rss0" "$peak" <<'PY'
import json, sys
a, h = (json.load(open(p)) for p in sys.argv[1:3])
rss0, peak = int(sys.argv[3]), int(sys.argv[4])
print(f"alone:   {a['ok']} streams, ttft p50 {a['ttft_p50_s']*1e3:.1f} ms, p99 {a['ttft_p99_s']*1e3:.1f} ms, {a['tok_s']:.0f} tok/s")
print(f"hostile: {h['ok']} streams, ttft p50 {h['ttft_p50_s']*1e3:.1f} ms, p99 {h['ttft_p99_s']*1e3:.1f} ms, {h['tok_s']:.0f} tok/s; "
      f"{h['idle']} idle + {h['slow']} slow held, {h['reopened']} reopened after serve closed them")
print(f"serve RSS {rss0} KiB before, peak {peak} KiB while held (+{(peak - rss0) / 1024:.1f} MiB)")
ok = True
if h['ttft_p99_s'] > 2 * a['ttft_p99_s'] + 0.005:
    print("FAIL: p99 time to first token more than doubled"); ok = False
if peak - rss0 > 64 * 1024:
    print("FAIL: RSS grew by more than 64 MiB"); ok = False
sys.exit(0 if ok else 1)
PY

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
(( rc == 0 )) || fail "serve exited $rc after SIGTERM"
echo "serve hostile load ok"
