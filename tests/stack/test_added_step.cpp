// A step added in one file, the way a file in lib/stack/steps/ adds one: its
// record (number, name, title, profile section with a check, knob builder)
// registered from this file alone. It must show up in plan, apply, verify,
// revert, `profile show` and the bench without a line changed elsewhere.
// Its own test binary, so the other suites keep the stack as shipped.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "../fixture/fixture_cache.hpp"
#include "bench/stack_driver.hpp"
#include "bench/stepwise.hpp"
#include "host/discover.hpp"
#include "profile/detect.hpp"
#include "profile/generate.hpp"
#include "profile/loader.hpp"
#include "profile/section.hpp"
#include "stack/apply.hpp"
#include "stack/checklist.hpp"
#include "stack/journal.hpp"
#include "stack/plan.hpp"
#include "stack/plan_report.hpp"
#include "stack/revert.hpp"
#include "stack/session.hpp"
#include "stack/steps.hpp"

using namespace epyctune;
namespace fs = std::filesystem;

namespace {

// ---- The step: everything a new step needs, in one place. ----

constexpr const char* kName = "chime";
// A sysfs value, where value knobs may live.
constexpr const char* kPath = "/sys/kernel/mm/epyctune_chime/mode";

// Its parameters live in Profile::extra: no field of Profile is needed.
struct ChimeParams {
  bool enabled = false;
  std::string mode = "quiet";
};

std::vector<stack::Knob> build(const stack::StepContext& ctx) {
  const auto& c = ctx.profile.extra.get<ChimeParams>(kName);
  if (!c.enabled) return {};
  return {stack::value_knob(kName, "chime mode", kPath, stack::Canon::Plain, c.mode)};
}

profile::Section section() {
  profile::Keys<ChimeParams> k;
  k.flag("enabled", &ChimeParams::enabled).choice("mode", &ChimeParams::mode, {"quiet", "loud"});
  auto check = [](const ChimeParams& c, const profile::Profile& p, profile::Checker& ch) {
    if (c.enabled && c.mode == "loud" && p.bios.smt == "keep")
      ch.error("chime.mode", "a loud chime needs SMT decided", "set bios.smt, or mode = \"quiet\"");
  };
  return profile::section_of(kName, profile::extra<ChimeParams>(kName), k, check);
}

const stack::StepRegistrar registrar({
    .number = 10,
    .name = kName,
    .title = "A chime (test-only step)",
    .section = section(),
    .build = build,
});

// ---- The tests. ----

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

struct ChimeHost {
  testing::ScratchDir dir;
  fs::path profile_file;
  ChimeHost() {
    fixture::FixtureOptions o;
    o.machine = "9754";
    o.nps = 1;
    fixture::create_fixture(dir.path(), o);
    fs::create_directories(dir.path() / fs::path(kPath).relative_path().parent_path());
    std::ofstream(dir.path() / fs::path(kPath).relative_path()) << "quiet\n";
    profile_file = dir.path().parent_path() / (dir.path().filename().string() + "-chime.toml");
    std::ofstream(profile_file) << "include = \"9754\"\nname = \"chime-9754\"\n"
                                   "[chime]\nenabled = true\nmode = \"loud\"\n"
                                   "[expectations]\nchime = 12.5\n";
  }
  ~ChimeHost() {
    std::error_code ec;
    fs::remove(profile_file, ec);
  }
  std::string mode() const { return read_file(dir.path() / fs::path(kPath).relative_path()); }
  stack::Session session(const std::string& steps = "") const {
    return stack::open_session({dir.path().string(), "", profile_file.string(), steps, false});
  }
};

const stack::Knob* chime_knob(const std::vector<stack::Knob>& knobs) {
  for (const auto& k : knobs)
    if (k.step == kName) return &k;
  return nullptr;
}

}  // namespace

TEST_CASE("an added step is in the registry and in --steps") {
  REQUIRE(stack::find_step(10));
  CHECK(stack::find_step(10)->name == kName);
  CHECK(stack::all_steps().back().name == kName);
  CHECK(stack::parse_steps("chime") == std::vector<int>{10});
  CHECK(stack::parse_steps("9-10") == std::vector<int>{9, 10});
  CHECK(stack::parse_steps("").back() == 10);
  CHECK_THROWS_WITH_AS(stack::parse_steps("11"), doctest::Contains("10=chime"),
                       std::invalid_argument);
}

