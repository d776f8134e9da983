#!/usr/bin/env bash
# CI: build the Debian package from a copy of the tree (build-pkg/; build/ is
# left alone), lint it, install the .deb on this machine with apt, check the
# installed package from its own files only, then purge it and check that
# nothing is left. Needs root on Debian 12; run it on a machine you may
# install packages on (CI's fresh one).
#   .ci/package.sh              everything
#   PKG_KEEP=1 .ci/package.sh   leave the package installed
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/build-pkg
start=$SECONDS
say() { printf '== %s (%ds)\n' "$*" $((SECONDS - start)); }
fail() {
  printf 'package.sh: FAIL: %s\n' "$*" >&2
  exit 1
}

[[ $(id -u) -eq 0 ]] || fail "needs root: it installs and purges the package"

# Beyond scripts/setup.sh's build dependencies: the packaging tools, and what
# the checks below run (man, systemd-analyze, bash-completion).
tools=(debhelper lintian man-db bash-completion systemd)
missing=()
for p in "${tools[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

say "copy the tree to $work/src"
rm -rf "$work"
mkdir -p "$work/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Tracked and untracked-but-not-ignored files: what a checkout builds from.
  git ls-files -z --cached --others --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$work/src"
else
  tar --exclude='./build*' --exclude='./obj-*' --exclude=./.git -cf - . | tar -xf - -C "$work/src"
fi

say "dpkg-buildpackage"
jobs=$(nproc)
(
  cd "$work/src"
  if command -v ccache >/dev/null; then
    export CCACHE=ccache CCACHE_BASEDIR=$work/src
  fi
  dpkg-buildpackage -us -uc -b -j"$jobs"
) >"$work/build.log" 2>&1 || {
  tail -50 "$work/build.log"
  fail "dpkg-buildpackage (log: $work/build.log)"
}
version=$(cd "$work/src" && dpkg-parsechangelog -S Version)
deb=$(echo "$work"/epyctune_"$version"_*.deb)
changes=$(echo "$work"/epyctune_"$version"_*.changes)
[[ -f $deb && -f $changes ]] || fail "no epyctune_${version}_*.deb/.changes in $work"
cmake_version=$(sed -n 's/^project(epyctune VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[[ $version == "$cmake_version" ]] ||
  fail "debian/changelog says $version, CMakeLists.txt project(VERSION) says $cmake_version: add a changelog entry (dch -v $cmake_version)"

say "lintian"
# The .changes covers the .deb, the dbgsym .deb (none with noddebs) and the
# .buildinfo.
lintian --fail-on error,warning --info --display-info --show-overrides "$changes" ||
  fail "lintian (fix the tag or add a justified override to debian/epyctune.lintian-overrides)"

say "install $(basename "$deb")"
# A stand-in for an enabled tuned (only where there is no real one), to see
# the postinst warn about it.
fake_tuned=/etc/systemd/system/tuned.service
planted=0
if ! systemctl cat tuned.service >/dev/null 2>&1 && [[ ! -e $fake_tuned ]]; then
  printf '[Unit]\nDescription=stand-in for package.sh\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n' >"$fake_tuned"
  systemctl enable tuned.service >/dev/null 2>&1
  planted=1
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y "$deb" 2>&1 | tee "$work/install.log"
if ((planted)); then
  systemctl disable tuned.service >/dev/null 2>&1
  rm -f "$fake_tuned"
  grep -q "warning: tuned.service is enabled" "$work/install.log" ||
    fail "postinst did not warn about an enabled tuned.service"
fi
dpkg-query -W -f='${Status}\n' epyctune | grep -q "install ok installed" || fail "epyctune not installed"

say "the installed package, from its own files"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PATH=/usr/sbin:/usr/bin:/sbin:/bin # never the build tree
for f in /usr/bin/epyctune /usr/bin/epyctune-engine /usr/sbin/epyctuned; do
  [[ $(dpkg -S "$f" 2>/dev/null) == epyctune:* ]] || fail "$f is not the package's"
done
got=$(/usr/bin/epyctune --version)
echo "$got"
[[ $got == "epyctune $version" ]] || fail "epyctune --version says '$got', the package is $version"
/usr/bin/epyctune-engine --version | grep -qx "epyctune-engine $version" || fail "epyctune-engine --version"
/usr/sbin/epyctuned --version | grep -q "$version" || fail "epyctuned --version"
# detect reads this host read-only; a host that is not an EPYC still gets a
# description and "no profile fits".
/usr/bin/epyctune detect || fail "epyctune detect on this host"
/usr/bin/epyctune fixture create --machine 9754 "$tmp/fx" >/dev/null
/usr/bin/epyctune plan --profile 9754 --sysroot "$tmp/fx" >"$tmp/plan.txt" || fail "epyctune plan on a 9754 fixture"
head -5 "$tmp/plan.txt"

for page in epyctune epyctune-engine epyctuned; do
  file=$(man -w "$page") || fail "man -w $page"
  [[ $(dpkg -S "$file") == epyctune:* ]] || fail "$file is not the package's"
  warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$file" 2>&1 >/dev/null)
  [[ -z $warnings ]] || fail "man $page: $warnings"
done
# The man pages keep up with the CLI (every command in --help has a section,
# every flag of every command is mentioned), the completion offers every
# command and every value set --help shows, and every docs/... file a
# --help names is installed: the same check ctest runs on the build tree
# (cli_docs), here on the installed files.
"$root/tests/packaging/check_cli_docs.sh" \
  --completion /usr/share/bash-completion/completions/epyctune \
  --docdir /usr/share/doc/epyctune \
  --program epyctune /usr/bin/epyctune "$(man -w epyctune)" \
  --program epyctune-engine /usr/bin/epyctune-engine "$(man -w epyctune-engine)" \
  --program epyctuned /usr/sbin/epyctuned "$(man -w epyctuned)" ||
  fail "the installed man pages, completion or docs disagree with the binaries"

comp=/usr/share/bash-completion/completions
[[ -f $comp/epyctune ]] || fail "no bash completion in $comp"
# One file: the engine's is a link to it, not a copy.
[[ -L $comp/epyctune-engine && $(readlink "$comp/epyctune-engine") == epyctune ]] ||
  fail "$comp/epyctune-engine is not a link to epyctune"
complete_words() { # the completions bash offers for the words given
  bash -c '
    . /usr/share/bash-completion/bash_completion
    . '"$comp"'/epyctune
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _epyctune
    printf "%s\n" "${COMPREPLY[@]}"' _ "$@"
}
complete_words epyctune pl | grep -qx plan || fail "completion: epyctune pl -> plan"
complete_words epyctune plan --pro | grep -qx -- --profile || fail "completion: epyctune plan --pro -> --profile"
complete_words epyctune plan --profile 97 | grep -qx 9754 || fail "completion: --profile 97 -> 9754"
complete_words epyctune verify --format j | grep -qx json || fail "completion: --format j -> json"
complete_words epyctune-engine gen | grep -qx generate || fail "completion: epyctune-engine gen -> generate"
complete_words epyctune-engine generate --draft-m | grep -qx -- --draft-max || fail "completion: --draft-m -> --draft-max"
complete_words epyctune-engine kernel-bench --type q5 | grep -qx q5_k || fail "completion: --type q5 -> q5_k"
complete_words epyctune fixture create --machine 99 | grep -qx 9965 || fail "completion: --machine 99 -> 9965"

conf=/etc/epyctune/epyctune.toml
dpkg -L epyctune | grep -qx "$conf" || fail "dpkg -L epyctune does not list $conf"
dpkg-query -W -f='${Conffiles}\n' epyctune | grep -q " $conf " || fail "$conf is not a conffile"
for f in /usr/share/epyctune/profiles/epyc-9754.toml /usr/share/doc/epyctune/copyright; do
  [[ -f $f ]] || fail "$f missing"
done

units=(/lib/systemd/system/epyctuned.service /lib/systemd/system/epyctune-apply.service)
# verify also resolves each Documentation=man: page (--man=yes).
systemd-analyze verify "${units[@]}" || fail "systemd-analyze verify ${units[*]}"
for u in "${units[@]}"; do
  links=$(sed -n 's/^Documentation=//p' "$u" | tr ' ' '\n')
  grep -q '^man:' <<<"$links" || fail "$u: no Documentation=man: link"
  for link in $links; do
    case $link in
    man:*) man -w $(sed 's/^man:\(.*\)(\(.*\))$/\2 \1/' <<<"$link") >/dev/null 2>&1 ||
      fail "$u: Documentation=$link: no such man page installed" ;;
    file://*) [[ -f ${link#file://} ]] || fail "$u: Documentation=$link: not installed" ;;
    esac
  done
