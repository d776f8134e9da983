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
  libspdlog-dev libfmt-dev doctest-dev nlohmann-json3-dev libsystemd-dev zlib1g-dev
  libcpp-httplib-dev libboost-dev clang libclang-rt-14-dev python3 bsdutils systemd
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
  # A developer's rebuilds (and a fresh clone's) reuse compiled objects when
  # ccache is installed; nothing requires it.
  if command -v ccache >/dev/null; then
    args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S . -B "$dir" "${args[@]}" >/dev/null
  cmake --build "$dir" -j "$(nproc)"
}

main_job() {
  local dir=${BUILD_DIR:-build}
  echo "== epyctune detect (this host, read-only)"
  "$dir/apps/epyctune/epyctune" detect
  echo "== epyctune plan --profile 9754 --force (read-only)"
  "$dir/apps/epyctune/epyctune" plan --profile 9754 --force
  # The engine on a generated model (models are never committed): a 1B-shape
  # Q4_0 llama from the dev tool epyctune-mkmodel (built here, never packaged),
  # a greedy generation, and the decode/verify bench with its roofline.
  local model="$dir/models/demo-1b-q4_0.gguf"
  mkdir -p "$dir/models"
  [[ -s $model ]] || "$dir/tools/epyctune-mkmodel/epyctune-mkmodel" mkmodel "$model" --shape 1b --quant q4_0 --seed 1
  echo "== epyctune-engine generate (greedy, prompt lookup drafts)"
  "$dir/apps/epyctune-engine/epyctune-engine" generate --model "$model" --prompt "The quick brown fox" -n 32 --lookup 2
  echo "== epyctune-engine bench (decode and K=8 verify vs the memory roofline)"
  "$dir/apps/epyctune-engine/epyctune-engine" bench --model "$model" --batch 1,8 --passes 2 -r 3
}

install_deps
[[ ${1:-} == --deps ]] && exit 0
build
main_job
