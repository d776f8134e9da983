#!/usr/bin/env bash
# CI stage for the Ansible role, run after the package test has installed the
# epyctune .deb: ansible-lint (production profile), then the role's life on a
# fixture sysroot (check, apply, idempotence, absent) driven by the INSTALLED
# /usr/bin/epyctune, not the build tree. With EPYCTUNE_DEB=path/to/epyctune.deb
# the role's own install task is run as well (apt, from that file).
#   .ci/ansible.sh            (from the repository root, as root)
set -euo pipefail
cd "$(dirname "$0")/.."
roles=$PWD/packaging/ansible/roles

echo "== ansible-lint (production profile)"
(cd packaging/ansible && ansible-lint --profile production roles/epyctune)

bin=/usr/bin/epyctune
if ! dpkg-query -W -f='${Status}\n' epyctune 2>/dev/null | grep -q 'install ok installed'; then
  echo ".ci/ansible.sh: the epyctune package is not installed; run the package test first" >&2
  exit 1
fi

echo "== ansible role on a fixture, with the installed epyctune"
tests/ansible/run_role.sh "$bin" "$roles"

if [ -n "${EPYCTUNE_DEB:-}" ]; then
  echo "== ansible role: install task from $EPYCTUNE_DEB"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$bin" fixture create --machine 9754 "$tmp/root" >/dev/null
  cat >"$tmp/play.yml" <<PLAY
---
- name: Install epyctune from the .deb and apply on a fixture
  hosts: all
  gather_facts: false
  vars:
    epyctune_install: true
    epyctune_deb: "$(readlink -f "$EPYCTUNE_DEB")"
    epyctune_manage_units: false
    epyctune_sysroot: "$tmp/root"
  roles:
    - role: epyctune
PLAY
  ANSIBLE_ROLES_PATH=$roles ANSIBLE_NOCOLOR=1 ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3 \
    ansible-playbook -i localhost, -c local "$tmp/play.yml"
fi
echo "== ansible: passed"
