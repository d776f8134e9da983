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

TEST_CASE("cpulist ids are bounded before anything is allocated") {
  // Today's code expanded this range into 2^31 ints (bad_alloc).
  CHECK_THROWS_WITH_AS(parse_cpulist("0-2147483647"), doctest::Contains("out of range"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_cpulist("0-99999"), doctest::Contains("up to 8191"),
                       std::invalid_argument);
  CHECK_THROWS_AS(parse_cpulist("8192"), std::invalid_argument);
  CHECK(parse_cpulist("0-8191").size() == 8192);
  CHECK_THROWS_WITH_AS(parse_cpulist("0-255", 128), doctest::Contains("up to 127"),
                       std::invalid_argument);
  CHECK(parse_cpulist("0-127", 128).size() == 128);
  // Overlapping ranges do not pile up duplicates.
  std::string many;
  for (int i = 0; i < 2000; ++i) many += (many.empty() ? "" : ",") + std::string("0-8191");
  CHECK(parse_cpulist(many).size() == 8192);
}

TEST_CASE("cpulist messages quote only the start of a huge list") {
  std::string huge(1 << 20, '7');
  try {
    parse_cpulist(huge);
    FAIL("accepted");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).size() < 400);
  }
}

TEST_CASE("cpumask bits are bounded too") {
  CHECK(parse_cpumask("0000000000000000000000000000000000000001") == std::vector<int>{0});
  CHECK_THROWS_AS(parse_cpumask("1" + std::string(2048, '0')), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpumask("100", 8), std::invalid_argument);
  CHECK(parse_cpumask("ff", 8).size() == 8);
}
