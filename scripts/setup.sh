#!/usr/bin/env bash
# Installs every build dependency from Debian's packages, builds epyctune and
# runs its main job (detect + plan on this host, read-only). Idempotent.
#   scripts/setup.sh            install + build + run the main job
#   scripts/setup.sh --deps     install only
#   BUILD_DIR=... SANITIZE=1    build elsewhere / with ASan+UBSan
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libcli11-dev libtomlplusplus-dev libnuma-dev libhwloc-dev hwloc libcpuid-dev
  libspdlog-dev libfmt-dev doctest-dev nlohmann-json3-dev libsystemd-dev
  clang libclang-rt-14-dev
)

install_deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    echo "setup: all ${#PACKAGES[@]} packages present"
  fi
}

build() {
  local dir=${BUILD_DIR:-build}
  local args=(-G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo})
  [[ ${SANITIZE:-0} == 1 ]] && args+=(-DEPYCTUNE_SANITIZE=ON)
  cmake -S . -B "$dir" "${args[@]}" >/dev/null
  cmake --build "$dir" -j "$(nproc)"
}

main_job() {
  local dir=${BUILD_DIR:-build}
  echo "== epyctune detect (this host, read-only)"
  "$dir/epyctune" detect
  echo "== epyctune plan --profile 9754 --force (read-only)"
  "$dir/epyctune" plan --profile 9754 --force
}

install_deps
[[ ${1:-} == --deps ]] && exit 0
build
main_job
