// The progress line draws only when enabled, redraws in place, and erases itself.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "apps/epyctune-engine/progress.hpp"

using epyctune::engine_cli::ProgressLine;

namespace {
// Runs fn with stderr redirected to a temporary file; returns what it wrote.
template <class F>
std::string capture_stderr(F fn) {
  std::fflush(stderr);
  std::FILE* tmp = std::tmpfile();
  REQUIRE(tmp != nullptr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(tmp), STDERR_FILENO);
  fn();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string out;
  std::rewind(tmp);
  for (int c; (c = std::fgetc(tmp)) != EOF;) out += static_cast<char>(c);
  std::fclose(tmp);
  return out;
}
}  // namespace

TEST_CASE("a disabled progress line writes nothing") {
  const std::string out = capture_stderr([] {
    ProgressLine line("load", false);
    line.update("copy", 1, 2, "MiB");
    line.update("copy", 2, 2, "MiB");
  });
  CHECK(out.empty());
}

TEST_CASE("stderr redirected to a file: the default line stays silent") {
  const std::string out = capture_stderr([] {
    ProgressLine line("load");
    CHECK_FALSE(line.enabled());
    line.update("copy", 2, 2, "MiB");
  });
  CHECK(out.empty());
}

TEST_CASE("an enabled line redraws in place, always draws completion, and erases itself") {
  const std::string out = capture_stderr([] {
    ProgressLine line("load", true);
    line.update("copy", 0, 4, "MiB");
    line.update("copy", 1, 4, "MiB");  // within 100 ms of the last draw: skipped
    line.update("copy", 4, 4, "MiB");  // completion: always drawn
  });
  CHECK(out.find("\r[load] copy   0% (0/4 MiB)") == 0);
  CHECK(out.find("(1/4 MiB)") == std::string::npos);
  CHECK(out.find("\r[load] copy 100% (4/4 MiB)") != std::string::npos);
  CHECK(out.ends_with("\r\x1b[K"));
  CHECK(out.find('\n') == std::string::npos);
}