done
for f in README.md docs/exit-codes.md docs/daemon.md docs/monitoring.md docs/json/stack.md; do
  [[ -f /usr/share/doc/epyctune/$f ]] || fail "/usr/share/doc/epyctune/$f missing (uncompressed)"
done
for u in epyctuned.service epyctune-apply.service; do
  state=$(systemctl is-enabled "$u" 2>/dev/null || true)
  [[ $state == disabled ]] || fail "$u is '$state' after install: it must be left for the admin to enable"
  if [[ -d /run/systemd/system ]]; then
    ! systemctl is-active --quiet "$u" || fail "$u was started by the install"
  fi
done
getent group epyctune >/dev/null || fail "no epyctune group"
[[ $(stat -c '%U:%G %a' /var/lib/epyctune) == "root:epyctune 750" ]] ||
  fail "/var/lib/epyctune is $(stat -c '%U:%G %a' /var/lib/epyctune), not root:epyctune 750"

if [[ ${PKG_KEEP:-0} == 1 ]]; then
  say "done, package left installed (PKG_KEEP=1)"
  exit 0
fi

say "purge"
dpkg -L epyctune | sort >"$tmp/files"
DEBIAN_FRONTEND=noninteractive apt-get purge -y epyctune
! dpkg-query -W -f='${Status}' epyctune 2>/dev/null | grep -q installed || fail "epyctune still installed"
[[ ! -e /var/lib/epyctune ]] || fail "/var/lib/epyctune left after purge"
[[ ! -e /etc/epyctune ]] || fail "/etc/epyctune left after purge"
! getent group epyctune >/dev/null || fail "epyctune group left after purge"
while read -r f; do
  [[ -d $f || ! -e $f ]] || fail "$f left after purge"
done <"$tmp/files"
for u in epyctuned.service epyctune-apply.service; do
  [[ -z $(find /etc/systemd/system -name "$u" 2>/dev/null) ]] || fail "$u enablement left after purge"
done
say "package OK: built, lintian-clean, installed, checked, purged"
