// The engine's default path with a useless draft: auto settles the mode from
// costs it measures on the first run (nothing cached), and once the adaptive
// controller stops drafting, the target decodes on every CPU of both sides
// while the drafting thread pauses.
#include <doctest/doctest.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/runtime/cpus.hpp"
#include "engine/serving/engine.hpp"
#include "engine/synth/mkmodel.hpp"
#include "test_util.hpp"

using namespace epyctune::engine;

namespace {

struct CacheDir {
  epyctune::testing::TempDir dir;
  std::string saved;
  bool had = false;
  CacheDir() {
    if (const char* x = std::getenv("XDG_CACHE_HOME")) had = true, saved = x;
    ::setenv("XDG_CACHE_HOME", dir.str().c_str(), 1);
  }
  ~CacheDir() {
    if (had)
      ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
    else
      ::unsetenv("XDG_CACHE_HOME");
  }
  size_t files() const {
    const auto d = dir.path() / "epyctune";
    if (!std::filesystem::exists(d)) return 0;
    return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(d), {}));
  }
};

// The engine pins the thread that drives it (worker 0 of its pools): each
// test gives this thread its CPUs back for the next engine to plan with.
struct KeepAffinity {
  cpu_set_t set;
  KeepAffinity() {
    CPU_ZERO(&set);
    ::sched_getaffinity(0, sizeof set, &set);
  }
  ~KeepAffinity() { ::sched_setaffinity(0, sizeof set, &set); }
};

struct Pair {
  epyctune::testing::TempDir dir;
  std::filesystem::path target = dir.path() / "target.gguf", draft = dir.path() / "draft.gguf";
  Pair() {
    ModelShape shape = parse_shape("tiny");
    shape.ctx = 256;
    write_model(target, shape, GgmlType::Q8_0, 11);
    // Same shape and vocabulary, other weights: it agrees with the target
    // on next to nothing.
    write_model(draft, shape, GgmlType::Q8_0, 977);
  }
};
const Pair& pair() {
  static Pair p;
  return p;
}

serving::EngineConfig config(speculative::ModeRequest mode) {
  serving::EngineConfig c;
  c.model = pair().target.string();
  c.draft = pair().draft.string();
  c.cpus = runtime::first_cpus(2);
  c.spec_mode = mode;
  return c;
}

serving::Completion greedy(serving::Engine& e, int n, const serving::TokenSink& sink = {}) {
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 7};
  return e.generate(prompt, n, sampling::SamplerParams{}, sink, true);
}

// The target alone: what every speculative run must give.
std::vector<int32_t> plain_tokens(int n) {
  auto c = config(speculative::ModeRequest::shared);
  c.draft_max = 0;
  serving::Engine plain(c);
  plain.load();
  return greedy(plain, n).tokens;
}

}  // namespace

TEST_CASE("auto measures both layouts on the first run, briefly, and caches them") {
  if (runtime::allowed_cpus().size() < 2) {
    MESSAGE("one CPU here: nothing to partition");
    return;
  }
  KeepAffinity keep;
  CacheDir cache;
  REQUIRE(cache.files() == 0);
  serving::Engine e(config(speculative::ModeRequest::automatic));
  REQUIRE(e.partitioned());  // the plan before any cost is known
  e.load();
  // The partition stays: each run moves between the layouts (test_layout_choice).
  CHECK(e.partitioned());
  CHECK(e.plan().reason.find("auto from measured costs") != std::string::npos);
  CHECK(e.plan().reason.find("no measured figures") == std::string::npos);
  // Target and draft, on the sides and on every CPU: four probes, cached.
  CHECK(cache.files() == 4);
  // The target's probe: a pass of one token and one of a few, not the
  // whole curve of 1 to K+1 a benchmark sweeps.
  const auto& t = e.cost_model().target;
  REQUIRE(t.n.size() == 2);
  CHECK(t.n.front() == 1);
  CHECK(t.n.back() == speculative::probe_largest(e.config().draft_max + 1));
  const std::string reason = e.plan().reason;

  ::sched_setaffinity(0, sizeof keep.set, &keep.set);
  serving::Engine again(config(speculative::ModeRequest::automatic));
  again.load();
  CHECK(cache.files() == 4);
  CHECK(again.cost_note().find("measuring") == std::string::npos);
  CHECK(again.plan().reason == reason);
  ::sched_setaffinity(0, sizeof keep.set, &keep.set);

  // Whichever layout each run picks, the output is the target's own, and
  // the models end on their own sides.
  const auto want = plain_tokens(64);
  ::sched_setaffinity(0, sizeof keep.set, &keep.set);
  const auto own = again.target().pool().cpus();
  CHECK(greedy(again, 64).tokens == want);
  CHECK(again.target().pool().cpus() == own);
}

TEST_CASE("a useless draft hands its CPUs to the target, and the output stays the target's") {
  if (runtime::allowed_cpus().size() < 2) {
    MESSAGE("one CPU here: nothing to partition");
    return;
  }
  KeepAffinity keep;
  CacheDir cache;
  const auto want = plain_tokens(96);
  ::sched_setaffinity(0, sizeof keep.set, &keep.set);

  serving::Engine e(config(speculative::ModeRequest::partitioned));
  e.load();
  REQUIRE(e.partitioned());
  const auto own = e.target().pool().cpus();
  const auto draft_own = e.draft()->pool().cpus();
  REQUIRE(own.size() == 1);
  size_t on_every = 0, tokens = 0;
  const auto got = greedy(e, 96, [&](int32_t, const std::string&) {
    ++tokens;
    if (e.target().pool().cpus().size() == 2) {
      ++on_every;
      CHECK(e.draft()->pool().cpus().size() == 2);
    }
    return true;
  });
  CHECK(got.tokens == want);
  const auto& st = got.stats;
  const auto plain_rounds = std::count(st.k_trace.begin(), st.k_trace.end(), int16_t{0});
  CHECK(plain_rounds > 0);
  // Every plain round the controller chose ran on both sides' CPUs (so did
  // the probes after them); the last token's round may be plain only
  // because one token was left, and stays where it is.
  CHECK(st.every_cpu_passes + 1 >= plain_rounds);
  CHECK(on_every > 0);
  CHECK(on_every < tokens);  // the first rounds drafted on the sides
  // Each model is back on its own side for the next request.
  CHECK(e.target().pool().cpus() == own);
  CHECK(e.draft()->pool().cpus() == draft_own);
  // A second request behaves the same way from the same state.
  CHECK(greedy(e, 96).tokens == want);
}
