#!/usr/bin/env bash
# End-to-end: epyctune-engine's flags as a llama.cpp user types them, prompts
# from -p, -f and stdin, and progress drawn only on a terminal. The models
# come from the dev tool epyctune-mkmodel.
# usage: cli_test.sh ENGINE_BIN MKMODEL_BIN
set -euo pipefail
bin=$1
mk=$2
base=$(mktemp -d "${TMPDIR:-/tmp}/epyctune-engine-cli.XXXXXX")
trap 'rm -rf "$base"' EXIT
export XDG_CACHE_HOME=$base/cache  # adaptive drafting caches pass times there
fail() { echo "FAIL: $*" >&2; exit 1; }
json() { python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"; }

# mkmodel: -t threads; stderr is a file here, so no progress line.
"$mk" mkmodel "$base/t.gguf" --shape tiny --quant q8_0 -t 1 2>"$base/mk.err"
grep -q $'\r' "$base/mk.err" && fail "mkmodel drew progress into a file"
grep -q "wrote" "$base/mk.err" || fail "mkmodel summary"

# generate: the same prompt from -p, -p -, -f and piped stdin gives the same tokens.
gen() { "$bin" generate -m "$base/t.gguf" -n 6 -t 1 --json "$@"; }
want=$(gen -p "hello world" | json 'j["prompt_tokens"], j["tokens"]')
printf 'hello world' >"$base/prompt.txt"
[[ $(gen -f "$base/prompt.txt" | json 'j["prompt_tokens"], j["tokens"]') == "$want" ]] || fail "-f"
[[ $(gen -p - <"$base/prompt.txt" | json 'j["prompt_tokens"], j["tokens"]') == "$want" ]] || fail "-p -"
[[ $(gen <"$base/prompt.txt" | json 'j["prompt_tokens"], j["tokens"]') == "$want" ]] || fail "stdin"
gen -p x -f "$base/prompt.txt" >/dev/null 2>&1 && fail "-p and -f together accepted"
[[ $(gen -p a | json 'len(j["cpus"]["shared"].split(","))') == 1 ]] || fail "-t 1: one CPU"
gen -p a --cpus 0 >/dev/null 2>&1 && fail "-t and --cpus together accepted"

# Speculative flags: the draft model is --model-draft, its length --draft-max/--draft-min.
spec=$(gen -p "hello world" --model-draft "$base/t.gguf" --draft-max 3 --draft-min 2 --spec-mode shared)
[[ $(json 'j["prompt_tokens"], j["tokens"]' <<<"$spec") == "$want" ]] || fail "speculative tokens differ"
[[ $(json 'j["spec"]["enabled"], j["spec"]["draft_max"], j["spec"]["draft_min"]' <<<"$spec") == "True 3 2" ]] ||
  fail "spec json: $(json 'j["spec"]' <<<"$spec")"
out=$(gen -p a --model-draft "$base/t.gguf" --draft-max 2 --draft-min 3 2>&1) && fail "draft-min > draft-max accepted"
grep -q -- "--draft-min" <<<"$out" || fail "draft-min message: $out"
md=$(gen -p "hello world" -md "$base/t.gguf" --draft-max 3 --draft-min 2 --spec-mode shared)
[[ "$(json 'j["tokens"], j["spec"]["enabled"], j["spec"]["drafted"]' <<<"$md")" == \
   "$(json 'j["tokens"], j["spec"]["enabled"], j["spec"]["drafted"]' <<<"$spec")" ]] || fail "-md is not --model-draft"
ad=$(gen -p "hello world" -md "$base/t.gguf" --draft-max adaptive:5 --spec-mode shared)
[[ $(json 'j["spec"]["adaptive"], j["spec"]["draft_max"]' <<<"$ad") == "True 5" ]] ||
  fail "adaptive:5 json: $(json 'j["spec"]' <<<"$ad")"
[[ "$(json 'j["tokens"]' <<<"$ad")" == "$(json 'j["tokens"]' <<<"$spec")" ]] || fail "adaptive tokens differ"
[[ $(json 'j["spec"]["adaptive"]' <<<"$spec") == "False" ]] || fail "--draft-max 3 is a fixed K"
gen -p a -md "$base/t.gguf" --draft-max often >/dev/null 2>&1 && fail "--draft-max often accepted"
gen -p a --draft "$base/t.gguf" >/dev/null 2>&1 && fail "old --draft accepted"
# Bare --lookup: n-grams up to 8 over prompt and output, same tokens as plain.
lk=$(gen -p "hello world hello world" --lookup --draft-max 4)
[[ $(json 'j["spec"]["lookup"], j["spec"]["enabled"]' <<<"$lk") == "8 True" ]] || fail "bare --lookup"
# mkmodel --pard: a PARD-style draft that generate drafts with, same tokens as plain.
"$mk" mkmodel "$base/p.gguf" --shape tiny --quant q8_0 -t 1 --seed 2 --pard 2>/dev/null
pd=$(gen -p "hello world" --model-draft "$base/p.gguf" --draft-max 4 --spec-mode shared)
[[ "$(json 'j["tokens"]' <<<"$pd")" == "$(gen -p "hello world" | json 'j["tokens"]')" ]] || fail "--pard draft"
gen -p a --draft-len 2 >/dev/null 2>&1 && fail "old --draft-len accepted"

# bench: --passes, -r repetitions, -t threads; -n is not passes.
b=$("$bin" bench -m "$base/t.gguf" --batch 1 --passes 2 -r 1 -t 1 --ctx 4 --bw-mib 16 --json 2>"$base/b.err")
[[ $(json 'j["passes_per_repeat"], j["repeats"], j["threads"]' <<<"$b") == "2 1 1" ]] || fail "bench json"
grep -q $'\r' "$base/b.err" && fail "bench drew progress into a file"

# bench --draft: plain and speculative side by side, identical tokens or it fails.
sb=$("$bin" bench -m "$base/t.gguf" --draft "$base/t.gguf" --spec adaptive,2 -n 8 -r 1 -t 1 \
  --spec-mode shared --bw-mib 16 --json)
[[ $(json '[c["name"] for c in j["configs"]]' <<<"$sb") == "['plain', 'adaptive', 'K=2']" ]] ||
  fail "bench --spec configs: $sb"
[[ $(json 'j["configs"][2]["acceptance"], j["configs"][2]["k_histogram"]["2"] > 0' <<<"$sb") == "1.0 True" ]] ||
  fail "bench --spec: a draft equal to the target accepts everything: $sb"
ls "$base/cache/epyctune/"passes-*.json >/dev/null || fail "no cost cache written"
[[ $(json 'len(j["probes"]), len(j["configs"][1]["predicted_per_repeat"])' <<<"$sb") == "1 1" ]] ||
  fail "bench --spec: one pass-time probe and one prediction per repeat: $sb"
# The ceiling: the best K at full acceptance, per probe; K=0 (x1.0) when no K
# beats plain even then, as a draft as dear as its target may.
[[ $(json 'j["ceiling"]["max_k"], len(j["ceiling"]["per_repeat"]), j["ceiling"]["ratio"] >= 1.0,
  (j["ceiling"]["k_per_repeat"][0] == 0) == (j["ceiling"]["ratio"] == 1.0)' <<<"$sb") == "16 1 True True" ]] ||
  fail "bench --spec ceiling: $sb"
"$bin" bench -m "$base/t.gguf" --draft "$base/t.gguf" --spec 0 >/dev/null 2>&1 && fail "--spec 0 accepted"
"$bin" bench -m "$base/t.gguf" --batch 1 -n 2 -r 1 >/dev/null 2>&1 && fail "bench -n accepted"

# mkmodel --attention-scale: the next token depends mostly on the current one,
# so the model re-emits its continuation O when the prompt P + O + P returns to
# it, and lookup drafts O from the context (bench/spec_lookup.py at 7B).
P="hello world, this is"
g24() { "$bin" generate -m "$1" -t 1 -n 24 --json "${@:2}"; }
# P + O + P, where O is model $1's continuation of P (its tokens in $o_tokens).
pop() {
  local o
  o=$(g24 "$1" -p "$P" --draft-max 0)
  o_tokens=$(json 'j["tokens"]' <<<"$o")
  printf '%s' "$P$(json 'j["text"]' <<<"$o")$P"
}
"$mk" mkmodel "$base/c.gguf" --shape tiny,tied=0 --quant q8_0 -t 1 --attention-scale 0.01 2>/dev/null
"$mk" mkmodel "$base/c0.gguf" --shape tiny,tied=0 --quant q8_0 -t 1 2>/dev/null
pop "$base/c.gguf" >"$base/pop.txt"
p=$(<"$base/pop.txt")
r=$(g24 "$base/c.gguf" -p "$p" --lookup 8 --draft-max 8)
[[ $o_tokens == "$(json 'j["tokens"]' <<<"$r")" ]] || fail "attention-scale: O not re-emitted: $o_tokens $r"
# The tiny vocabulary's text does not survive re-tokenizing whole (byte pieces),
# so lookup finds only parts of O in the prompt.
[[ $(json 'j["spec"]["lookup_accepted"] >= 8 and j["spec"]["target_passes"] <= 16' <<<"$r") == True ]] ||
  fail "lookup did not draft the reused span: $r"
pop "$base/c0.gguf" >"$base/pop0.txt"
r0=$(g24 "$base/c0.gguf" -p "$(<"$base/pop0.txt")" --draft-max 0)
[[ $o_tokens != "$(json 'j["tokens"]' <<<"$r0")" ]] || fail "unscaled model re-emits O too"
"$mk" mkmodel "$base/x.gguf" --shape tiny --attention-scale 0 >/dev/null 2>&1 && fail "--attention-scale 0 accepted"
lb=$("$bin" bench -m "$base/c.gguf" --lookup 8 --spec 8 -p "$p" -n 24 -r 1 -t 1 --bw-mib 16 --json)
[[ $(json 'j["configs"][1]["acceptance"] >= 0.25, j["draft"], len(j["probes"])' <<<"$lb") == "True  1" ]] ||
  fail "bench --lookup without a draft: $lb"

# tokenize: the text is -p/--prompt (and still --text).
[[ $("$bin" tokenize -m "$base/t.gguf" -p "hello") == $("$bin" tokenize -m "$base/t.gguf" --text "hello") ]] ||
  fail "tokenize -p"

# On a terminal: no prompt is an error, and mkmodel draws its progress line.
if command -v script >/dev/null; then
  out=$(script -qec "$bin generate -m $base/t.gguf -n 2" /dev/null </dev/null 2>&1 || true)
  grep -q "no prompt" <<<"$out" || fail "terminal stdin without a prompt: $out"
  out=$(script -qec "$mk mkmodel $base/p.gguf --shape tiny --quant q8_0 -t 1" /dev/null </dev/null)
  grep -q $'\r\\[mkmodel\\] ' <<<"$out" || fail "no progress line on a terminal: $out"
fi
echo "engine cli ok"
