#!/bin/bash
# `systemd-analyze verify` on every unit in units/, failing on any line it
# prints: it reports unknown keys and bad values as warnings ("..., ignoring")
# and still exits 0, so its exit code alone would pass a broken unit.
#   verify_units.sh UNITS_DIR EPYCTUNE_BIN EPYCTUNED_BIN
# The installed paths (/usr/bin/epyctune, /usr/sbin/epyctuned) are replaced
# with the build tree's binaries in a temporary copy, because verify checks
# that every Exec*= command exists.
set -u
units_dir=$1 epyctune_bin=$2 epyctuned_bin=$3

if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze is not installed (Debian package: systemd)"
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# Prints what systemd-analyze said about one unit file; empty when clean.
verify() {
  (cd "$(dirname "$1")" && systemd-analyze verify --man=no "$(basename "$1")" 2>&1) || \
    echo "(exit status $?)"
}

# The check must be able to fail: a unit with an unknown key and a bad value.
printf '[Unit]\nDescription=self-check\n[Service]\nExecStart=/bin/true\nNoSuchKey=1\nDeviceAllow=char-cpu/msr rwx\n' \
  >"$tmp/selfcheck.service"
if [ -z "$(verify "$tmp/selfcheck.service")" ]; then
  echo "FAIL: systemd-analyze printed nothing for a broken unit: this check cannot see warnings"
  fail=1
fi
rm -f "$tmp/selfcheck.service"

count=0
for unit in "$units_dir"/*.service "$units_dir"/*.socket "$units_dir"/*.timer "$units_dir"/*.path; do
  [ -e "$unit" ] || continue
  count=$((count + 1))
  copy="$tmp/$(basename "$unit")"
  sed -e "s|/usr/bin/epyctune\b|$epyctune_bin|g" -e "s|/usr/sbin/epyctuned\b|$epyctuned_bin|g" \
    "$unit" >"$copy"
  out=$(verify "$copy")
  if [ -n "$out" ]; then
    echo "FAIL: $(basename "$unit"):"
    echo "$out"
    fail=1
  else
    echo "ok: $(basename "$unit")"
  fi
done
if [ "$count" -eq 0 ]; then
  echo "FAIL: no units in $units_dir"
  exit 1
fi

# What issue 20 asks of the units, beyond syntax.
need() {  # need UNIT REGEX WHY
  if ! grep -Eq "$2" "$units_dir/$1"; then
    echo "FAIL: $1: $3 (no line matching '$2')"
    fail=1
  fi
}
refuse() {  # refuse UNIT REGEX WHY
  if grep -Eq "$2" "$units_dir/$1"; then
    echo "FAIL: $1: $3 (a line matches '$2')"
    fail=1
  fi
}
for u in epyctune-apply.service epyctuned.service; do
  need $u '^Conflicts=.*tuned\.service' "conflicts with tuned"
  need $u '^Conflicts=.*power-profiles-daemon\.service' "conflicts with power-profiles-daemon"
  need $u '^Conflicts=.*cpupower\.service' "conflicts with cpupower"
done
need epyctune-apply.service '^ExecStop=.* revert --unless-shutdown' "keeps the state across shutdown"
refuse epyctune-apply.service '^Exec.*--json' "pretty JSON is split into one journal event per line"
need epyctuned.service '^Type=notify$' "the daemon reports READY=1"
need epyctuned.service '^CapabilityBoundingSet=' "a bounded capability set"
need epyctuned.service '^ProtectSystem=strict$' "ProtectSystem=strict"
need epyctuned.service '^NoNewPrivileges=yes$' "NoNewPrivileges"
need epyctuned.service '^DeviceAllow=char-cpu/msr rw$' "the MSR devices"
refuse epyctuned.service '^ProtectKernelTunables=yes' "the knobs live in /proc/sys and /sys"
refuse epyctuned.service '^PrivateDevices=yes' "it hides /dev/cpu/N/msr"
# The engine's cost cache: ProtectHome=yes hides ~/.cache, so without a
# CacheDirectory the instances measured their pass times on every start.
need epyctuned.service '^CacheDirectory=epyctune$' "a cache directory for the engine"

# Documentation= links what the package installs, by the names it has there:
# every man: page is one of packaging/man, every file:// path one that
# `cmake --install` puts under /usr/share/doc/epyctune and dh_compress leaves
# as it is (*.md, excluded in debian/rules). A README path that dh_compress
# turned into README.md.gz used to be the only link.
src=$(cd "$units_dir/.." && pwd)
for u in epyctune-apply.service epyctuned.service; do
  need $u '^Documentation=.*man:' "a Documentation=man: link"
  for link in $(sed -n 's/^Documentation=//p' "$units_dir/$u"); do
    case $link in
    man:*\(*\))
      page=${link#man:}
      page="${page%(*}.$(sed 's/.*(\(.*\))/\1/' <<<"$link")"
      [ -f "$src/packaging/man/$page" ] ||
        { echo "FAIL: $u: Documentation=$link: no packaging/man/$page"; fail=1; }
      ;;
    file:///usr/share/doc/epyctune/*.md)
      rel=${link#file:///usr/share/doc/epyctune/}
      [ -f "$src/$rel" ] || { echo "FAIL: $u: Documentation=$link: no $rel in the source tree"; fail=1; }
      grep -q 'dh_compress -X.md' "$src/debian/rules" ||
        { echo "FAIL: $u: Documentation=$link: debian/rules compresses *.md"; fail=1; }
      ;;
    *)
      echo "FAIL: $u: Documentation=$link: neither man:PAGE(N) nor a .md the package installs"
      fail=1
      ;;
    esac
  done
done

[ "$fail" -eq 0 ] && echo "all $count unit(s) verified"
exit "$fail"
