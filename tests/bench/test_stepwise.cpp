// The interleaved step runner against a scripted driver.
#include <doctest/doctest.h>

#include <map>
#include <stdexcept>

#include "bench/report.hpp"
#include "bench/stepwise.hpp"

using namespace epyctune::bench;

namespace {

struct FakeDriver : StepDriver {
  std::vector<std::string> log;
  std::map<std::string, double> speed{{"stock", 10}, {"bios", 10}, {"numa", 13}, {"spec", 20}};
  std::map<std::string, StepOutcome> status{{"isolation", {RowState::needs_reboot, "not measured"}},
                                            {"cat", {RowState::skipped, "no resctrl"}}};
  int applied = 0, measured = 0, interrupt_after = -1, throw_after = -1;
  std::string state = "stock";
  void to_stock() override {
    log.push_back("stock");
    state = "stock";
  }
  StepOutcome apply_step(const StepRef& s) override {
    log.push_back("apply " + s.name);
    state = s.name;
    ++applied;
    return status.count(s.name) ? status[s.name] : StepOutcome{};
  }
  Sample measure(const StepRef& s) override {
    log.push_back("measure " + s.name);
    if (throw_after >= 0 && measured >= throw_after) throw std::runtime_error("engine crashed");
    ++measured;
    Sample x;
    const double v = speed.count(s.name) ? speed[s.name] : 10;
    x.tok_s = v + 0.01 * measured;
    x.block_tok_s = {v - 0.1, v, v + 0.1, v + 0.05};
    x.bytes_per_token = 1e9;
    return x;
  }
  double bandwidth_gbps(const StepRef&) override { return 50; }
  bool interrupted() const override { return interrupt_after >= 0 && measured >= interrupt_after; }
};

std::vector<StepRef> steps() {
  return {{1, "bios", ""}, {2, "numa", ""}, {3, "isolation", ""}, {4, "cat", ""}, {8, "spec", ""}};
}

}  // namespace

TEST_CASE("rounds are interleaved, stock first, and the host ends at stock") {
  FakeDriver d;
  auto r = run_stepwise(d, {steps(), 2, {}});
  CHECK(r.rounds == 2);
  std::vector<std::string> round{"stock",      "measure stock", "apply bios",      "measure bios",
                                 "apply numa", "measure numa",  "apply isolation", "apply cat",
                                 "apply spec", "measure spec"};
  std::vector<std::string> want = round;
  want.insert(want.end(), round.begin(), round.end());
  want.push_back("stock");
  CHECK(d.log == want);
  CHECK(d.state == "stock");
}

TEST_CASE("rows: status, deltas, verdicts and roofline") {
  FakeDriver d;
  auto r = run_stepwise(d, {steps(), 3, {}});
  REQUIRE(r.rows.size() == 6);
  CHECK(r.rows[3].status() == "needs reboot: not measured");
  CHECK(r.rows[3].state == RowState::needs_reboot);
  CHECK(!r.rows[3].measured());
  CHECK(r.rows[4].status() == "skipped: no resctrl");
  const auto& numa = r.rows[2];
  CHECK(numa.measured());
  CHECK(numa.delta_prev == doctest::Approx(0.3).epsilon(0.01));
  CHECK(numa.vs_prev->verdict == Verdict::significant);
  CHECK(r.rows[1].vs_prev->verdict == Verdict::within_noise);
  const auto& spec = r.rows[5];
  CHECK(spec.prev == 2);  // the previous measured row, past the unmeasured ones
  CHECK(spec.delta_stock == doctest::Approx(1.0).epsilon(0.01));
  CHECK(spec.roofline_tok_s == doctest::Approx(50));
  auto text = to_text(r, {});
  CHECK(text.find("needs reboot: not measured") != std::string::npos);
  auto j = to_json(r, {});
  CHECK(j["rows"][2]["vs_previous"]["verdict"] == "significant");
  CHECK(j["rows"][0]["expected_tok_s"] == "none stated");
  auto svg = to_svg(r, {});
  CHECK(svg.find("<svg") == 0);
  CHECK(svg.find(">no resctrl<") != std::string::npos);  // the status, under its "skipped:"
}

TEST_CASE("an interrupt stops at the next boundary and returns to stock") {
  FakeDriver d;
  d.interrupt_after = 3;
  auto r = run_stepwise(d, {steps(), 3, {}});
  CHECK(r.interrupted);
  CHECK(d.log.back() == "stock");
  CHECK(d.measured == 3);
}

TEST_CASE("an engine failure propagates after the host is back at stock") {
  FakeDriver d;
  d.throw_after = 2;
  CHECK_THROWS_AS(run_stepwise(d, {steps(), 3, {}}), std::runtime_error);
  CHECK(d.log.back() == "stock");
}
