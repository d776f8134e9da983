// CPU sets for pools: what this process may run on, and `--cpus` / `--threads`.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace epyctune::engine::runtime {

// CPUs this process may run on (sched_getaffinity), sorted.
std::vector<int> allowed_cpus();

// "0-3,8" (kernel cpulist syntax) checked against allowed_cpus(): a CPU we may
// not use throws std::invalid_argument naming it and listing the allowed ones.
// The message names no flag: the caller knows which option held the list.
std::vector<int> parse_cpus(std::string_view spec);
// Why `cpus` cannot be a pool here (empty, or a CPU this process may not
// use), or "" when it can: parse_cpus' check, for lists parsed elsewhere.
std::string unusable_cpus(const std::vector<int>& cpus);

// --threads N: the first n allowed CPUs. n <= 0 means all of them.
std::vector<int> first_cpus(int n);

// L3 cache id of each CPU from ROOT/sys/devices/system/cpu/cpuN/cache/index3/id
// (-1 when the file is missing or garbled), for the engine's own partition.
// Read-only, so the engine needs no confined host access for it.
std::vector<int> l3_ids(const std::vector<int>& cpus, const std::filesystem::path& root = "/");

}  // namespace epyctune::engine::runtime
