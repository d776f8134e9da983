#include <doctest/doctest.h>

#include <stdexcept>

#include "common/cpulist.hpp"

using namespace epyctune::common;

TEST_CASE("cpulist round trip") {
  CHECK(parse_cpulist("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(format_cpulist({11, 0, 1, 2, 3, 8, 10}) == "0-3,8,10-11");
  CHECK(format_cpulist({}) == "");
  CHECK(parse_cpulist("").empty());
  CHECK(parse_cpulist("5,5,4") == std::vector<int>{4, 5});
}

TEST_CASE("cpulist rejects garbage with the offending token") {
  CHECK_THROWS_WITH_AS(parse_cpulist("0-3,x"), doctest::Contains("'x'"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpulist("3-1"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpulist("1,,2"), std::invalid_argument);
}

TEST_CASE("cpumask round trip") {
  CHECK(parse_cpumask("ff") == parse_cpulist("0-7"));
  CHECK(parse_cpumask("00000001,00000000") == std::vector<int>{32});
  CHECK(format_cpumask({0, 1, 2, 3}) == "0000000f");
  CHECK(format_cpumask({32}) == "00000001,00000000");
  CHECK(parse_cpumask(format_cpumask({1, 5, 40, 63})) == std::vector<int>{1, 5, 40, 63});
}
