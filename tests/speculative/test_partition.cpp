#include <doctest/doctest.h>

#include <fstream>

#include "common/field_error.hpp"
#include "engine/runtime/cpus.hpp"
#include "engine/speculative/partition.hpp"
#include "test_util.hpp"

using namespace epyctune::engine::speculative;

namespace {
PartitionRequest input(ModeRequest r, std::vector<int> cpus, std::vector<int> l3) {
  PartitionRequest in;
  in.request = r;
  in.has_draft_model = true;
  in.cpus = std::move(cpus);
  in.l3_ids = std::move(l3);
  return in;
}
}  // namespace

TEST_CASE("auto partitions by L3 domain, by CPU on one domain, and time-shares one CPU") {
  auto one = pick_partition(input(ModeRequest::automatic, {0, 1}, {0, 0}));
  CHECK(one.partitioned());
  CHECK(one.draft.cpus == std::vector<int>{1});
  CHECK(one.verify.cpus == std::vector<int>{0});
  auto single = pick_partition(input(ModeRequest::automatic, {5}, {0}));
  CHECK(single.partitioned() == false);
  CHECK(single.verify.cpus == std::vector<int>{5});
  auto two = pick_partition(
      input(ModeRequest::automatic, {0, 1, 2, 3, 4, 5, 6, 7}, {0, 0, 0, 0, 1, 1, 1, 1}));
  CHECK(two.partitioned());
  CHECK(two.draft.cpus == std::vector<int>{4, 5, 6, 7});
  CHECK(two.verify.cpus == std::vector<int>{0, 1, 2, 3});
  CHECK(two.reason.find("2 L3 domains") != std::string::npos);
}

TEST_CASE("explicit partitions and their errors") {
  auto in = input(ModeRequest::partitioned, {0, 1}, {0, 0});
  auto p = pick_partition(in);
  CHECK(p.partitioned());
  CHECK(p.draft.cpus == std::vector<int>{1});
  CHECK(p.verify.cpus == std::vector<int>{0});
  in.draft_cpus = std::vector<int>{0};
  p = pick_partition(in);
  CHECK(p.verify.cpus == std::vector<int>{1});
  in.verify_cpus = std::vector<int>{0};
  CHECK_THROWS_WITH_AS(pick_partition(in), doctest::Contains("overlap"), std::invalid_argument);
  auto one_cpu = input(ModeRequest::partitioned, {3}, {0});
  CHECK_THROWS_WITH_AS(pick_partition(one_cpu), doctest::Contains("at least 2"),
                       std::invalid_argument);
  auto shared = input(ModeRequest::shared, {0, 1}, {0, 0});
  shared.draft_cpus = std::vector<int>{1};
  CHECK_THROWS_AS(pick_partition(shared), std::invalid_argument);
  // auto with explicit lists means partitioned even on one L3.
  auto a = input(ModeRequest::automatic, {0, 1}, {0, 0});
  a.draft_cpus = std::vector<int>{0};
  a.verify_cpus = std::vector<int>{1};
  CHECK(pick_partition(a).partitioned());
}

TEST_CASE("without a draft model the target runs alone") {
  auto in = input(ModeRequest::partitioned, {0, 1}, {0, 1});
  in.has_draft_model = false;
  CHECK(pick_partition(in).partitioned() == false);
}

TEST_CASE("errors name the field, never a flag") {
  auto in = input(ModeRequest::partitioned, {0, 1}, {0, 0});
  in.draft_cpus = std::vector<int>{0};
  in.verify_cpus = std::vector<int>{0};
  try {
    pick_partition(in);
    FAIL("overlapping partitions were accepted");
  } catch (const epyctune::common::FieldError& e) {
    CHECK(e.field() == "draft_cpus");
    CHECK(std::string(e.what()).find("--") == std::string::npos);
  }
}

TEST_CASE("each side is a launch plan side with its role and L3 domains") {
  auto p = pick_partition(input(ModeRequest::automatic, {0, 1, 2, 3}, {0, 0, 1, 1}));
  CHECK(p.has_spec);
  CHECK(p.draft.role == epyctune::launch::Role::draft);
  CHECK(p.verify.role == epyctune::launch::Role::verify);
  CHECK(p.draft.l3 == std::vector<int>{1});
  CHECK(p.verify.l3 == std::vector<int>{0});
  auto shared = pick_partition(input(ModeRequest::shared, {0, 1, 2, 3}, {0, 0, 1, 1}));
  CHECK(shared.draft.cpus.empty());
  CHECK(shared.verify.l3 == std::vector<int>{0, 1});
}

TEST_CASE("l3_ids reads the sysroot, -1 where missing") {
  epyctune::testing::TempDir dir;
  for (int c : {0, 1}) {
    const auto d =
        dir.path() / ("sys/devices/system/cpu/cpu" + std::to_string(c) + "/cache/index3");
    std::filesystem::create_directories(d);
    std::ofstream(d / "id") << (c * 7) << "\n";
  }
  CHECK(epyctune::engine::runtime::l3_ids({0, 1, 2}, dir.path()) == std::vector<int>{0, 7, -1});
}

TEST_CASE("the draft's share of the bandwidth sizes its partition") {
  // 7B Q4_0 (3.8 GB) and a 1B draft (0.7 GB) at K=4: K draft passes read
  // 2.8 GB against the target's 3.8 GB, so the draft needs 42% of the domains.
  const double s = draft_share(3800, 700, 4);
  CHECK(s == doctest::Approx(2800.0 / 6600.0));
  CHECK(draft_share(0, 700, 4) == 0.0);
  CHECK(draft_share(3800, 700, 0) == 0.0);

  // 16 CCDs of 2 CPUs each, SMT siblings numbered after the first threads.
  std::vector<int> cpus, l3;
  for (int c = 0; c < 32; ++c) {
    cpus.push_back(c);
    l3.push_back(c % 16);
  }
  auto in = input(ModeRequest::automatic, cpus, l3);
  in.draft_share = s;
  auto p = pick_partition(in);
  REQUIRE(p.partitioned());
  // round(0.424 * 16) = 7 domains, 9..15, both threads of each.
  CHECK(p.draft.cpus == std::vector<int>{9, 10, 11, 12, 13, 14, 15, 25, 26, 27, 28, 29, 30, 31});
  CHECK(p.verify.cpus.size() == 18);
  CHECK(p.reason.find("16 L3 domains, the draft gets 7") != std::string::npos);

  // A tiny share still gets one domain; a huge one leaves the target one.
  in.draft_share = 0.001;
  CHECK(pick_partition(in).draft.cpus == std::vector<int>{15, 31});
  in.draft_share = 0.999;
  CHECK(pick_partition(in).verify.cpus == std::vector<int>{0, 16});

  // One L3 domain: CPUs from the end.
  auto flat = input(ModeRequest::automatic, {0, 1, 2, 3, 4, 5, 6, 7}, {0, 0, 0, 0, 0, 0, 0, 0});
  flat.draft_share = s;
  auto f = pick_partition(flat);
  CHECK(f.draft.cpus == std::vector<int>{5, 6, 7});
  CHECK(f.reason.find("the draft gets CPUs 5-7") != std::string::npos);
  // Two CPUs: one each, whatever the share.
  auto two = input(ModeRequest::automatic, {0, 1}, {0, 0});
  two.draft_share = 0.9;
  CHECK(pick_partition(two).draft.cpus == std::vector<int>{1});
}
