#!/usr/bin/env bash
# The man pages, the bash completion and the docs the programs' --help names,
# held to the programs themselves (their CLI11 --help) and to the code's value
# tables. Every disagreement is reported, each naming the program, the
# command, the flag or value, and the file to fix; the exit status is 1 if
# there was any.
#   check_cli_docs.sh --completion FILE --docdir DIR [--tables CMD]
#                     --program NAME BIN MANPAGE|- [--program ...]
# DIR holds docs/ as --help names it (the source tree, or
# /usr/share/doc/epyctune once installed). CMD prints the value tables
# (tests/packaging/value_tables.cpp): "PROGRAM<TAB>COMMAND<TAB>OPTION<TAB>
# VALUES<TAB>WHERE". ctest runs it on the build tree (cli_docs);
# .ci/package.sh on the installed package, without tables.
set -uo pipefail

completion= docdir= tables=
names=() bins=() mans=()
while (($#)); do
  case $1 in
  --completion) completion=$2; shift 2 ;;
  --docdir) docdir=$2; shift 2 ;;
  --tables) tables=$2; shift 2 ;;
  --program) names+=("$2"); bins+=("$3"); mans+=("$4"); shift 4 ;;
  *) echo "usage: $0 --completion FILE --docdir DIR [--tables CMD] --program NAME BIN MAN..." >&2; exit 2 ;;
  esac
