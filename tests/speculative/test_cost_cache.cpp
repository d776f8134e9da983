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

TEST_CASE("auto mode: shared or partitioned from the cached figures") {
  TempDir d;
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CACHE_HOME", d.str().c_str(), 1);
  const auto t = d.path() / "t.gguf", dr = d.path() / "d.gguf";
  write_file(t, "target");
  write_file(dr, "draft");
  epyctune::launch::LaunchPlan part;
  part.has_spec = true;
  part.draft.cpus = {1};
  part.verify.cpus = {0};
  part.reason = "auto";
  const ModeChoiceInput in{part, t.string(), dr.string(), "avx2", 16, 0.7};
  // Nothing cached: the plan stays, and says how to get figures.
  auto p = choose_mode(in);
  CHECK(p.partitioned());
  CHECK(p.reason.find("no measured figures") != std::string::npos);

  auto put = [&](const std::filesystem::path& m, const std::string& cpus, PassTimes pt) {
    const auto key = cost_cache_key(m, cpus, "avx2");
    write_cost_cache(cost_cache_file(cost_cache_dir(), key), key, pt);
  };
  put(t, "0-1", {{1, 17}, {1.0, 2.0}});
  put(dr, "0-1", {{1}, {0.1}});
  put(dr, "1", {{1}, {0.2}});
  // The target on one CPU is much slower: time-sharing both CPUs wins.
  put(t, "0", {{1, 17}, {1.6, 3.6}});
  p = choose_mode(in);
  CHECK(!p.partitioned());
  CHECK(p.draft.cpus.empty());
  CHECK(p.verify.cpus == std::vector<int>{0, 1});
  CHECK(p.reason.find("measured costs") != std::string::npos);
  // Bandwidth-bound: one CPU verifies as fast, and drafting overlaps.
  put(t, "0", {{1, 17}, {1.0, 2.0}});
  p = choose_mode(in);
  CHECK(p.partitioned());
  if (old)
    ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else
    ::unsetenv("XDG_CACHE_HOME");
}
