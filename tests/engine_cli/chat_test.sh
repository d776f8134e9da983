#!/usr/bin/env bash
# `epyctune-engine chat` (issue 33; before, there was no such command): turns
# piped on stdin, replies on stdout, one KV cache kept across turns so that a
# turn computes only its new tokens, /clear, /bye, end of input, -sys, and
# Ctrl-C stopping a reply (not the program) or, at the prompt, leaving.
# usage: chat_test.sh ENGINE_BIN MKMODEL_BIN
set -euo pipefail
bin=$1
mk=$2
base=$(mktemp -d "${TMPDIR:-/tmp}/epyctune-chat.XXXXXX")
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null
  rm -rf "$base"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A ChatML vocabulary, so the model has a chat template.
"$mk" vocab --from-json "$(dirname "$0")/../data/vocab/tiny-chatml/tokenizer.json" "$base/v.gguf"
"$mk" mkmodel "$base/c.gguf" --shape tiny --vocab "$base/v.gguf" --quant q8_0 -t 1 2>/dev/null
chat() { "$bin" chat -m "$base/c.gguf" -t 1 -n 12 --verbose "$@"; }
# "[chat] prompt P tokens, N new (C cached) ..." -> "P N C", one line per turn.
turns() { sed -n 's/^\[chat\] prompt \([0-9]*\) tokens, \([0-9]*\) new (\([0-9]*\) cached).*/\1 \2 \3/p' "$1"; }

# Two turns: the second computes only what follows the first turn's cache.
printf 'hello there\nand how are you\n' | chat >"$base/two.out" 2>"$base/two.err" || fail "chat: $(cat "$base/two.err")"
mapfile -t t < <(turns "$base/two.err")
((${#t[@]} == 2)) || fail "two turns, two replies: $(cat "$base/two.err")"
read -r p1 n1 c1 <<<"${t[0]}"
read -r p2 n2 c2 <<<"${t[1]}"
((c1 == 0 && n1 == p1)) || fail "turn 1 computes its whole prompt: ${t[0]}"
# The first turn's prompt and reply are in the cache: turn 2 reuses at least
# that prompt's full 16-token blocks, and computes only the rest.
((c2 >= p1 / 16 * 16 && n2 == p2 - c2 && n2 < p2 - p1 + 12 + 16)) || fail "turn 2 recomputed the history: ${t[1]} after ${t[0]}"

# /clear starts over: the same first turn gets the same reply, from the cache
# (the rendering's start is still there); /bye leaves, ignoring what follows.
printf 'hello there\n' | chat >"$base/one.out" 2>/dev/null
printf 'hello there\n/clear\nhello there\n/bye\nnever read\n' | chat >"$base/clear.out" 2>"$base/clear.err"
[[ $(cat "$base/clear.out") == "$(cat "$base/one.out" "$base/one.out")" ]] ||
  fail "/clear: $(od -c "$base/clear.out" | head)"
mapfile -t t < <(turns "$base/clear.err")
((${#t[@]} == 2)) || fail "/bye: a turn after it was answered: $(cat "$base/clear.err")"
read -r p3 n3 c3 <<<"${t[1]}"
# The KV pool shares whole 16-token blocks: every full block before the last
# prompt token is mapped, the rest computed.
((p3 == p1 && c3 == (p1 - 1) / 16 * 16 && n3 == p3 - c3)) ||
  fail "/clear: the first turn again maps its full blocks but the last token's: ${t[1]}"
grep -q "cleared" "$base/clear.err" || fail "/clear said nothing"

# End of input leaves cleanly; blank lines are no turns; unknown commands are
# not sent to the model.
printf '\n/nope\n' | chat >"$base/eof.out" 2>"$base/eof.err" || fail "EOF: exit status $?"
[[ ! -s $base/eof.out ]] || fail "a blank line or /nope got a reply"
grep -q "unknown command /nope" "$base/eof.err" || fail "/nope: $(cat "$base/eof.err")"

# -sys: the system prompt is part of every rendering (more prompt tokens).
printf 'hello there\n' | chat -sys "be brief" 2>"$base/sys.err" >/dev/null
read -r ps _ <<<"$(turns "$base/sys.err")"
((ps > p1)) || fail "-sys: prompt $ps tokens, without $p1"
# A trailing backslash continues the turn on the next line: one turn.
printf 'hello\\\nthere\n' | chat 2>"$base/cont.err" >/dev/null
[[ $(turns "$base/cont.err" | wc -l) == 1 ]] || fail "continued line: $(cat "$base/cont.err")"

# No chat template (the synthetic vocabulary): refused before the weights
# load, naming --chat-template; with it, the chat runs.
"$mk" mkmodel "$base/t.gguf" --shape tiny --quant q8_0 -t 1 2>/dev/null
out=$(echo hi | "$bin" chat -m "$base/t.gguf" -t 1 -n 2 2>&1) && fail "no template accepted"
grep -q -- "--chat-template" <<<"$out" || fail "no template: $out"
echo hi | "$bin" chat -m "$base/t.gguf" -t 1 -n 2 --chat-template chatml >/dev/null || fail "--chat-template"

# The conversation outgrowing the context is said, with -c, and the chat goes on.
printf 'hello there hello there hello there\nhi\n' | chat -c 40 >/dev/null 2>"$base/ctx.err" ||
  fail "a full context ended the chat"
grep -q -- "-c/--ctx-size" "$base/ctx.err" || fail "full context: $(cat "$base/ctx.err")"

# Ctrl-C: during a reply it stops that reply, and the next turn is answered;
# at the prompt it leaves with 130. A larger model, so a reply of 4000 tokens
# takes seconds.
"$mk" mkmodel "$base/b.gguf" --shape dim=256,layers=4,heads=4,kv_heads=2,ffn=768,ctx=4096 \
  --vocab "$base/v.gguf" --quant q8_0 -t 1 2>/dev/null
mkfifo "$base/in"
"$bin" chat -m "$base/b.gguf" -t 1 -n 4000 --verbose <"$base/in" >"$base/int.out" 2>"$base/int.err" &
pid=$!
exec 3>"$base/in"
echo "tell me a long story" >&3
for _ in $(seq 300); do [[ -s $base/int.out ]] && break; sleep 0.1; done
[[ -s $base/int.out ]] || fail "no reply began: $(cat "$base/int.err")"
kill -INT "$pid"
for _ in $(seq 300); do grep -q stopped "$base/int.err" && break; sleep 0.1; done
mapfile -t t < <(grep '^\[chat\]' "$base/int.err")
[[ ${t[0]:-} == *", stopped" ]] || fail "Ctrl-C did not stop the reply: $(cat "$base/int.err")"
# The program goes on: the next turn gets its reply (to its end: where the
# first reply stopped varies, so this one may end early or fill the context).
echo "and then" >&3
for _ in $(seq 1200); do (($(grep -c '^\[chat\]' "$base/int.err") >= 2)) && break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null || fail "Ctrl-C during a reply ended the program: $(cat "$base/int.err")"
(($(grep -c '^\[chat\]' "$base/int.err") == 2)) || fail "the turn after Ctrl-C: $(cat "$base/int.err")"
sleep 0.2
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
pid=
exec 3>&-
((rc == 130)) || fail "Ctrl-C at the prompt: exit status $rc"
echo "chat ok"
