#!/bin/bash
# The Ansible role against this machine (localhost, connection local) with a
# fixture sysroot: nothing outside the fixture and a temporary directory is
# read for writing, no package is installed and no unit enabled.
#   run_role.sh EPYCTUNE_BIN ROLES_DIR
# 1. --check on a fresh fixture changes no knob file and writes no config;
# 2. the first run reports changed, 3. the second reports changed=0;
# 4. absent reverts (the knob files are as before 2.) and removes the config;
# 5. absent again reports changed=0.
set -u
bin=$1 roles=$2

if ! command -v ansible-playbook >/dev/null; then
  echo "SKIP: ansible-playbook is not installed (Debian package: ansible)"
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
"$bin" fixture create --machine 9754 "$root" >/dev/null || { echo "FAIL: fixture create"; exit 1; }

export ANSIBLE_ROLES_PATH=$roles ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 \
  ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_LOCAL_TEMP=$tmp/ansible-local \
  ANSIBLE_REMOTE_TEMP=$tmp/ansible-remote ANSIBLE_HOME=$tmp/ansible-home \
  ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3 ANSIBLE_DEPRECATION_WARNINGS=0

cat >"$tmp/play.yml" <<PLAY
---
- name: Tune a fixture host with the epyctune role
  hosts: all
  gather_facts: false
  vars:
    epyctune_install: false
    epyctune_manage_units: false
    epyctune_service: ""
    epyctune_bin: "$bin"
    epyctune_sysroot: "$root"
    epyctune_profile: "9754"
    epyctune_drift_repair: true
    epyctune_instances:
      - name: main
        model: '/srv/models/a "b"\c.gguf'
        port: 8081
        map_cpus_unused: false
  roles:
    - role: epyctune
  post_tasks:
    - name: Show the reboot fact
      ansible.builtin.debug:
        msg: "reboot_required={{ epyctune_reboot_required | default('unset') }}"
PLAY

fail=0
# play LOG [ARGS...]: runs the playbook, keeps its output in LOG, prints the
# recap's changed count (or "error").
play() {
  local log=$1
  shift
  if ! ansible-playbook -i localhost, -c local "$tmp/play.yml" "$@" >"$log" 2>&1; then
    echo error
    return
  fi
  sed -n 's/^localhost *:.* changed=\([0-9]*\) .*/\1/p' "$log"
}
expect() {  # expect WHAT GOT CONDITION
  if eval "$3"; then
    echo "ok: $1 (changed=$2)"
  else
    echo "FAIL: $1: changed=$2"
    fail=1
  fi
}

# The knob files the plan names (MSRs excluded: the fixture's MSR files are
# sparse and huge), hashed: small files only.
"$bin" --sysroot "$root" plan --profile 9754 --json >"$tmp/plan.json" || { echo "FAIL: plan"; exit 1; }
knob_digest() {
  python3 - "$root" "$tmp/plan.json" <<'PY'
import hashlib, json, os, sys
root, plan = sys.argv[1], json.load(open(sys.argv[2]))
paths = sorted({k["path"] for s in plan["steps"] for k in s["knobs"]
                if k.get("kind") != "msr" and k.get("path", "").startswith("/")})
for p in paths:
    f = root + p
    if os.path.isfile(f) and os.path.getsize(f) < (1 << 20):
        print(hashlib.sha256(open(f, "rb").read()).hexdigest(), p)
    elif os.path.isdir(f):
        print("dir", p)
    else:
        print("absent" if not os.path.lexists(f) else "large", p)
PY
}
knob_digest >"$tmp/knobs.before"
knobs=$(grep -c '^[0-9a-f]' "$tmp/knobs.before")
if [ "$knobs" -lt 20 ]; then
  echo "FAIL: the plan names only $knobs knob files"
  fail=1
fi

c=$(play "$tmp/check.log" --check)
expect "--check on a fresh fixture runs" "$c" '[ "$c" != error ]'
knob_digest >"$tmp/knobs.check"
if ! cmp -s "$tmp/knobs.before" "$tmp/knobs.check"; then
  echo "FAIL: --check changed knob files:"
  diff "$tmp/knobs.before" "$tmp/knobs.check" | head
  fail=1
fi
if [ -e "$root/etc/epyctune/epyctune.toml" ] || [ -e "$root/etc/default/epyctune" ]; then
  echo "FAIL: --check wrote the configuration"
  fail=1
fi
if [ -s "$root/var/lib/epyctune/journal" ]; then
  echo "FAIL: --check wrote the journal"
  fail=1
fi

c=$(play "$tmp/first.log")
expect "first run" "$c" '[ "$c" != error ] && [ "$c" -gt 0 ]'
grep -q 'reboot_required=True' "$tmp/first.log" || { echo "FAIL: no reboot_required fact"; fail=1; }
grep -q 'WARNING: epyctune wrote boot parameters' "$tmp/first.log" || {
  echo "FAIL: the reboot handler did not warn"
  fail=1
}
# The templated config is TOML with the role's values, strings escaped.
python3 - "$root/etc/epyctune/epyctune.toml" <<'PY' || fail=1
import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
want = {"profile": "9754", "steps": "", "force": False, "revert_on_shutdown": False}
bad = {k: c.get(k) for k, v in want.items() if c.get(k) != v}
if c["drift"]["repair"] is not True or c["drift"]["interval_s"] != 300:
    bad["drift"] = c["drift"]
inst = c.get("instance", [{}])[0]
if inst != {"name": "main", "model": '/srv/models/a "b"\\c.gguf', "port": 8081,
            "map_cpus_unused": False}:
    bad["instance"] = inst
if bad:
    print("FAIL: the templated config:", bad)
    sys.exit(1)
PY
"$bin" --sysroot "$root" verify --profile 9754 --ignore-missing >/dev/null || {
  echo "FAIL: verify after the first run"
  fail=1
}

c=$(play "$tmp/second.log")
expect "second run" "$c" '[ "$c" = 0 ]'

c=$(play "$tmp/absent.log" -e epyctune_state=absent)
expect "absent" "$c" '[ "$c" != error ] && [ "$c" -gt 0 ]'
knob_digest >"$tmp/knobs.after"
if ! cmp -s "$tmp/knobs.before" "$tmp/knobs.after"; then
  echo "FAIL: absent did not restore the knob files:"
  diff "$tmp/knobs.before" "$tmp/knobs.after" | head
  fail=1
fi
if [ -e "$root/etc/epyctune" ] || [ -e "$root/etc/default/epyctune" ]; then
  echo "FAIL: absent left the configuration"
  fail=1
fi

c=$(play "$tmp/absent2.log" -e epyctune_state=absent)
expect "absent again" "$c" '[ "$c" = 0 ]'

if [ "$fail" -ne 0 ]; then
  for log in check first second absent absent2; do
    echo "----- $log.log"
    tail -40 "$tmp/$log.log"
  done
  exit 1
fi
echo "ansible role: check, apply, idempotence and absent on the 9754 fixture passed"
