#!/usr/bin/env bash
# End-to-end: the epyctune binary on fixtures, an lstopo XML and bad profiles.
set -euo pipefail
bin=$1
base=$(mktemp -d "${TMPDIR:-/tmp}/epyctune-cli.XXXXXX")
[[ -w /dev/shm ]] && { rm -rf "$base"; base=$(mktemp -d /dev/shm/epyctune-cli.XXXXXX); }
trap 'rm -rf "$base"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" fixture create --machine 9354 --nps 2 "$base/g" >/dev/null
"$bin" fixture create --machine 9354 "$base/g" 2>/dev/null && fail "non-empty DIR accepted"
"$bin" fixture create --machine 9354 --force "$base/g" >/dev/null
grep -q "this host is what epyc-9354 describes" <<<"$("$bin" --sysroot "$base/g" detect)" || fail "detect text"
grep -q '"schema_version": 1' <<<"$("$bin" --sysroot "$base/g" detect --json)" || fail "detect json"
HWLOC_FSROOT="$base/g" HWLOC_COMPONENTS=-x86 lstopo-no-graphics --no-io --of xml "$base/g.xml"
grep -q "epyc-9354 describes" <<<"$("$bin" --topology "$base/g.xml" detect)" || fail "detect xml"
"$bin" detect >/dev/null || fail "detect live"
grep -q "^epyc-9754" <<<"$("$bin" profile list)" || fail "profile list"
grep -q '"name": "epyc-7543-2s"' <<<"$("$bin" profile show 7543 --json)" || fail "profile show"

printf 'include = "9354"\n[spec]\ndraft_lenn = 4\n' >"$base/bad.toml"
printf 'include = "9354"\n[cat]\ndraft_cbm = "1ffff"\n' >"$base/mask.toml"
printf 'include = "9354"\n' >"$base/good.toml"
out=$("$bin" profile validate "$base/bad.toml" 2>&1) && fail "validate accepted a bad key"
grep -q "bad.toml:3:1: unknown key 'draft_lenn' in \[spec\]; did you mean 'draft_len'?" <<<"$out" || fail "validate message: $out"
"$bin" profile validate "$base/good.toml" 9754 >/dev/null || fail "validate good"
"$bin" profile validate "$base/mask.toml" >/dev/null || fail "mask without a host is fine"
"$bin" --sysroot "$base/g" profile validate "$base/mask.toml" 2>/dev/null && fail "mask vs cbm_mask"
echo "cli ok"
