// The shipped binaries carry no test hook: the hooks that crash a run or fake
// the system's state live only in the tests' build of the CLI. A getenv of a
// hook's variable needs its name in the binary, so none may hold the prefix.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>

namespace {

std::string read_bytes(const char* path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in, "cannot read ", path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool holds(const char* path, const std::string& needle) {
  return read_bytes(path).find(needle) != std::string::npos;
}

const std::string kPrefix = "EPYCTUNE_TEST_";

}  // namespace

TEST_CASE("the shipped binaries hold no EPYCTUNE_TEST_ variable") {
  for (const char* bin : {EPYCTUNE_BIN, ENGINE_BIN, EPYCTUNED_BIN}) {
    const std::string path = bin;
    CAPTURE(path);
    CHECK_FALSE(holds(bin, kPrefix));
  }
}

TEST_CASE("the search finds the hooks where they are: the tests' build of the CLI") {
  CHECK(holds(EPYCTUNE_HOOKED_BIN, kPrefix + "CRASH_AFTER_WRITES"));
  CHECK(holds(EPYCTUNE_HOOKED_BIN, kPrefix + "SYSTEM_STATE"));
  CHECK(holds(EPYCTUNE_HOOKED_BIN, kPrefix + "UNPRIVILEGED"));
}
