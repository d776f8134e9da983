#!/usr/bin/env bash
# A llama.cpp command line on epyctune-engine (issue 33): llama.cpp's names
# and meanings in generate, serve, bench and chat, GPU-only options accepted
# with a note, one name per concept, messages that say their prefix once and
# name the flag that fixes them, and a draft of another vocabulary refused
# from the GGUF headers before any weight loads. Each check says what the
# engine did before.
# usage: llama_flags_test.sh ENGINE_BIN MKMODEL_BIN
set -euo pipefail
bin=$1
mk=$2
base=$(mktemp -d "${TMPDIR:-/tmp}/epyctune-llama-flags.XXXXXX")
serve_pid=
cleanup() {
  [[ -n $serve_pid ]] && kill "$serve_pid" 2>/dev/null
  rm -rf "$base"
}
trap cleanup EXIT
export XDG_CACHE_HOME=$base/cache
fail() { echo "FAIL: $*" >&2; exit 1; }
json() { python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"; }
count() { grep -o -- "$1" <<<"$2" | wc -l; }

"$mk" mkmodel "$base/t.gguf" --shape tiny --quant q8_0 -t 1 2>/dev/null
"$mk" mkmodel "$base/v300.gguf" --shape tiny,vocab=300 --quant q8_0 -t 1 2>/dev/null
gen() { "$bin" generate -m "$base/t.gguf" -n 6 -t 1 --json "$@"; }
tokens() { gen "$@" | json 'j["prompt_tokens"], j["tokens"]'; }
want=$(tokens -p "hello world")

# -c/--ctx-size (before: "The following arguments were not expected: 2048 -c";
# only serve had -c). --ctx stays an alias.
[[ $(tokens -p "hello world" -c 2048) == "$want" ]] || fail "generate -c 2048"
[[ $(tokens -p "hello world" --ctx-size 2048) == "$want" ]] || fail "generate --ctx-size"
# A prompt longer than the context names -c (before: "generate: error:
# generate: prompt of 25 tokens exceeds the context of 8", no flag).
long="hello world hello world hello world"
for c in "-c 8" "--ctx 8"; do
  # shellcheck disable=SC2086
  out=$("$bin" generate -m "$base/t.gguf" -t 1 $c -p "$long" 2>&1) && fail "$c: a long prompt accepted"
  grep -q -- "-c/--ctx-size" <<<"$out" || fail "$c: the message does not name -c: $out"
  [[ $(count "generate:" "$out") == 1 ]] || fail "$c: the prefix twice: $out"
done

# -s/--seed (before: "-s" not expected); sampled tokens follow the seed.
s42=$(gen -p "hello world" --temp 0.9 -s 42)
[[ $(json 'j["sampler"]["seed"]' <<<"$s42") == 42 ]] || fail "-s 42: $(json 'j["sampler"]' <<<"$s42")"
[[ $(json 'j["tokens"]' <<<"$s42") == "$(gen -p "hello world" --temp 0.9 --seed 42 | json 'j["tokens"]')" ]] ||
  fail "-s and --seed differ"

# -n/--n-predict, --predict, and -n -1: until the end or a full context
# (before: "-n: must be >= 0").
g1() { "$bin" generate -m "$base/t.gguf" --json "$@"; }
[[ $(g1 -t 1 -p a --predict 3 | json 'len(j["tokens"])') == 3 ]] || fail "--predict 3"
n1=$(g1 -t 1 -p "hello world" -n -1 -c 16)
[[ $(json 'len(j["prompt_tokens"]) + len(j["tokens"]) <= 17 and len(j["tokens"]) > 6' <<<"$n1") == True ]] ||
  fail "-n -1 -c 16: $(json 'len(j["prompt_tokens"]), len(j["tokens"])' <<<"$n1")"

# GPU-only options: accepted, one note each on stderr, tokens unchanged.
# Before: "-ngl 99" was -n gl 99, "Could not convert: --n-predict = gl".
out=$(gen -p "hello world" -ngl 99 2>"$base/err" | json 'j["prompt_tokens"], j["tokens"]')
[[ $out == "$want" ]] || fail "-ngl changed the tokens"
[[ $(grep -c . "$base/err") == 1 ]] && grep -q -- "-ngl/--n-gpu-layers 99 ignored" "$base/err" ||
  fail "-ngl note: $(cat "$base/err")"
gen -p a -fa -ngld 99 -sm row -ts 1,1 -mg 0 -dev none -nkvo --mlock --gpu-layers all \
  >/dev/null 2>"$base/err" || fail "GPU options refused: $(cat "$base/err")"
for f in "-fa/--flash-attn ignored" -ngld -sm/ -ts/ -mg/ -dev/ -nkvo/ --mlock "-ngl/--n-gpu-layers all"; do
  grep -q -- "$f" "$base/err" || fail "no note for $f: $(cat "$base/err")"
done
[[ $(grep -c "ignored" "$base/err") == 9 ]] || fail "one note per option: $(cat "$base/err")"
gen -p a -fa on 2>&1 >/dev/null | grep -q -- "-fa/--flash-attn on ignored" || fail "-fa on"

# --no-mmap: the default, copied weights (before: not an option).
[[ $(tokens -p "hello world" --no-mmap) == "$want" ]] || fail "--no-mmap"
gen -p a --mmap --no-mmap --numa distribute >/dev/null || fail "--no-mmap after --mmap"

# --numa: llama.cpp's strategies (before: not a generate option).
# distribute interleaves the copy, so it conflicts with --mmap; numactl leaves
# placement to the process's policy, so it does not.
for n in distribute isolate numactl; do gen -p a --numa $n >/dev/null || fail "--numa $n"; done
out=$(gen -p a --numa distribute --mmap 2>&1) && fail "--numa distribute --mmap accepted"
grep -q -- "--numa" <<<"$out" || fail "--numa distribute --mmap: $out"
gen -p a --numa numactl --mmap >/dev/null || fail "--numa numactl --mmap refused"
out=$(gen -p a --numa mirror 2>&1) && fail "--numa mirror accepted"
grep -q "distribute, isolate or numactl" <<<"$out" || fail "--numa mirror: $out"
[[ $(gen -p a --numa isolate | json 'j["cpus"]["shared"] != ""') == True ]] || fail "--numa isolate cpus"

# -b/--batch-size: tokens per prompt pass; any size gives the same tokens.
[[ $(tokens -p "hello world" -b 1) == "$want" ]] || fail "-b 1"
gen -p a -b 0 >/dev/null 2>&1 && fail "-b 0 accepted"

# -sys/--system-prompt, --system kept (before: -sys was -s ys).
"$mk" vocab --from-json "$(dirname "$0")/../data/vocab/tiny-chatml/tokenizer.json" "$base/v.gguf"
"$mk" mkmodel "$base/c.gguf" --shape tiny --vocab "$base/v.gguf" --quant q8_0 -t 1 2>/dev/null
cg() { "$bin" generate -m "$base/c.gguf" -n 2 -t 1 --json --chat -p hi "$@" | json 'j["prompt_tokens"]'; }
[[ $(cg -sys "be brief") == "$(cg --system "be brief")" && $(cg -sys "be brief") != "$(cg)" ]] ||
  fail "-sys is not --system"
# -cnv points to chat instead of being read as -c nv.
out=$("$bin" generate -m "$base/t.gguf" -cnv 2>&1) && fail "generate -cnv accepted"
grep -q "epyctune-engine chat" <<<"$out" || fail "-cnv: $out"

# -td/--threads-draft: the draft's own CPUs, the last N (before: -t d).
if (($(nproc) >= 2)); then
  td=$(g1 -p a -n 4 -md "$base/t.gguf" -t 2 -td 1)
  [[ $(json 'j["spec"]["mode"], j["cpus"]["draft"], j["cpus"]["verify"]' <<<"$td") == "partitioned 1 0" ]] ||
    fail "-td 1: $(json 'j["spec"]["mode"], j["cpus"]' <<<"$td")"
  "$bin" generate -m "$base/t.gguf" -p a -md "$base/t.gguf" -t 2 -td 2 >/dev/null 2>&1 &&
    fail "-td 2 of 2 CPUs accepted"
fi
out=$(gen -p a -td 1 2>&1) && fail "-td without a draft accepted"
grep -q -- "--threads-draft" <<<"$out" || fail "-td without a draft: $out"

# A draft of another vocabulary: refused from the headers, naming both files,
# before any weight loads (before: both models loaded, then "draft model
# vocabulary (300) differs from the target's (512)").
out=$(gen -p a -md "$base/v300.gguf" 2>&1) && fail "a 300-token draft for a 512-token target accepted"
grep -q "v300.gguf" <<<"$out" && grep -q "t.gguf" <<<"$out" && grep -q vocabulary <<<"$out" ||
  fail "the vocabulary message names both files: $out"
if command -v script >/dev/null; then
  # On a terminal the load draws progress: none may be drawn.
  out=$(script -qec "$bin generate -m $base/t.gguf -md $base/v300.gguf -t 1 -p a" /dev/null </dev/null || true)
  grep -q vocabulary <<<"$out" || fail "pty: $out"
  grep -q "\[load\]" <<<"$out" && fail "weights loaded before the vocabulary check: $out"
fi
"$bin" bench -m "$base/t.gguf" -md "$base/v300.gguf" -r 1 -n 2 >/dev/null 2>&1 && fail "bench: vocabulary"

# Flag names in messages, once (issue: "--cpus: --cpus: ...").
for cmd in generate serve chat bench; do
  out=$("$bin" "$cmd" -m "$base/t.gguf" --cpus 999 </dev/null 2>&1) && fail "$cmd --cpus 999 accepted"
  [[ $(count "--cpus" "$out") == 1 ]] || fail "$cmd --cpus 999: $out"
done

# bench: one name per concept: -md/--model-draft first (--draft kept),
# -b/--batch-size (--batch kept), -d/--n-depth (--ctx kept), -np, -n.
help=$("$bin" bench --help)
grep -q -- "--model-draft,--draft" <<<"$help" || fail "bench --help: the draft is --model-draft"
grep -q -- "-b,--batch-size" <<<"$help" || fail "bench --help: -b"
grep -q -- "-d,--n-depth" <<<"$help" || fail "bench --help: -d"
bb() { "$bin" bench -m "$base/t.gguf" -r 1 -t 1 --passes 1 --bw-mib 16 --json "$@"; }
[[ $(bb -b 1,2 -d 4 | json '[b["batch"] for b in j["batches"]], j["context_tokens"]') == "[1, 2] 4" ]] ||
  fail "bench -b -d"
[[ $(bb --batch 1 --ctx 3 | json 'j["context_tokens"]') == 3 ]] || fail "bench --batch --ctx"
sb=$("$bin" bench -m "$base/t.gguf" -md "$base/t.gguf" --spec 2 -n 4 -r 1 -t 1 --bw-mib 16 --json)
[[ $(json 'j["configs"][1]["name"]' <<<"$sb") == "K=2" ]] || fail "bench -md: $sb"
"$bin" bench -m "$base/t.gguf" -np 1,2 -n 2 -r 1 -t 1 -d 4 --bw-mib 16 --json >/dev/null || fail "bench -np"
"$bin" kernel-bench --type q8_0 -b 1 --cols 256 --rows 64 --loops 1 -r 1 -t 1 --isa scalar \
  >/dev/null || fail "kernel-bench -b"

# serve: -np, -a/--alias (--model-alias kept), -c, -b, -ngl.
"$bin" serve -m "$base/t.gguf" -t 1 -np 2 -a tiny -c 256 -b 16 -ngl 99 --port 0 \
  >"$base/serve.out" 2>"$base/serve.err" &
serve_pid=$!
for _ in $(seq 100); do grep -q listening "$base/serve.out" && break; sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$base/serve.out")
[[ -n $url ]] || fail "serve did not start: $(cat "$base/serve.err")"
get() { python3 -c "import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1]).read().decode())" "$url$1"; }
[[ $(get /v1/models | json 'j["data"][0]["id"]') == tiny ]] || fail "serve -a"
[[ $(get /slots | json 'len(j), j[0]["n_ctx"]') == "2 256" ]] || fail "serve -np 2 -c 256: $(get /slots)"
grep -q -- "-ngl/--n-gpu-layers 99 ignored" "$base/serve.err" || fail "serve -ngl note"
kill "$serve_pid"
wait "$serve_pid" || true
serve_pid=
echo "llama.cpp flags ok"
