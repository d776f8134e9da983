// Kernel CPU-list syntax ("0-3,8,10-11"), as used by sysfs, isolcpus and
// smp_affinity_list.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace epyctune::common {

// Sorted, de-duplicated. Throws std::invalid_argument naming the bad token.
std::vector<int> parse_cpulist(std::string_view text);
// Canonical, compressed form: {0,1,2,3,8} -> "0-3,8"; empty -> "".
std::string format_cpulist(const std::vector<int>& cpus);
// Kernel hex mask ("ff,ffffffff") <-> CPU list.
std::vector<int> parse_cpumask(std::string_view hex);
std::string format_cpumask(const std::vector<int>& cpus);

}  // namespace epyctune::common
