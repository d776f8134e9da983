// CPU sets for pools: what this process may run on, and `--cpus` / `--threads`.
#pragma once

#include <string_view>
#include <vector>

namespace epyctune::engine::runtime {

// CPUs this process may run on (sched_getaffinity), sorted.
std::vector<int> allowed_cpus();

// "0-3,8" (kernel cpulist syntax) checked against allowed_cpus(): a CPU we may
// not use throws std::invalid_argument naming it and listing the allowed ones.
std::vector<int> parse_cpus(std::string_view spec);

// --threads N: the first n allowed CPUs. n <= 0 means all of them.
std::vector<int> first_cpus(int n);

}  // namespace epyctune::engine::runtime
