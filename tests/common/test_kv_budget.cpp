#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "common/kv_budget.hpp"

using epyctune::common::parse_kv_budget;

TEST_CASE("a KV budget is bytes in powers of 1024 or positions, bounded") {
  CHECK(parse_kv_budget("2G").bytes == 2LL << 30);
  CHECK(parse_kv_budget("2GiB").bytes == 2LL << 30);
  CHECK(parse_kv_budget("2gb").bytes == 2LL << 30);
  CHECK(parse_kv_budget("1.5M").bytes == 3LL << 19);
  CHECK(parse_kv_budget("4096").bytes == 4096);
}

TEST_CASE("a KV budget in positions, and what is refused") {
  const auto t = parse_kv_budget("65536tok");
  CHECK(t.tokens == 65536);
  CHECK(t.bytes == 0);
  CHECK(parse_kv_budget("1024T").bytes == 1LL << 50);  // 1 PiB: the largest
  for (const std::string bad :
       {"", "G", "0", "-1G", "0tok", "2X", "1025T", "1e30G", "inf", "nan", "3e9tok", "0.5", "1P"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_kv_budget(bad),
                         doctest::Contains(("65536tok; got '" + bad + "'").c_str()),
                         std::invalid_argument);
  }
}
