#!/usr/bin/env bash
# The packaged engine carries no model generator: mkmodel, margins and vocab
# are the dev tool epyctune-mkmodel's, which no install rule ships.
# usage: no_dev_tools_test.sh ENGINE_BIN MKMODEL_BIN BUILD_DIR ENGINE_MAN_PAGE
set -euo pipefail
engine=$1
mk=$2
build=$3
man=$4
base=$(mktemp -d "${TMPDIR:-/tmp}/epyctune-no-dev-tools.XXXXXX")
trap 'rm -rf "$base"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# CLI11's --help layout, as .ci/package.sh and the bash completion read it.
subcommands() { "$@" --help | sed -n '/^Subcommands:/,/^$/p' | grep -Eo '^  [a-z][a-z0-9-]*' | tr -d ' '; }

engine_subs=$(subcommands "$engine")
tool_subs=$(subcommands "$mk")
grep -qx generate <<<"$engine_subs" || fail "no generate in $engine --help: $engine_subs"
for c in mkmodel margins vocab; do
  ! grep -qx "$c" <<<"$engine_subs" || fail "epyctune-engine --help lists $c"
  grep -qx "$c" <<<"$tool_subs" || fail "epyctune-mkmodel --help does not list $c: $tool_subs"
done

# Each moved command is no subcommand of the engine: a CLI11 parse error
# (exit status above 100; CLI11 says a subcommand is required, as the word is
# none) that writes nothing.
refused() { # NAME ARGS...
  local out rc=0
  out=$("$engine" "$@" 2>&1) || rc=$?
  ((rc > 100)) || fail "epyctune-engine $* exited $rc, not a parse error: $out"
  grep -q "subcommand" <<<"$out" || fail "epyctune-engine $*: not refused as a subcommand: $out"
  grep -q "dev tool epyctune-mkmodel" <<<"$out" || fail "epyctune-engine $*: no pointer to the tool: $out"
}
refused mkmodel "$base/t.gguf" --shape tiny --quant q8_0 -t 1
refused margins -m "$base/t.gguf"
refused vocab --from-json "$base/tokenizer.json" "$base/v.gguf"
[[ -z $(ls -A "$base") ]] || fail "a refused command wrote $(ls -A "$base")"

# Every command the man page documents is one the engine has.
for c in $(sed -n 's/^\.SS "\([a-z][a-z\\-]*\).*/\1/p' "$man" | sed 's/\\-/-/g'); do
  grep -qx "$c" <<<"$engine_subs" || fail "man page section '$c' is not an epyctune-engine command"
done

# What a package ships is what `cmake --install` installs: the engine, and no
# model generator.
DESTDIR="$base/root" cmake --install "$build" --prefix /usr >"$base/install.log" 2>&1 ||
  { cat "$base/install.log" >&2; fail "cmake --install $build"; }
[[ -x $base/root/usr/bin/epyctune-engine ]] || fail "cmake --install did not install epyctune-engine"
found=$(find "$base/root" -name '*mkmodel*')
[[ -z $found ]] || fail "cmake --install installed $found"
echo "no dev tools in the engine or the install ok"