done
[[ -n $completion && -n $docdir && ${#names[@]} -gt 0 ]] || { echo "$0: missing arguments" >&2; exit 2; }

# The programs the completion registers itself for ("complete -F _epyctune ...").
covered=$(sed -n 's/.*complete -F _epyctune //p' "$completion")
comp="completion $completion"
failures=0
fail() {
  printf 'FAIL: %s\n' "$*"
  failures=$((failures + 1))
}

# CLI11's --help layout, as the completion reads it.
subcommands() { "$@" --help 2>/dev/null | sed -n '/^Subcommands:/,/^$/p' | grep -Eo '^  [a-z][a-z0-9-]*' | tr -d ' '; }
# Every name of every option: "-n" and "--n-predict" from "  -n,--n-predict INT".
option_names() { "$@" --help 2>/dev/null | grep -Eo '^  -[^ ]+' | tr -d ' ' | tr ',' '\n' | sed 's/{.*}$//' | grep -v -e '^-h$' -e '^--help$'; }
# The command paths of a program: "", each subcommand, each nested one.
command_paths() {
  local bin=$1 sub nested
  echo ""
  for sub in $(subcommands "$bin"); do
    echo "$sub"
    for nested in $(subcommands "$bin" "$sub"); do echo "$sub $nested"; done
  done
}
# The roff source, unescaped ("\-\-model" is "--model"; rendered text may
# hyphenate a long option).
man_text() { zcat -f "$1" | sed 's/\\-/-/g; s/\\(em/ /g'; }
mentions() { # TEXT WORD: WORD stands alone in TEXT (case-insensitive with -i as $3)
  grep -Eq ${3:-} -- "(^|[^A-Za-z0-9_-])$(sed 's/[.[\*^$]/\\&/g' <<<"$2")([^A-Za-z0-9_-]|$)" <<<"$1"
}

# Runs the completion as bash does on the words given (the first is the
# program, the last the word being completed) and prints what it offers.
# bash-completion's helpers are stubbed where it is not installed.
complete_words() {
  bash -c '
    if [[ -r /usr/share/bash-completion/bash_completion ]]; then
      . /usr/share/bash-completion/bash_completion
    else
      _init_completion() {
        words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
        cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
      }
      _filedir() { :; }
    fi
    . "$0"
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _epyctune
    printf "%s\n" "${COMPREPLY[@]}"' "$completion" "$@" | sed '/^$/d' | sort -u
}
# "a b c" and "c b a" compare equal.
sorted() { tr ' ' '\n' <<<"$*" | sed '/^$/d' | sort -u; }
differ() { # OFFERED EXPECTED: "missing X Y; refused by the program: Z"
  local missing extra
  missing=$(comm -13 <(sorted "$1") <(sorted "$2") | tr '\n' ' ')
  extra=$(comm -23 <(sorted "$1") <(sorted "$2") | tr '\n' ' ')
  [[ -z $missing && -z $extra ]] && return 1
  printf '%s' "${missing:+offers no ${missing% }}${missing:+${extra:+; }}${extra:+offers ${extra% }, which it does not take}"
}

for ((p = 0; p < ${#names[@]}; p++)); do
  name=${names[p]} bin=${bins[p]} man=${mans[p]}
  mapfile -t paths < <(command_paths "$bin")
  "$bin" --help >/dev/null 2>&1 || fail "$name: '$bin --help' failed"

  # 1. The man page: a section per command, every flag of every command.
  if [[ $man != - ]]; then
    text=$(man_text "$man")
    for sub in $(subcommands "$bin"); do
      grep -Eq "^\.SS \"?$sub( |\"|$)" <<<"$text" ||
        fail "$(basename "$man"): no .SS section for '$name $sub' (it is in $name --help)"
    done
    for path in "${paths[@]}"; do
      # shellcheck disable=SC2086 # the path is words
      for opt in $(option_names "$bin" $path); do
        mentions "$text" "$opt" || fail "$(basename "$man"): does not mention $opt of '$name${path:+ $path}'"
      done
    done
  fi

  # 2. The docs --help points to are where the package puts them.
  for path in "${paths[@]}"; do
    # shellcheck disable=SC2086
    for doc in $("$bin" $path --help 2>/dev/null | grep -Eo 'docs/[A-Za-z0-9_./-]+\.md' | sort -u); do
      [[ -f $docdir/$doc ]] || fail "'$name${path:+ $path} --help' names $doc, which is not in $docdir"
    done
  done

  # 3. The completion (for the programs it registers): subcommands and flags
  # from --help, and the values of every option whose --help shows its set.
  [[ " $covered " == *" $name "* ]] || continue
  offered=$(complete_words "$bin" "")
  if d=$(differ "$offered" "$(subcommands "$bin")"); then
    fail "$comp: '$name <TAB>' $d (subcommands in --help)"
  fi
  for path in "${paths[@]}"; do
    # shellcheck disable=SC2086
    while IFS=$'\t' read -r opt values; do
      # shellcheck disable=SC2086
      offered=$(complete_words "$bin" $path "$opt" "")
      if d=$(differ "$offered" "$values"); then
        fail "$comp: '$name${path:+ $path} $opt <TAB>' $d (its --help set)"
      fi
    done < <("$bin" $path --help 2>/dev/null |
      sed -nE 's/^  (-[^ ,]+,)?(--[^ ]+) [A-Z]+:(value in )?\{([^}]*)\}.*/\2\t\4/p' |
      sed -E 's/->[^,\t]*//g; s/,/ /g')
  done
done

# 4. The code's value tables: each option is the program's, the completion
# offers exactly its values, and the man page names them where it must.
if [[ -n $tables ]]; then
  rows=$("$tables") || fail "$tables failed"
  while IFS=$'\t' read -r name path opt values where; do
    [[ -n $name ]] || continue
    p=-1
    for ((i = 0; i < ${#names[@]}; i++)); do [[ ${names[i]} == "$name" ]] && p=$i; done
    if ((p < 0)); then
      fail "value table for $name: no --program $name given"
      continue
    fi
    bin=${bins[p]} man=${mans[p]}
    [[ $path == - ]] && path=
    [[ $opt == - ]] && opt=
    if [[ -n $path ]] && ! option_names "$bin" $path | grep -qx -- "$opt"; then
      fail "value table: '$name $path' has no $opt any more (tests/packaging/value_tables.cpp)"
      continue
    fi
    if [[ $where == *completion* ]]; then
      # shellcheck disable=SC2086
      offered=$(complete_words "$bin" $path "$opt" "")
      if d=$(differ "$offered" "$values"); then
        fail "$comp: '$name $path $opt <TAB>' $d (the code accepts: $values)"
      fi
    fi
    if [[ $where == *man* && $man != - ]]; then
      text=$(man_text "$man")
      for v in $values; do
        mentions "$text" "$v" -i || fail "$(basename "$man"): does not name '$v'${opt:+ (}${path:+$name $path }${opt}${opt:+)} (the code accepts: $values)"
      done
    fi
  done <<<"$rows"
fi

if ((failures)); then
  echo "$failures disagreement(s) between the programs and their man pages, completion or docs"
  exit 1
fi
echo "man pages, completion and docs agree with ${names[*]}"
