// serve's --kv-budget and the daemon's `kv_budget`: one parser, so an
// instance's config is refused at load time for what serve would refuse.
#pragma once

#include <cstdint>
#include <string>

namespace epyctune::common {

// Exactly one of the two is set.
struct KvBudget {
  int64_t bytes = 0, tokens = 0;
};
// Bytes with an optional K, M, G or T (powers of 1024; "2G", "512M", "1.5GiB"),
// or positions with the suffix "tok" ("65536tok"). Throws
// std::invalid_argument naming the accepted forms; sizes are bounded (1 PiB,
// 2^31 - 1 positions) so that no conversion overflows.
KvBudget parse_kv_budget(const std::string& v);

}  // namespace epyctune::common
