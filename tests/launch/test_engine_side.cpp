// What the engine does with a plan: CPU mapping, resctrl join, read-back.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/runtime/cpus.hpp"
#include "engine/runtime/thread_pool.hpp"
#include "launch/engine_side.hpp"
#include "test_util.hpp"

using namespace epyctune;

namespace {
launch::LaunchPlan plan(std::vector<int> draft, std::vector<int> verify) {
  launch::LaunchPlan p;
  p.has_spec = true;
  p.draft.cpus = std::move(draft);
  p.verify.cpus = std::move(verify);
  p.draft.group = "epyctune-draft";
  p.verify.group = "epyctune-verify";
  return p;
}
}  // namespace

TEST_CASE("place_on keeps the plan's CPUs when they are all allowed") {
  auto a = launch::place_on(plan({2, 3}, {4, 5, 6}), {0, 1, 2, 3, 4, 5, 6, 7}, false);
  CHECK(a.draft.cpus == std::vector<int>{2, 3});
  CHECK(a.verify.cpus == std::vector<int>{4, 5, 6});
  CHECK(a.reason.empty());
  CHECK(a.draft.group == "epyctune-draft");
  CHECK(a.partitioned());
  auto p = plan({2, 3}, {4, 5, 6});
  p.verify.threads = 2;
  CHECK(launch::place_on(p, {0, 1, 2, 3, 4, 5, 6}, false).verify.cpus == std::vector<int>{4, 5});
}

TEST_CASE("place_on refuses missing CPUs unless asked to map, and then says so") {
  std::vector<int> draft, verify;
  for (int c = 2; c < 16; ++c) draft.push_back(c);
  for (int c = 16; c < 128; ++c) verify.push_back(c);
  auto p = plan(draft, verify);
  CHECK_THROWS_WITH_AS(launch::place_on(p, {0, 1}, false), doctest::Contains("pass --map-cpus"),
                       launch::LaunchConfigError);
  auto a = launch::place_on(p, {0, 1}, true);
  CHECK(!a.reason.empty());
  CHECK(a.draft.cpus == std::vector<int>{0});
  CHECK(a.verify.cpus == std::vector<int>{1});
  CHECK(a.reason.find("mapped in order onto draft 0 + verify 1") != std::string::npos);
  auto one = launch::place_on(p, {0}, true);
  CHECK(one.draft.cpus == one.verify.cpus);
  CHECK(!one.partitioned());  // one CPU: a draft alternates with the target on it
  CHECK(one.reason.find("share") != std::string::npos);
  // Shares follow the plan's proportions.
  auto eight = launch::place_on(p, {0, 1, 2, 3, 4, 5, 6, 7}, true);
  CHECK(eight.draft.cpus.size() == 1);
  CHECK(eight.verify.cpus.size() == 7);
}

TEST_CASE("a pinned thread joins its resctrl group and reads back where it is") {
  testing::TempDir root;
  std::filesystem::create_directories(root.path() / "epyctune-draft");
  launch::PlacementLog log;
  const int cpu = engine::runtime::allowed_cpus().front();
  engine::runtime::ThreadPool pool({cpu}, true);
  pool.run([&](int) { log.record(launch::Role::draft, cpu, root.path(), "epyctune-draft"); });
  auto t = log.threads();
  REQUIRE(t.size() == 1);
  CHECK(t[0].in_group);
  CHECK(t[0].allowed == std::vector<int>{cpu});
  CHECK(log.errors().empty());
  auto tasks = launch::resctrl_tasks(root.path(), "epyctune-draft");
  CHECK(tasks == std::vector<pid_t>{t[0].tid});
}

TEST_CASE("a missing group or a thread off its CPU is an error, never silent") {
  testing::TempDir root;
  launch::PlacementLog log;
  std::thread([&] {
    log.record(launch::Role::verify, 99999, root.path(), "epyctune-verify");
  }).join();
  const auto err = log.errors();
  CHECK(err.find("cannot open to join resctrl group 'epyctune-verify'") != std::string::npos);
  CHECK(err.find("the plan pins it to 99999") != std::string::npos);
}

TEST_CASE("check_nodes flags pages outside the plan's nodes") {
  CHECK(launch::check_nodes("weights", {{0, 4096}}, {0}).empty());
  CHECK(launch::check_nodes("weights", {{0, 4096}}, {}).empty());
  CHECK(launch::check_nodes("weights", {{0, 4096}, {1, 1 << 20}}, {0}).find("node1 1.0 MiB") !=
        std::string::npos);
}