TEST_CASE("an added step's section is read, checked and shown by `profile show`") {
  ChimeHost h;
  auto p = profile::load_profile(h.profile_file.string());
  const auto& c = p.extra.get<ChimeParams>(kName);
  CHECK(c.enabled);
  CHECK(c.mode == "loud");
  CHECK(p.origins.at("chime.mode").line == 5);
  CHECK(p.expectations.at("chime") == 12.5);  // its name is an [expectations] key

  auto j = profile::profile_to_json(p);
  CHECK(j["chime"] == nlohmann::json{{"enabled", true}, {"mode", "loud"}});
  auto text = profile::profile_to_text(p);
  CHECK(text.find("\n[chime]\nenabled = true") != std::string::npos);
  CHECK(text.find("mode = \"loud\"") != std::string::npos);
  CHECK(text.find("[spec]") < text.find("[chime]"));  // in step order
  // Without the section, the defaults.
  CHECK_FALSE(profile::load_profile("9754").extra.get<ChimeParams>(kName).enabled);

  CHECK_THROWS_WITH_AS(
      profile::load_profile_text("include = \"9754\"\n[chime]\nmode = \"lod\"\n", "bad.toml"),
      doctest::Contains("chime.mode = \"lod\" is not a valid value; did you mean "
                        "\"loud\"?"),
      profile::ProfileError);
  CHECK_THROWS_WITH_AS(
      profile::load_profile_text("include = \"9754\"\n[chime]\nvolume = 3\n", "bad.toml"),
      doctest::Contains("unknown key 'volume' in [chime]"), profile::ProfileError);
  // Its check runs with the others on every load.
  CHECK_THROWS_WITH_AS(
      profile::load_profile_text(
          "include = \"9754\"\n[bios]\nsmt = \"keep\"\n[chime]\nenabled = true\nmode = \"loud\"\n",
          "bad.toml"),
      doctest::Contains("bad.toml:6:8: a loud chime needs SMT decided"), profile::ProfileError);
}

TEST_CASE("`profile generate` states an added step's keys") {
  ChimeHost h;
  host::Sysroot root(h.dir.path());
  auto topo = host::discover(root);
  profile::HostFacts facts;
  facts.sys = &root;
  auto g = profile::generate_profile(topo, facts, {});
  auto at = g.text.find("\n[chime]\n");
  REQUIRE(at != std::string::npos);
  CHECK(g.text.find("enabled = false", at) != std::string::npos);
  CHECK(g.text.find("mode = \"quiet\"", at) != std::string::npos);
  CHECK(g.profile.origins.count("chime.mode"));  // set by the file, not by default
  CHECK_FALSE(g.profile.extra.get<ChimeParams>(kName).enabled);
}

TEST_CASE("an added step is planned, applied, verified and reverted") {
  ChimeHost h;
  auto s = h.session();
  REQUIRE(chime_knob(s.knobs));

  // plan
  auto plans = stack::plan_knobs(s.sys, s.knobs);
  auto j = stack::plan_to_json(s, plans);
  auto step = std::find_if(j["steps"].begin(), j["steps"].end(),
                           [](const auto& st) { return st["name"] == kName; });
  REQUIRE(step != j["steps"].end());
  CHECK((*step)["number"] == 10);
  CHECK((*step)["title"] == "A chime (test-only step)");
  CHECK((*step)["knobs"][0]["current"] == "quiet");
  CHECK((*step)["knobs"][0]["desired"] == "loud");
  CHECK((*step)["knobs"][0]["status"] == "change");
  CHECK(stack::plan_to_text(s, plans).find("A chime (test-only step)") != std::string::npos);

  // apply: the chime alone (the fixture's other steps are not this test's)
  auto only = h.session("chime");
  REQUIRE(only.knobs.size() == 1);
  auto applied = stack::apply_knobs(only.sys, only.knobs, {false, false, only.profile.name});
  REQUIRE(applied.exit_code == stack::kExitOk);
  REQUIRE(applied.knobs.size() == 1);
  CHECK(applied.knobs[0].step == kName);
  CHECK(h.mode() == "loud");

  // verify
  auto c = stack::make_checklist(stack::plan_knobs(only.sys, only.knobs), only.profile.name, false);
  REQUIRE(c.lines.size() == 1);
  CHECK(c.lines[0].step == kName);
  CHECK(c.ok());

  // revert
  auto r = stack::revert_journal(only.sys);
  REQUIRE(r.exit_code == stack::kExitOk);
  REQUIRE(r.knobs.size() == 1);
  CHECK(r.knobs[0].step == kName);
  CHECK(h.mode() == "quiet");
}

namespace {

// The bench as `epyctune bench` runs it, minus the engine: apply and revert
// are the real ones.
class NoEngineDriver : public bench::StackDriver {
 public:
  using StackDriver::StackDriver;
  bench::Sample measure(const bench::StepRef&) override {
    bench::Sample s;
    s.tok_s = 10;
    modes.push_back(mode());
    return s;
  }
  double bandwidth_gbps(const bench::StepRef&) override { return 1; }
  std::function<std::string()> mode;
  std::vector<std::string> modes;  // the chime's value at each measurement
};

}  // namespace

TEST_CASE("the bench walks an added step") {
  auto refs = bench::bench_steps("");
  REQUIRE_FALSE(refs.empty());
  CHECK(refs.back().name == kName);
  CHECK(refs.back().step == 10);
  CHECK(std::none_of(refs.begin(), refs.end(), [](const auto& r) { return r.name == "verify"; }));

  ChimeHost h;
  auto s = h.session();
  testing::ScratchDir work;
  NoEngineDriver d(s, {}, work.path());
  d.mode = [&] { return h.mode(); };
  bench::StepwiseOptions o;
  o.steps = bench::bench_steps("chime");
  o.repeat = 2;
  auto res = bench::run_stepwise(d, o);
  REQUIRE(res.rows.size() == 2);
  CHECK(res.rows[1].ref.name == kName);
  CHECK(res.rows[1].state == bench::RowState::measured);
  // Stock, then the chime applied, each round; stock again at the end.
  CHECK(d.modes == std::vector<std::string>{"quiet", "loud", "quiet", "loud"});
  CHECK(h.mode() == "quiet");
  CHECK_FALSE(stack::Journal(s.sys).load().exists);
}
