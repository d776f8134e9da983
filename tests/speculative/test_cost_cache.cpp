// The pass-time cache: a valid file is used, anything malformed or for
// another key is ignored and measured again, never trusted.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "engine/speculative/cost_model.hpp"
#include "engine/speculative/mode_choice.hpp"
#include "speculative/toy_lm.hpp"
#include "test_util.hpp"

using namespace epyctune::engine::speculative;
using epyctune::testing::TempDir;
using epyctune::testing::write_file;

TEST_CASE("cost cache: round trip, and malformed files are rejected") {
  TempDir d;
  const auto file = d.path() / "c.json";
  PassTimes t;
  t.n = {1, 2, 5};
  t.s = {0.1, 0.12, 0.2};
  write_cost_cache(file, "K", t);
  auto back = read_cost_cache(file, "K");
  REQUIRE(back);
  CHECK(back->n == t.n);
  CHECK(back->s == t.s);
  CHECK(back->at(3) == doctest::Approx(0.12 + 0.08 / 3));

  std::string why;
  CHECK_FALSE(read_cost_cache(file, "other", &why));
  CHECK(why.find("another model") != std::string::npos);
  const std::string bad[] = {
      "{not json",
      R"({"version":1,"key":"K","n":[1,2],"s":[0.1]})",
      R"({"version":1,"key":"K","n":[1,2],"s":[0.1,-1]})",
      R"({"version":1,"key":"K","n":[2,1],"s":[0.1,0.2]})",
      R"({"version":1,"key":"K","n":[2,3],"s":[0.1,0.2]})",
      R"({"version":1,"key":"K","n":[1],"s":["x"]})",
      R"({"version":2,"key":"K","n":[1],"s":[0.1]})",
      R"([1,2,3])",
  };
  for (const auto& b : bad) {
    CAPTURE(b);
    write_file(file, b);
    why.clear();
    CHECK_FALSE(read_cost_cache(file, "K", &why));
    CHECK(why.find(file.string()) == 0);
  }
}

namespace {

// Sets (or, for nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (saved_)
      ::setenv(name_, saved_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

}  // namespace

// Under epyctuned.service ProtectHome=yes hides $HOME, so the engine used to
// find no writable cache (XDG_CACHE_HOME unset, ~/.cache hidden) and measure
// on every start: systemd's CacheDirectory= comes first now.
TEST_CASE("cost cache: $CACHE_DIRECTORY, then $XDG_CACHE_HOME/epyctune, then ~/.cache/epyctune") {
  ScopedEnv home("HOME", "/home/u");
  {
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv cache("CACHE_DIRECTORY", nullptr);
    CHECK(cost_cache_dir() == "/home/u/.cache/epyctune");
  }
  ScopedEnv xdg("XDG_CACHE_HOME", "/x");
  {
    ScopedEnv cache("CACHE_DIRECTORY", nullptr);
    CHECK(cost_cache_dir() == "/x/epyctune");
  }
  {
    ScopedEnv cache("CACHE_DIRECTORY", "/var/cache/epyctune");
    CHECK(cost_cache_dir() == "/var/cache/epyctune");
  }
  {
    // A unit naming several cache directories: systemd lists them all.
    ScopedEnv cache("CACHE_DIRECTORY", "/var/cache/epyctune:/var/cache/other");
    CHECK(cost_cache_dir() == "/var/cache/epyctune");
  }
  {
    ScopedEnv cache("CACHE_DIRECTORY", "");
    CHECK(cost_cache_dir() == "/x/epyctune");
  }
}

TEST_CASE("cost cache: a malformed file is measured again and replaced") {
  TempDir d;
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CACHE_HOME", d.str().c_str(), 1);
  const auto file = cost_cache_file(cost_cache_dir(), "toy");
  CHECK(file.parent_path() == d.path() / "epyctune");
  write_file(file, R"({"version":1,"key":"toy","n":[1],"s":[0]})");
  epyctune::testing::ToyLM m(16, 128);
  std::string note;
  const PassTimes t = cached_pass_times(m, "toy", 5, true, &note);
  CHECK(note.find("positive") != std::string::npos);
  CHECK(t.n.front() == 1);
  CHECK(t.n.back() == 5);
  CHECK(m.pos() == 0);
  const auto again = read_cost_cache(file, "toy");
  REQUIRE(again);
  CHECK(again->n == t.n);
  note.clear();
  const auto passes = m.passes;
  cached_pass_times(m, "toy", 5, true, &note);
  CHECK(m.passes == passes);  // served from the cache
  CHECK(note.find("from") != std::string::npos);
  cached_pass_times(m, "toy", 5, false, &note);
  CHECK(m.passes > passes);  // bypassed
  if (old)
    ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else
    ::unsetenv("XDG_CACHE_HOME");
}

TEST_CASE("auto mode: shared or partitioned from both layouts' measured costs") {
  auto model = [](PassTimes target, double draft_s, bool overlap, double handback = 0) {
    CostModel c;
    c.target = std::move(target);
    c.draft_s = draft_s;
    c.overlap = overlap;
    c.measured = true;
    c.handback_plain_s = handback;
    return c;
  };
  const CostModel shared = model({{1, 17}, {1.0, 2.0}}, 0.1, false);
  // The target on one CPU is much slower: time-sharing both CPUs wins.
  auto d = choose_mode({shared, model({{1, 17}, {1.6, 3.6}}, 0.2, true, 1.0)}, 16);
  CHECK_FALSE(d.partitioned);
  CHECK(d.shared_rate > d.partitioned_rate);
  CHECK(d.reason.find("measured costs") != std::string::npos);
  // Bandwidth-bound: one CPU verifies as fast, and drafting overlaps.
  d = choose_mode({shared, model({{1, 17}, {1.0, 2.0}}, 0.2, true, 1.0)}, 16);
  CHECK(d.partitioned);
  // A hopeless draft: both decode plain, and the hand-back makes plain
  // decoding in a partitioned run as fast as in a shared one.
  d = choose_mode({shared, model({{1, 17}, {1.6, 3.6}}, 0.2, true, 1.0)}, 16, 0.0);
  CHECK(d.shared_rate == doctest::Approx(1.0));
  CHECK(d.partitioned_rate == doctest::Approx(1.0));
}
